/**
 * The `antler` command line (@effect/cli):
 *
 *   antler run "<prompt>" [--thread ID] [--model NAME] [--base-url URL] [--api-key KEY] [--config FILE] [--json]
 *              [--agent NAME] [--subagents]
 *   antler threads list [--json]
 *   antler threads show ID [--json]
 *   antler upload THREAD FILE... [--config FILE] [--json]
 *   antler agents list | show NAME | create NAME (see AgentsCommand)
 *   antler demo
 *
 * Exit codes: 0 success; 1 the run failed (or a thread was not found); 2 usage or configuration error;
 * 3 the run is waiting for the user; 130 cancelled with Ctrl-C (completed steps stay saved).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import type * as Usage from "@effect/cli/Usage"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as ConfigError from "effect/ConfigError"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as ConfigFile from "../layers/ConfigFile.js"
import { AppConfigService } from "../services/AppConfig.js"
import type { RunEndEvent } from "../services/RunEvents.js"
import { SafeId } from "../services/Sandbox.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as M from "../state/Message.js"
import type * as Redact from "../state/Redact.js"
import * as AgentsCommand from "./AgentsCommand.js"
import * as App from "./App.js"
import * as Demo from "./Demo.js"
import * as Factory from "./Factory.js"
import * as Render from "./Render.js"
import * as Upload from "./Upload.js"

// ---------------------------------------------------------------------------------------------------------
// Output and exit codes

/** Exit codes of the CLI. */
export const ExitCode = {
  ok: 0,
  runFailed: 1,
  usage: 2,
  waiting: 3,
  cancelled: 130
} as const

/** Ends the command with an exit code; its message (if any) has already been printed. */
export class CliExit extends Data.TaggedError("CliExit")<{ readonly code: number }> {}

const fail = (code: number, message: string) =>
  Effect.zipRight(
    Render.writeError(message.endsWith("\n") ? message : `${message}\n`),
    Effect.fail(new CliExit({ code }))
  )

const messageOf = (error: unknown): string => String((error as { message?: unknown } | undefined)?.message ?? error)

/**
 * Reports an unexpected failure (`what: message`, secrets and control characters neutralised) with exit
 * code 1; a `CliExit` passes through.
 */
const reportFailure = (what: string, redact?: Redact.Redactor) => (error: unknown) =>
  error instanceof CliExit
    ? Effect.fail(error)
    : fail(ExitCode.runFailed, `${what}: ${Render.safeText(messageOf(error), redact)}`)

/** The exit code of a run that ended with `end`. */
export const exitCodeOf = (end: RunEndEvent): number => {
  switch (end.status) {
    case "success":
      return ExitCode.ok
    case "interrupted":
      return ExitCode.waiting
    case "cancelled":
      return ExitCode.cancelled
    case "error":
      return ExitCode.runFailed
  }
}

/**
 * Runs `effect` with the process's loggers (stderr, as `main` sets them up) cleaning what they print: log
 * messages and annotations (a model error's message, a server's echo) have secrets hidden and control
 * characters made visible.
 */
const withCleanLogs = (redact: Redact.Redactor) => <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  const clean = (value: unknown): unknown =>
    typeof value === "string" ? Render.safeText(value, redact) : Array.isArray(value) ? value.map(clean) : value
  return Effect.locallyWith(effect, FiberRef.currentLoggers, HashSet.map((logger) =>
    Logger.mapInputOptions(logger, (options) => ({
      ...options,
      message: clean(options.message),
      annotations: HashMap.map(options.annotations, clean)
    }))))
}

/** The data directory, checked (and created when missing) before anything uses it; a usage error if unusable. */
const dataHome = (home: string) =>
  ConfigFile.ensureHome(home).pipe(
    Effect.catchTag("HomeError", (error) =>
      fail(
        ExitCode.usage,
        `Cannot use the data directory ${home} (ANTLER_HOME, default ./.antler): ${error.message}.\n` +
          "Set ANTLER_HOME to a directory you can write to."
      ))
  )

const loadConfig = (path: string | undefined) =>
  ConfigFile.load(path).pipe(
    Effect.catchTag("ConfigError", (error) =>
      fail(
        ExitCode.usage,
        `Configuration error (${error.issues.length} problem${error.issues.length === 1 ? "" : "s"}):\n${error.message}`
      )),
    Effect.tap((app) => dataHome(app.home)),
    Effect.tap((app) =>
      app.ignored.length > 0
        ? Render.writeError(`warning: ${app.source}: keys not used by Antler (ignored): ${app.ignored.join(", ")}\n`)
        : Effect.void
    )
  )

const threadIdFrom = (value: string) =>
  Either.match(Schema.decodeUnknownEither(SafeId)(value), {
    onLeft: () =>
      fail(
        ExitCode.usage,
        `Invalid thread id "${value}": ids are 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit.`
      ),
    onRight: Effect.succeed
  })

// ---------------------------------------------------------------------------------------------------------
// antler run

const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON object per line instead of text"))

const runCommand = Command.make(
  "run",
  {
    prompt: Args.text({ name: "prompt" }).pipe(Args.atLeast(1), Args.withDescription("What to ask (words are joined)")),
    thread: Options.text("thread").pipe(
      Options.optional,
      Options.withDescription("Continue this thread (default: a new one)")
    ),
    model: Options.text("model").pipe(
      Options.optional,
      Options.withDescription("A configured model name, or the model id for --base-url")
    ),
    baseUrl: Options.text("base-url").pipe(
      Options.optional,
      Options.withDescription("An OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    ),
    apiKey: Options.redacted("api-key").pipe(
      Options.optional,
      Options.withDescription("The API key for --base-url (visible in the process list; prefer OPENAI_API_KEY)")
    ),
    config: Options.text("config").pipe(
      Options.optional,
      Options.withDescription("config.yaml to use (default: ANTLER_CONFIG, else ./config.yaml)")
    ),
    files: Options.file("file", { exists: "yes" }).pipe(
      Options.repeated,
      Options.withDescription("Upload this file with the message (repeatable); documents also get a Markdown copy")
    ),
    agent: Options.text("agent").pipe(
      Options.optional,
      Options.withDescription("Run this custom agent (see antler agents list)")
    ),
    subagents: Options.boolean("subagents").pipe(
      Options.withDescription("Let the agent delegate sub-tasks to subagents (the task tool)")
    ),
    json
  },
  (args) =>
    Effect.gen(function*() {
      const app = yield* loadConfig(Option.getOrUndefined(args.config))
      const threadId = Option.isSome(args.thread) ? yield* threadIdFrom(args.thread.value) : M.newId()
      const env = yield* App.openAiEnv
      const choice = yield* Either.match(
        App.chooseModel(app.config.models, {
          model: Option.getOrUndefined(args.model),
          baseUrl: Option.getOrUndefined(args.baseUrl),
          apiKey: Option.getOrUndefined(Option.map(args.apiKey, Redacted.value))
        }, env),
        { onLeft: (error) => fail(ExitCode.usage, error.message), onRight: Effect.succeed }
      )
      const redact = App.redactor(choice.models, env)
      const runId = M.newId()
      const settings = AgentsCommand.runSettings(choice.name, {
        model: Option.getOrUndefined(args.model),
        agent: Option.getOrUndefined(args.agent),
        subagents: args.subagents
      })
      const program = Effect.gen(function*() {
        const factory = yield* Factory.AgentFactory
        // the run's agent is built before anything is printed: a configuration it cannot be built from is a
        // configuration error (exit 2), not a failed run
        yield* Effect.flatMap(factory.resolve(settings), factory.agent)
        if (!args.json) {
          const s = Render.style(Render.useColor())
          const status = Option.isSome(args.thread) ? "continuing" : "new; continue it with --thread"
          const where = choice.baseUrl ? ` at ${choice.baseUrl}` : ""
          const line = Render.safeText(`thread ${threadId} (${status}) · model ${choice.model}${where}`, redact)
          yield* Render.write(s.dim(`${line}\n`))
        }
        const uploaded = args.files.length === 0 ? [] : yield* uploadFiles(app, threadId, args.files, args.json)
        return yield* Render.run(
          factory.run({
            threadId,
            runId,
            prompt: args.prompt.join(" "),
            files: Upload.messageFiles(uploaded),
            settings
          }),
          { json: args.json, threadId, runId, redact }
        )
      })
      const end = yield* program.pipe(
        Effect.provide(App.factoryLayer(app, choice, {}, redact)),
        withCleanLogs(redact),
        Effect.catchTags({
          SettingsError: (error) => fail(ExitCode.usage, `Invalid run settings: ${error.message}`),
          ChainError: (error) => fail(ExitCode.usage, `Configuration error: ${error.message}`),
          GuardrailConfigError: (error) =>
            fail(ExitCode.usage, `Configuration error:\n${app.source ?? "config.yaml"}: ${error.message}`),
          SafetyDetectorConfigError: (error) =>
            fail(ExitCode.usage, `Configuration error:\n${app.source ?? "config.yaml"}: ${error.message}`)
        }),
        Effect.catchIf(ConfigError.isConfigError, (error) =>
          fail(ExitCode.usage, `Model configuration error: ${Render.safeText(String(error), redact)}`)),
        Effect.catchAll(reportFailure("error", redact))
      )
      const code = exitCodeOf(end)
      if (code !== ExitCode.ok) return yield* Effect.fail(new CliExit({ code }))
    })
).pipe(Command.withDescription("Run one turn of a thread and stream it"))

// ---------------------------------------------------------------------------------------------------------
// antler upload

const uploadFiles = (app: AppConfigService["Type"], threadId: string, files: ReadonlyArray<string>, json: boolean) =>
  Effect.gen(function*() {
    const results = yield* Upload.upload(threadId, files).pipe(
      Effect.provideService(AppConfigService, app),
      Effect.catchTag("UploadError", (error) =>
        fail(error.reason === "io" ? ExitCode.runFailed : ExitCode.usage, `upload refused: ${error.message}`))
    )
    if (!json) for (const result of results) yield* Render.write(`${Upload.describeResult(result)}\n`)
    return results
  })

/** Fails (exit 1) unless the thread is saved in the store: an upload never starts a thread by itself. */
const requireThread = (home: string, threadId: string) =>
  Effect.gen(function*() {
    const saved = Fs.existsSync(App.storeLocation(home)) &&
      Option.isSome(yield* Effect.flatMap(ThreadStore, (store) => store.load(threadId)).pipe(
        Effect.provide(App.storeLayer(home))
      ))
    if (!saved) {
      return yield* fail(
        ExitCode.runFailed,
        `No thread "${threadId}" in ${home}; nothing was uploaded. Start it with: antler run --thread ${threadId} ` +
          `--file FILE "<prompt>", or list the saved threads with: antler threads list`
      )
    }
  })

const uploadCommand = Command.make(
  "upload",
  {
    thread: Args.text({ name: "thread" }).pipe(Args.withDescription("The thread to upload into")),
    files: Args.file({ name: "file", exists: "yes" }).pipe(
      Args.atLeast(1),
      Args.withDescription("Files to upload (documents also get a Markdown copy)")
    ),
    config: Options.text("config").pipe(
      Options.optional,
      Options.withDescription("config.yaml to use (default: ANTLER_CONFIG, else ./config.yaml)")
    ),
    json
  },
  (args) =>
    Effect.gen(function*() {
      const app = yield* loadConfig(Option.getOrUndefined(args.config))
      const threadId = yield* threadIdFrom(args.thread)
      yield* requireThread(app.home, threadId)
      const results = yield* uploadFiles(app, threadId, args.files, args.json)
      if (args.json) for (const result of results) yield* Render.write(`${JSON.stringify(result)}\n`)
    }).pipe(Effect.catchAll(reportFailure("upload failed")))
).pipe(Command.withDescription("Copy files into a thread's uploads (documents also get a Markdown copy)"))

// ---------------------------------------------------------------------------------------------------------
// antler threads

const withStore = <A, E>(effect: Effect.Effect<A, E, ThreadStore>) =>
  Effect.gen(function*() {
    const home = yield* Effect.flatMap(ConfigFile.home, dataHome)
    return yield* effect.pipe(Effect.provide(App.storeLayer(home)))
  }).pipe(Effect.catchAll(reportFailure("error")))

const listCommand = Command.make("list", { json }, (args) =>
  withStore(Effect.gen(function*() {
    const home = yield* ConfigFile.home
    const threads = yield* (yield* ThreadStore).list
    if (args.json) yield* Render.write(`${JSON.stringify(threads)}\n`)
    else yield* Render.write(Render.threadList(threads, home, { color: Render.useColor() }))
  }))).pipe(Command.withDescription("List saved threads"))

const showCommand = Command.make(
  "show",
  { id: Args.text({ name: "id" }).pipe(Args.withDescription("The thread id")), json },
  (args) =>
    withStore(Effect.gen(function*() {
      const threadId = yield* threadIdFrom(args.id)
      const home = yield* ConfigFile.home
      const loaded = yield* (yield* ThreadStore).load(threadId)
      if (Option.isNone(loaded)) {
        return yield* fail(
          ExitCode.runFailed,
          `No thread "${threadId}" in ${home}. List the saved threads with: antler threads list`
        )
      }
      if (args.json) yield* Render.write(`${JSON.stringify(loaded.value)}\n`)
      else yield* Render.write(Render.thread(loaded.value, { color: Render.useColor() }))
    }))
).pipe(Command.withDescription("Show a thread's full state"))

const threadsCommand = Command.make("threads").pipe(
  Command.withDescription("Saved threads"),
  Command.withSubcommands([listCommand, showCommand])
)

// ---------------------------------------------------------------------------------------------------------
// antler demo

const demoCommand = Command.make("demo", {}, () =>
  Effect.flatMap(ConfigFile.home, dataHome).pipe(
    Effect.zipRight(Demo.run),
    Effect.flatMap((code) => (code === ExitCode.ok ? Effect.void : Effect.fail(new CliExit({ code })))),
    Effect.catchAll(reportFailure("demo failed"))
  )).pipe(Command.withDescription("A complete run, offline, with a SCRIPTED model on a local server"))

// ---------------------------------------------------------------------------------------------------------
// antler agents

const agents = AgentsCommand.make({
  exitCode: ExitCode,
  fail,
  exit: (code) => Effect.fail(new CliExit({ code })),
  loadConfig,
  home: Effect.flatMap(ConfigFile.home, dataHome),
  threadIdFrom,
  reportFailure,
  exitCodeOf
})

// ---------------------------------------------------------------------------------------------------------
// The root

const root = Command.make("antler", {}, () =>
  Render.write([
    "antler: an agent harness on Effect. Commands:",
    "  antler run \"<prompt>\" [--thread ID] [--model NAME] [--base-url URL] [--api-key KEY] [--config FILE] [--json]",
    "  antler threads list [--json]",
    "  antler threads show ID [--json]",
    "  antler upload THREAD FILE... [--json]",
    "  antler agents list | show NAME | create NAME",
    "  antler demo",
    "Run `antler --help` for details.",
    ""
  ].join("\n"))).pipe(Command.withSubcommands([runCommand, threadsCommand, uploadCommand, agents.command, demoCommand]))

const version = (): string => {
  try {
    return JSON.parse(Fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version ?? "0.0.0"
  } catch {
    return "0.0.0"
  }
}

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

/** @effect/cli's own options, accepted by every command (`--completions` and `--log-level` take a value). */
export const BUILT_IN_OPTIONS: Readonly<Record<string, boolean>> = {
  "--help": false,
  "-h": false,
  "--version": false,
  "--wizard": false,
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

const specOf = (
  name: string,
  command: Command.Command<any, any, any, any>,
  subcommands: ReadonlyArray<readonly [string, CommandSpec]> = []
): CommandSpec => ({ name, ...usageNames(Command.getUsage(command)), subcommands: Object.fromEntries(subcommands) })

// Edit distance counting a swap of two neighbouring letters as one edit (`--thraed` is one edit from `--thread`).
const editDistance = (a: string, b: string): number => {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => i + j))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
      }
    }
  }
  return d[a.length]![b.length]!
}

/**
 * The known name closest to a mistyped one, if one is close: the only name it is a prefix of, else the
 * nearest by edit distance (at most 1 for names of up to 4 letters, else 2). Dashes and case are ignored.
 */
export const closestName = (given: string, known: Iterable<string>): string | undefined => {
  const bare = (name: string) => name.replace(/^-+/, "").toLowerCase()
  const wanted = bare(given)
  const names = [...known]
  const extending = wanted.length >= 2 ? names.filter((name) => bare(name).startsWith(wanted)) : []
  if (extending.length === 1) return extending[0]
  let best: string | undefined
  let bestDistance = wanted.length <= 4 ? 2 : 3
  for (const name of names) {
    const distance = editDistance(wanted, bare(name))
    if (distance < bestDistance) {
      best = name
      bestDistance = distance
    }
  }
  return best
}

/**
 * The first problem of a command line (the arguments after the program), or undefined: an option the
 * command does not have (with the closest one it does have), an option without its value, or an unknown
 * command. Everything after `--` is an argument, so a prompt may start with a dash: `antler run -- "-x"`.
 */
export const commandLineProblem = (spec: CommandSpec, args: ReadonlyArray<string>): string | undefined => {
  let command = spec
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!
    if (token === "--") return undefined
    if (token.startsWith("-") && token !== "-") {
      const equals = token.startsWith("--") ? token.indexOf("=") : -1
      const name = equals > 2 ? token.slice(0, equals) : token
      const takesValue = entry(command.options, name) ?? entry(BUILT_IN_OPTIONS, name)
      if (takesValue === undefined) return unknownOption(command, name)
      if (takesValue && equals === -1) {
        const value = args[i + 1]
        if (value === undefined || value.startsWith("--")) {
          return `${command.name}: ${name} needs a value: ${name} VALUE (or ${name}=VALUE for a value that starts ` +
            `with "--").\nRun \`${command.name} --help\` for its usage.`
        }
        i++
      }
    } else if (Object.keys(command.subcommands).length > 0 && !command.args) {
      const next = entry(command.subcommands, token)
      if (next === undefined) {
        const commands = Object.keys(command.subcommands)
        const near = closestName(token, commands)
        return `${command.name}: unknown command ${token}` +
          (near !== undefined ? `; did you mean ${near}?` : `. Commands: ${commands.join(", ")}.`) +
          `\nRun \`${command.name} --help\` for its usage.`
      }
      command = next
    }
  }
  return undefined
}

const unknownOption = (command: CommandSpec, name: string): string => {
  const own = Object.keys(command.options).filter((option) => option.startsWith("--"))
  const near = closestName(name, [...own, ...Object.keys(BUILT_IN_OPTIONS).filter((o) => o.startsWith("--"))])
  const hint = near !== undefined
    ? `; did you mean ${near}?`
    : own.length > 0
    ? `. Its options: ${own.join(", ")}.`
    : "."
  const dash = command.args && near === undefined
    ? `\nAn argument that starts with "-" goes after --: ${command.name} -- "${name} ..."`
    : ""
  return `${command.name}: unknown option ${name}${hint}${dash}\nRun \`${command.name} --help\` for its usage.`
}

/** The command tree the check knows, read from the commands' own options and arguments. */
export const commandSpec: CommandSpec = specOf("antler", Command.make("antler"), [
  ["run", specOf("antler run", runCommand)],
  ["threads", specOf("antler threads", Command.make("threads"), [
    ["list", specOf("antler threads list", listCommand)],
    ["show", specOf("antler threads show", showCommand)]
  ])],
  ["upload", specOf("antler upload", uploadCommand)],
  ["agents", specOf("antler agents", Command.make("agents"), agents.subcommands.map(([name, command]) =>
    [name, specOf(`antler agents ${name}`, command)] as const))],
  ["demo", specOf("antler demo", demoCommand)]
])

/**
 * The CLI as an effect over `process.argv`-shaped arguments. The command line is checked first: a problem
 * is a usage error (exit 2) and nothing runs.
 */
export const cli = (argv: ReadonlyArray<string>) => {
  const problem = commandLineProblem(commandSpec, argv.slice(2))
  return problem === undefined
    ? Command.run(root, { name: "antler", version: version() })(argv)
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
  return ExitCode.runFailed
}

/** Whether a failure was already reported to the user (so it must not be printed again). */
export const isReported = (cause: Cause.Cause<unknown>): boolean => {
  if (Cause.isInterruptedOnly(cause)) return true
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) &&
    (failure.value instanceof CliExit || ValidationError.isValidationError(failure.value))
}
