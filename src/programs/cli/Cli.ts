/**
 * The `antler` command line: the commands (`COMMANDS`, one module each under src/programs/), a check of
 * the command line before @effect/cli parses it (unknown options with the closest known one, options without
 * their value), and help written from each command's `Help`:
 *
 *   antler run "<prompt>" [--thread ID | --continue] [--model NAME] [--base-url URL] [--api-key KEY]
 *              [--config FILE] [--file PATH]... [--plan] [--agent NAME] [--subagents] [--json] [--verbose]
 *   antler threads list | show ID | delete ID
 *   antler upload THREAD FILE... [--config FILE] [--json]
 *   antler tools list [--model NAME] [--config FILE] [--json]
 *   antler skills list [--config FILE] [--json]
 *   antler memory show|clear [--agent NAME] [--user ID] [--config FILE] [--json]
 *   antler agents list | show NAME | create NAME [MESSAGE...]
 *   antler serve [--host HOST] [--port PORT] [--config FILE] [--model NAME] [--base-url URL] [--api-key KEY]
 *   antler demo
 *
 * Exit codes: 0 success; 1 the run failed, or was refused (another run holds the thread), or a thread was not
 * found; 2 usage or configuration error; 3 the run is waiting for the user; 130 cancelled with Ctrl-C
 * (completed steps stay saved).
 */
import * as Command from "@effect/cli/Command"
import type * as Usage from "@effect/cli/Usage"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as PackageRoot from "../PackageRoot.js"
import * as ConfigFile from "../../layers/ConfigFile.js"
import * as AgentsCommand from "./AgentsCommand.js"
import * as CliCommand from "./CliCommand.js"
import { closestName } from "./Closest.js"
import { CliExit, ExitCode, fail } from "./CliCommand.js"
import * as DemoCommand from "./DemoCommand.js"
import * as Help from "./Help.js"
import * as LogSettings from "./LogSettings.js"
import * as MemoryCommand from "./MemoryCommand.js"
import * as Render from "./Render.js"
import * as RunCommand from "./RunCommand.js"
import * as ServeCommand from "./ServeCommand.js"
import * as SkillsCommand from "./SkillsCommand.js"
import * as ThreadsCommand from "./ThreadsCommand.js"
import * as ToolsCommand from "./ToolsCommand.js"
import * as UploadCommand from "./UploadCommand.js"

export { CliExit, ExitCode, exitCodeOf } from "./CliCommand.js"
export { closestName } from "./Closest.js"

// ---------------------------------------------------------------------------------------------------------
// The commands: add a command here (its module exports an `Entry`; see CliCommand.ts)

/** The commands of `antler`, in the order its help lists them. */
export const COMMANDS: ReadonlyArray<CliCommand.Entry> = [
  RunCommand.entry,
  ThreadsCommand.entry,
  UploadCommand.entry,
  ToolsCommand.entry,
  SkillsCommand.entry,
  MemoryCommand.entry,
  AgentsCommand.entry,
  ServeCommand.entry,
  DemoCommand.entry
]

const version = (): string => {
  try {
    return JSON.parse(Fs.readFileSync(Path.join(PackageRoot.root(), "package.json"), "utf8")).version ?? "0.0.0"
  } catch {
    return "0.0.0"
  }
}

const root = Command.make("antler").pipe(
  Command.withSubcommands(COMMANDS.map((entry) => entry.command) as [CliCommand.Entry["command"]])
)

// ---------------------------------------------------------------------------------------------------------
// Checking the command line before @effect/cli parses it: its `Args.text(...).pipe(Args.atLeast(1))` takes an
// unknown option, an option without its value and everything after them as words of the prompt.

/** What the check knows of a command: its options (each name, aliases included, and whether it takes a value). */
export interface CommandSpec {
  /** As the user types it: `antler run`. */
  readonly name: string
  readonly options: Readonly<Record<string, boolean>>
  /** Whether it takes positional arguments (a prompt, ids, files). */
  readonly args: boolean
  readonly subcommands: Readonly<Record<string, CommandSpec>>
}

// A record's own entry only (a token such as `constructor` is not a command).
const entry = <A>(record: Readonly<Record<string, A>>, key: string): A | undefined =>
  Object.hasOwn(record, key) ? record[key] : undefined

/**
 * The options every command accepts (`--completions` and `--log-level` take a value). @effect/cli's
 * `--wizard` is not among them: it is not offered.
 */
export const BUILT_IN_OPTIONS: Readonly<Record<string, boolean>> = {
  "--help": false,
  "-h": false,
  "--version": false,
  "--completions": true,
  "--log-level": true
}

/** The names in a command's usage: its options (with whether each takes a value) and whether it has arguments. */
export const usageNames = (usage: Usage.Usage): { options: Record<string, boolean>; args: boolean } => {
  const options: Record<string, boolean> = {}
  let args = false
  const walk = (node: Usage.Usage): void => {
    switch (node._tag) {
      case "Named":
        for (const name of node.names) {
          if (name.startsWith("-")) options[name] = Option.isSome(node.acceptedValues)
          else if (name.startsWith("<")) args = true
        }
        return
      case "Optional":
      case "Repeated":
        return walk(node.usage)
      case "Concat":
      case "Alternation":
        walk(node.left)
        return walk(node.right)
      case "Empty":
      case "Mixed":
        return
    }
  }
  walk(usage)
  return { options, args }
}

/** What the check knows of a command entry (and its subcommands), read from its own options and arguments. */
export const specOf = (entry: CliCommand.Entry, prefix = "antler"): CommandSpec => {
  const name = `${prefix} ${entry.name}`
  return {
    name,
    ...usageNames(Command.getUsage(entry.command)),
    subcommands: Object.fromEntries((entry.subcommands ?? []).map((sub) => [sub.name, specOf(sub, name)]))
  }
}

/**
 * One piece of a command line, read against the command tree: an option (with its value, when it takes one),
 * a word (a subcommand's name or an argument), or everything from `--` on.
 */
type Piece =
  | {
    readonly _tag: "Option"
    /** The command it was given to. */
    readonly command: CommandSpec
    readonly name: string
    /** The option and its value, as typed. */
    readonly tokens: ReadonlyArray<string>
    /** Whether no command has it. */
    readonly unknown: boolean
    /** Whether it is one every command takes (and not the command's own of the same name). */
    readonly builtIn: boolean
    /** Whether it takes a value that is missing, or that starts with "--" (`--model --json`). */
    readonly missingValue: boolean
  }
  | {
    readonly _tag: "Word"
    readonly command: CommandSpec
    readonly token: string
    /** Whether the command expects one of its subcommands here. */
    readonly expectsCommand: boolean
    /** The subcommand it names, if it names one where one is expected. */
    readonly next: CommandSpec | undefined
  }
  | { readonly _tag: "Rest"; readonly tokens: ReadonlyArray<string> }

/** The command line (the arguments after the program) in pieces: the one reading that the checks share. */
const pieces = (spec: CommandSpec, args: ReadonlyArray<string>): ReadonlyArray<Piece> => {
  const read: Array<Piece> = []
  let command = spec
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!
    if (token === "--") {
      read.push({ _tag: "Rest", tokens: args.slice(i) })
      break
    }
    if (token.startsWith("-") && token !== "-") {
      const equals = token.startsWith("--") ? token.indexOf("=") : -1
      const name = equals > 2 ? token.slice(0, equals) : token
      const own = entry(command.options, name)
      const builtIn = own === undefined ? entry(BUILT_IN_OPTIONS, name) : undefined
      const takesValue = (own ?? builtIn) === true && equals === -1
      const value = takesValue ? args[i + 1] : undefined
      read.push({
        _tag: "Option",
        command,
        name,
        tokens: value === undefined ? [token] : [token, args[++i]!],
        unknown: own === undefined && builtIn === undefined,
        builtIn: builtIn !== undefined,
        missingValue: takesValue && (value === undefined || value.startsWith("--"))
      })
    } else {
      const expectsCommand = Object.keys(command.subcommands).length > 0 && !command.args
      const next = expectsCommand ? entry(command.subcommands, token) : undefined
      read.push({ _tag: "Word", command, token, expectsCommand, next })
      if (next !== undefined) command = next
    }
  }
  return read
}

/**
 * The first problem of a command line (the arguments after the program), or undefined: an option the
 * command does not have (with the closest one it does have), an option without its value, or an unknown
 * command. Everything after `--` is an argument, so a prompt may start with a dash: `antler run -- "-x"`.
 * `antler`: how the commands the problem suggests are typed where the user is (`CliCommand.invocation`).
 */
export const commandLineProblem = (
  spec: CommandSpec,
  args: ReadonlyArray<string>,
  antler = "antler"
): string | undefined => {
  for (const piece of pieces(spec, args)) {
    const command = piece._tag === "Rest" ? spec : piece.command
    switch (piece._tag) {
      case "Rest":
        return undefined
      case "Option":
        if (piece.unknown) return unknownOption(command, piece.name, antler)
        if (piece.missingValue) {
          const name = piece.name
          return `${command.name}: ${name} needs a value: ${name} VALUE (or ${name}=VALUE for a value that starts ` +
            `with "--").${helpHint(command, antler)}`
        }
        break
      case "Word":
        if (piece.expectsCommand && piece.next === undefined) {
          const commands = Object.keys(command.subcommands)
          const near = closestName(piece.token, commands)
          return `${command.name}: unknown command ${piece.token}` +
            (near !== undefined ? `; did you mean ${near}?` : `. Commands: ${commands.join(", ")}.`) +
            helpHint(command, antler)
        }
    }
  }
  return undefined
}

/**
 * The command line with the options every command accepts (`--log-level error`, `--log-level=error`,
 * `--completions sh`) moved to its front, wherever they stood before `--`. @effect/cli takes them only before
 * the command's own options: after one (`run --json --log-level error hi`) it took them for the prompt's first
 * words. The values of the command's own options are skipped, so `--model --log-level` stays a model's name.
 */
export const hoistBuiltIns = (spec: CommandSpec, args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const hoisted: Array<string> = []
  const rest: Array<string> = []
  for (const piece of pieces(spec, args)) {
    if (piece._tag === "Word") rest.push(piece.token)
    else if (piece._tag === "Option" && piece.builtIn) hoisted.push(...piece.tokens)
    else rest.push(...piece.tokens)
  }
  return [...hoisted, ...rest]
}

/** Whether the command line gives `--log-level` (before `--`, not as an option's value). */
export const logLevelGiven = (spec: CommandSpec, args: ReadonlyArray<string>): boolean =>
  pieces(spec, args).some((piece) => piece._tag === "Option" && piece.builtIn && piece.name === "--log-level")

/** A command as the user types it here: `antler run` with `antler` replaced by how Antler is run (`npx antler`). */
const typed = (command: CommandSpec, antler: string): string => command.name.replace(/^antler(?= |$)/, () => antler)

const helpHint = (command: CommandSpec, antler: string): string =>
  `\nRun \`${typed(command, antler)} --help\` for its usage.`

const unknownOption = (command: CommandSpec, name: string, antler: string): string => {
  const own = Object.keys(command.options).filter((option) => option.startsWith("--"))
  const near = closestName(name, [...own, ...Object.keys(BUILT_IN_OPTIONS).filter((o) => o.startsWith("--"))])
  const hint = near !== undefined
    ? `; did you mean ${near}?`
    : own.length > 0
    ? `. Its options: ${own.join(", ")}.`
    : "."
  const dash = command.args && near === undefined
    ? `\nAn argument that starts with "-" goes after --: ${typed(command, antler)} -- "${name} ..."`
    : ""
  return `${command.name}: unknown option ${name}${hint}${dash}${helpHint(command, antler)}`
}

/** The command tree the check knows, read from the commands' own options and arguments. */
export const commandSpec: CommandSpec = {
  name: "antler",
  options: {},
  args: false,
  subcommands: Object.fromEntries(COMMANDS.map((entry) => [entry.name, specOf(entry)]))
}

// ---------------------------------------------------------------------------------------------------------
// Help and version

/**
 * What a command line asks for before anything runs: help (of the command it names: `--help` anywhere before
 * `--`, no command at all, or a group without its subcommand such as `antler threads`), or the version.
 */
export const request = (
  args: ReadonlyArray<string>
): { readonly kind: "help"; readonly path: ReadonlyArray<string> } | { readonly kind: "version" } | undefined => {
  const path: Array<string> = []
  let group = true
  let help = false
  let words = 0
  for (const piece of pieces(commandSpec, args)) {
    if (piece._tag === "Rest") break
    if (piece._tag === "Option") {
      if (piece.name === "--help" || piece.name === "-h") help = true
      else if (piece.name === "--version" && path.length === 0) return { kind: "version" }
    } else {
      words++
      if (piece.next !== undefined && words === path.length + 1) {
        path.push(piece.token)
        group = Object.keys(piece.next.subcommands).length > 0
      }
    }
  }
  if (help || args.length === 0) return { kind: "help", path }
  if (path.length > 0 && group && words === path.length) return { kind: "help", path }
  return undefined
}

const findEntry = (path: ReadonlyArray<string>): CliCommand.Entry | undefined => {
  let entries: ReadonlyArray<CliCommand.Entry> = COMMANDS
  let found: CliCommand.Entry | undefined
  for (const name of path) {
    found = entries.find((entry) => entry.name === name)
    if (found === undefined) return undefined
    entries = found.subcommands ?? []
  }
  return found
}

/** The help text for a command path (`[]`: the program's; `["threads", "list"]`). */
export const helpText = (path: ReadonlyArray<string>, options: { readonly color: boolean; readonly home: string }) => {
  const style = Render.style(options.color)
  const invocation = CliCommand.invocation()
  const entry = findEntry(path)
  return entry === undefined
    ? Help.root(COMMANDS, { style, invocation, version: version(), home: options.home })
    : Help.command(entry, path.join(" "), { style, invocation })
}

// @effect/cli writes its own messages (a file that does not exist, a value that is not an integer...) in colour:
// plain text unless colour is on. They quote what was typed: its control characters are made visible (the
// colour codes of @effect/cli's own, when on, kept).
const SGR = /(\x1b\[[0-9;]*m)/
const cleanMessage = (color: boolean) => (value: unknown) =>
  typeof value === "string"
    ? value.split(SGR).map((part, i) => (i % 2 === 1 ? (color ? part : "") : Render.safeText(part))).join("")
    : value
const withCleanConsole = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const clean = cleanMessage(Render.useColor())
  return Effect.flatMap(Effect.console, (console) =>
    Effect.withConsole(effect, {
      ...console,
      log: (...args: ReadonlyArray<unknown>) => console.log(...args.map(clean)),
      error: (...args: ReadonlyArray<unknown>) => console.error(...args.map(clean)),
      info: (...args: ReadonlyArray<unknown>) => console.info(...args.map(clean)),
      warn: (...args: ReadonlyArray<unknown>) => console.warn(...args.map(clean))
    }))
}

/**
 * The CLI as an effect over `process.argv`-shaped arguments. Help and the version are answered first; then
 * the command line is checked: a problem is a usage error (exit 2) and nothing runs.
 */
export const cli = (argv: ReadonlyArray<string>) => {
  const args = argv.slice(2)
  const asked = request(args)
  if (asked?.kind === "version") return Render.write(`antler ${version()}\n`)
  if (asked?.kind === "help") {
    return Effect.flatMap(
      ConfigFile.home,
      (home) => Render.write(helpText(asked.path, { color: Render.useColor(), home }))
    )
  }
  const problem = commandLineProblem(commandSpec, args, CliCommand.invocation())
  return problem === undefined
    ? withCleanConsole(
      Command.run(root, { name: "antler", version: version() })(
        [...argv.slice(0, 2), ...hoistBuiltIns(commandSpec, args)]
      )
    ).pipe(Effect.provideService(LogSettings.LogLevelGiven, logLevelGiven(commandSpec, args)))
    : fail(ExitCode.usage, problem)
}

/** The exit code of a finished CLI effect. */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit)) return ExitCode.ok
  if (Cause.isInterruptedOnly(exit.cause)) return ExitCode.cancelled
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof CliExit) return error.code
    if (ValidationError.isValidationError(error)) return ExitCode.usage
  }
  // (an exit code that must outlive the interruption stopping the command: `antler serve` in a cluster)
  const defect = Cause.dieOption(exit.cause)
  if (Option.isSome(defect) && defect.value instanceof CliExit) return defect.value.code
  return ExitCode.runFailed
}

/** Whether a failure was already reported to the user (so it must not be printed again). */
export const isReported = (cause: Cause.Cause<unknown>): boolean => {
  if (Cause.isInterruptedOnly(cause)) return true
  const failure = Cause.failureOption(cause)
  const defect = Cause.dieOption(cause)
  return (Option.isSome(failure) &&
    (failure.value instanceof CliExit || ValidationError.isValidationError(failure.value))) ||
    (Option.isSome(defect) && defect.value instanceof CliExit)
}
