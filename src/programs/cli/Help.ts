/**
 * `antler --help` and `antler <command> --help`: written from each command's `Help` (its own words, every
 * option and argument described, examples), wrapped to the terminal's width, in colour only on a terminal
 * without `NO_COLOR`. Pure string building.
 */
import type { Entry, Help } from "./CliCommand.js"
import type { Style } from "./Render.js"

/** What the help of every command mentions besides its own options. */
export const GLOBAL_OPTIONS: ReadonlyArray<readonly [string, string]> = [
  ["-h, --help", "Show help (for a command: antler run --help)"],
  ["--version", "Print Antler's version"],
  [
    "--log-level LEVEL",
    "How much Antler logs on stderr: all, trace, debug, info, warning (the default), error, fatal or none"
  ],
  ["--completions SHELL", "Print a completion script for sh, bash, fish or zsh"]
]

/** Options of the help renderers. */
export interface HelpOptions {
  readonly style: Style
  /** The command that runs Antler here (`antler`, `npx antler`), for usage lines and examples. */
  readonly invocation: string
  /** Columns to wrap at (default 100). */
  readonly width?: number
}

/** Words wrapped to `width` columns, every line after the first indented by `indent` spaces. */
export const wrap = (text: string, width: number, indent: number): string => {
  const lines: Array<string> = []
  for (const paragraph of text.split("\n")) {
    let line = ""
    for (const word of paragraph.split(/ +/)) {
      if (line !== "" && indent + line.length + 1 + word.length > width) {
        lines.push(line)
        line = word
      } else {
        line = line === "" ? word : `${line} ${word}`
      }
    }
    lines.push(line)
  }
  return lines.join(`\n${" ".repeat(indent)}`)
}

const table = (rows: ReadonlyArray<readonly [string, string]>, options: HelpOptions, left = 2): string => {
  const width = options.width ?? 100
  const column = Math.min(28, Math.max(...rows.map(([name]) => name.length)) + 2)
  return rows.map(([name, text]) => {
    const head = `${" ".repeat(left)}${options.style.bold(name)}`
    const pad = name.length + 2 <= column ? " ".repeat(column - name.length) : `\n${" ".repeat(left + column)}`
    return `${head}${pad}${wrap(text, width, left + column)}`
  }).join("\n")
}

const heading = (title: string, options: HelpOptions) => options.style.bold(title)

/** The help of one command: `path` is how it is typed after the program (`threads list`). */
export const command = (entry: Entry, path: string, options: HelpOptions): string => {
  const help: Help = entry.help
  const width = options.width ?? 100
  const parts: Array<string> = []
  parts.push(`${options.style.bold(`antler ${path}`)}: ${help.summary}`)
  parts.push(`${heading("Usage", options)}\n${help.usage.map((line) => `  ${options.invocation} ${line}`).join("\n")}`)
  if (help.description !== undefined) {
    parts.push(help.description.split("\n\n").map((paragraph) => wrap(paragraph, width, 0)).join("\n\n"))
  }
  if (entry.subcommands !== undefined && entry.subcommands.length > 0) {
    const rows = entry.subcommands.map((sub) => [`${path} ${sub.name}`, sub.help.summary] as const)
    parts.push(`${heading("Commands", options)}\n${table(rows, options)}`)
  }
  if (help.arguments !== undefined && help.arguments.length > 0) {
    parts.push(`${heading("Arguments", options)}\n${table(help.arguments, options)}`)
  }
  if (help.options !== undefined && help.options.length > 0) {
    parts.push(`${heading("Options", options)}\n${table(help.options, options)}`)
  }
  if (help.examples !== undefined && help.examples.length > 0) {
    parts.push(`${heading("Examples", options)}\n${examples(help.examples, options)}`)
  }
  parts.push(`${heading("Global options", options)}\n${table(GLOBAL_OPTIONS, options)}`)
  return `${parts.join("\n\n")}\n`
}

const examples = (rows: ReadonlyArray<readonly [string, string]>, options: HelpOptions): string =>
  rows.map(([line, what]) =>
    `  ${options.style.dim(`# ${wrap(what, (options.width ?? 100) - 4, 4).replace(/\n {4}/g, "\n  # ")}`)}\n` +
    `  ${options.invocation} ${line}`
  ).join("\n")

/** The help of the program: what it is, its commands (subcommands included), where its data lives. */
export const root = (
  entries: ReadonlyArray<Entry>,
  options: HelpOptions & { readonly version: string; readonly home: string }
): string => {
  const width = options.width ?? 100
  const rows: Array<readonly [string, string]> = []
  for (const entry of entries) {
    if (entry.subcommands === undefined || entry.subcommands.length === 0) rows.push([entry.name, entry.help.summary])
    else for (const sub of entry.subcommands) rows.push([`${entry.name} ${sub.name}`, sub.help.summary])
  }
  const parts = [
    wrap(
      `${options.style.bold("antler")} ${options.version}: an agent harness on Effect. It runs an AI agent in your ` +
        "terminal against any OpenAI-compatible model, with tools in a sandbox, and keeps every conversation " +
        "(thread) so you can continue it.",
      width,
      0
    ),
    `${heading("Usage", options)}\n  ${options.invocation} <command> [options]\n` +
    `  ${options.invocation} <command> --help`,
    `${heading("Commands", options)}\n${table(rows, options)}`,
    `${heading("Global options", options)}\n${table(GLOBAL_OPTIONS, options)}`,
    `${heading("Where things are", options)}\n${
      table([
        ["Data", `Threads, uploads and the agent's files: $ANTLER_HOME, else ~/.antler (here: ${options.home})`],
        ["Config", "--config FILE, else $ANTLER_CONFIG or $DEER_FLOW_CONFIG_PATH, else ./config.yaml"],
        ["Model", "config.yaml, or --base-url/--model/--api-key, or OPENAI_API_KEY/OPENAI_BASE_URL/OPENAI_MODEL"]
      ], options)
    }`,
    `${heading("Examples", options)}\n${
      examples([
        ["demo", "A complete run, offline, with a scripted model"],
        [
          "run --base-url http://localhost:11434/v1 --model llama3.2 \"What is in this directory?\"",
          "Ask a local model"
        ],
        ["run --continue \"And now in French\"", "Continue the most recent thread"],
        ["threads list", "The saved threads, newest first, with their status"]
      ], options)
    }`
  ]
  return `${parts.join("\n\n")}\n`
}
