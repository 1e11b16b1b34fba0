/**
 * What every `antler` command is made of: its @effect/cli command plus its help (`Entry`), exit codes and
 * how a command ends with one (`fail`, `CliExit`), loading the configuration and the data directory, options
 * several commands share, and the hints a command prints (`invocation`: the command that works here).
 *
 * A new command is one module under src/programs/ exporting an `Entry` (see RunCommand.ts, ThreadsCommand.ts)
 * and one line in `Cli.COMMANDS`.
 */
import type * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import type * as ValidationError from "@effect/cli/ValidationError"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Cause from "effect/Cause"
import * as ConfigError from "effect/ConfigError"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../layers/ConfigFile.js"
import * as TextFile from "../../layers/TextFile.js"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { RunEndEvent } from "../../services/RunEvents.js"
import { SafeId } from "../../services/Sandbox.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import * as PackageRoot from "../PackageRoot.js"
import * as App from "../App.js"
import * as CustomAgents from "../CustomAgents.js"
import * as Closest from "./Closest.js"
import * as McpTaskRequirement from "../McpTaskRequirement.js"
import * as Render from "./Render.js"
import * as ToolAssembly from "../ToolAssembly.js"

// ---------------------------------------------------------------------------------------------------------
// Commands and their help

/** The help of a command, as `antler <command> --help` prints it. Every option and argument is described. */
export interface Help {
  /** One line, for the list of commands. */
  readonly summary: string
  /** Usage lines, without the program name: `run [options] <prompt>...`. */
  readonly usage: ReadonlyArray<string>
  /** What the command does, in a few sentences (paragraphs separated by blank lines). */
  readonly description?: string
  /** Each positional argument and what it is: `["<prompt>...", "What to ask ..."]`. */
  readonly arguments?: ReadonlyArray<readonly [string, string]>
  /** Each option, as typed with its value, and what it does: `["--thread ID", "Continue this thread"]`. */
  readonly options?: ReadonlyArray<readonly [string, string]>
  /** Command lines (without the program name) and what each does. */
  readonly examples?: ReadonlyArray<readonly [string, string]>
}

/**
 * A command of the `antler` CLI: its name, the @effect/cli command that parses and runs it, and its help. A command
 * may use the file system, which `main` provides (Node's, with the rest of `NodeContext.layer`).
 */
export interface Entry {
  readonly name: string
  readonly command: Command.Command<any, FileSystem.FileSystem, CliExit | ValidationError.ValidationError, any>
  readonly help: Help
  /** Subcommands (`threads list`), whose commands `command` already has. */
  readonly subcommands?: ReadonlyArray<Entry>
}

// ---------------------------------------------------------------------------------------------------------
// Exit codes

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

/**
 * Prints `message` on stderr and ends the command with `code`. A message may name what the user typed (a thread
 * id, an option, a command) or what a file holds: its control characters are made visible and URL credentials
 * and bearer tokens hidden (`Render.safeText`), whatever its caller did.
 */
export const fail = (code: number, message: string) =>
  Effect.zipRight(
    Render.writeError(Render.safeText(message.endsWith("\n") ? message : `${message}\n`)),
    Effect.fail(new CliExit({ code }))
  )

const messageOf = (error: unknown): string => String((error as { message?: unknown } | undefined)?.message ?? error)

/**
 * Reports an unexpected failure (`what: message`, secrets and control characters neutralised) with exit
 * code 1; a `CliExit` passes through.
 */
export const reportFailure = (what: string, redact?: Redact.Redactor) => (error: unknown) =>
  error instanceof CliExit
    ? Effect.fail(error)
    : fail(ExitCode.runFailed, `${what}: ${Render.safeText(messageOf(error), redact)}`)

/** The model flags of the commands that talk to a model. */
export interface ModelOptions {
  readonly model: Option.Option<string>
  readonly baseUrl: Option.Option<string>
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
}

/**
 * The model a command talks to, from its flags, the configuration and the environment (which is returned too:
 * the redactor needs it). A choice that cannot be made is a usage error (exit 2) saying why.
 */
export const chooseModel = (app: AppConfigService["Type"], flags: ModelOptions) =>
  Effect.flatMap(App.openAiEnv, (env) =>
    Either.match(
      App.chooseModel(app.config.models, {
        model: Option.getOrUndefined(flags.model),
        baseUrl: Option.getOrUndefined(flags.baseUrl),
        apiKey: Option.getOrUndefined(Option.map(flags.apiKey, Redacted.value))
      }, env, invocation()),
      { onLeft: (error) => fail(ExitCode.usage, error.message), onRight: (choice) => Effect.succeed({ env, choice }) }
    ))

/**
 * Ends a command whose agent could not be built, or that failed otherwise: a configuration the agent cannot be
 * built from is a usage error (exit 2) with a line saying what is wrong (`settings` heads a `SettingsError`'s);
 * anything else is reported as `what: message` (exit 1, see `reportFailure`).
 */
export const reportAgentFailures = (
  app: AppConfigService["Type"],
  redact: Redact.Redactor,
  what: string,
  settings: string
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, CliExit, R> =>
  Effect.catchAll(effect, (error: E) => {
    const tag = typeof error === "object" && error !== null && "_tag" in error ? error._tag : undefined
    const message = () => String((error as { readonly message?: unknown }).message)
    switch (tag) {
      case "SettingsError": {
        // (an agent that is not there: with the command creating it, as the user types it here)
        const missing = (error as { readonly missingAgent?: unknown }).missingAgent
        const hint = typeof missing === "string" && CustomAgents.isAgentName(missing)
          ? ` ${CustomAgents.createHint(missing, invocation())}`
          : ""
        return fail(ExitCode.usage, `${settings}: ${message()}${hint}`)
      }
      case "NoModelsError":
        return fail(ExitCode.usage, `Configuration error: ${message()}`)
      case "ConfigError":
        return fail(ExitCode.usage, `Configuration error:\n${Render.safeText(message(), redact)}`)
      case "ChainError":
        return fail(ExitCode.usage, `Configuration error: ${message()}`)
      case "ConfiguredMiddlewareError":
        const where = app.source ?? "config.yaml"
        return fail(ExitCode.usage, `Configuration error:\n${where}: ${Render.safeText(message(), redact)}`)
      case "GuardrailConfigError":
      case "AuthorizationConfigError":
      case "SafetyDetectorConfigError":
        return fail(ExitCode.usage, `Configuration error:\n${app.source ?? "config.yaml"}: ${message()}`)
    }
    if (ConfigError.isConfigError(error)) {
      return fail(ExitCode.usage, `Model configuration error: ${Render.safeText(String(error), redact)}`)
    }
    return reportFailure(what, redact)(error)
  })

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

// ---------------------------------------------------------------------------------------------------------
// Options several commands share

/** `--json`: machine-readable output. */
export const json = Options.boolean("json")

/** `--config FILE`. */
export const config = Options.text("config").pipe(Options.optional)

/** The help line of `--config FILE`. */
export const CONFIG_HELP = [
  "--config FILE",
  "The config.yaml to use (default: $ANTLER_CONFIG or $DEER_FLOW_CONFIG_PATH, else ./config.yaml when there is one)"
] as const

// ---------------------------------------------------------------------------------------------------------
// Configuration and the data directory

/** The data directory, checked (and created when missing) before anything uses it; a usage error if unusable. */
export const dataHome = (home: string) =>
  ConfigFile.ensureHome(home).pipe(
    Effect.catchTag("HomeError", (error) =>
      fail(
        ExitCode.usage,
        `Cannot use the data directory ${home} (ANTLER_HOME, default ~/.antler): ${error.message}.\n` +
          "Set ANTLER_HOME to a directory you can write to."
      ))
  )

/** The configuration (`--config`, `ANTLER_CONFIG`, `./config.yaml`), with its data directory checked. */
export const loadConfig = (path: string | undefined) =>
  ConfigFile.load(path).pipe(
    Effect.catchTag("ConfigError", (error) =>
      fail(
        ExitCode.usage,
        `Configuration error (${error.issues.length} problem${error.issues.length === 1 ? "" : "s"}):\n${error.message}`
      )),
    Effect.tap((app) => dataHome(app.home)),
    Effect.tap(warnIgnored)
  )

/** The file of the data directory that remembers which configuration's unused keys were last reported. */
const WARNED_FILE = ".config-warned"
/** How many unused keys the warning names before "and N more" (`--log-level debug` names them all). */
const WARNED_KEYS = 5

/**
 * The warning about keys Antler does not use (a DeerFlow config.yaml has dozens): short, given once per
 * configuration (its file and its unused keys; remembered in the data directory) and only when the log level
 * lets warnings through. At `--log-level debug` it names every key, every time.
 */
const warnIgnored = (app: AppConfigService["Type"]) =>
  Effect.gen(function*() {
    if (app.ignored.length === 0) return
    const level = yield* FiberRef.get(FiberRef.currentMinimumLogLevel)
    if (LogLevel.lessThan(LogLevel.Warning, level)) return
    const all = LogLevel.lessThanEqual(level, LogLevel.Debug)
    const digest = Crypto.createHash("sha256").update(`${app.source}\0${app.ignored.join("\n")}`).digest("hex")
    const marker = Path.join(app.home, WARNED_FILE)
    const seen = yield* Effect.sync(() => {
      try {
        return Fs.readFileSync(marker, "utf8").trim() === digest
      } catch {
        return false
      }
    })
    if (seen && !all) return
    // a data directory that cannot remember it means the warning comes again next time, nothing worse
    yield* Effect.sync(() => {
      try {
        Fs.writeFileSync(marker, `${digest}\n`)
      } catch {
        // see above
      }
    })
    const count = app.ignored.length
    // (a key a few letters from one Antler reads beside it is a typo: named with that key, first)
    const meant = app.ignored.map((key) => {
      const near = Closest.nearest(key.slice(key.lastIndexOf(".") + 1), ConfigFile.keysBeside(key))
      return near === undefined ? undefined : `${key} (did you mean ${near}?)`
    })
    const ordered = [
      ...meant.filter((line) => line !== undefined),
      ...app.ignored.filter((_, index) => meant[index] === undefined)
    ]
    const named = all ? ordered : ordered.slice(0, WARNED_KEYS)
    const more = count - named.length
    // (the keys are the file's: a quoted YAML key may hold any character)
    yield* Render.writeError(Render.safeText(
      `warning: ${app.source}: ${count} key${count === 1 ? "" : "s"} not used by Antler (ignored): ` +
        named.join(", ") +
        (more > 0 ? `, and ${more} more (--log-level debug lists them)` : "") +
        ". Said once for this configuration.\n"
    ))
  })

/** Configured tools that cannot work are a configuration error (exit 2), before anything runs. */
export const checkTools = (app: AppConfigService["Type"]) => {
  const issues = ToolAssembly.check(app.config)
  if (issues.length === 0) return Effect.void
  const file = app.source ?? "config.yaml"
  return fail(
    ExitCode.usage,
    `Configuration error (${issues.length} problem${issues.length === 1 ? "" : "s"}):\n` +
      issues.map((issue) => `${file}: ${issue.path}: ${issue.message}`).join("\n")
  )
}

/**
 * Refuses (exit 2) a configuration whose MCP servers configure `task_toolsets` while `mcp_tasks.enabled` is off, as
 * DeerFlow refuses to start (see `McpTaskRequirement`). `command`: the command named in the message.
 */
export const checkMcpTasks = (app: AppConfigService["Type"], command: string) =>
  Effect.flatMap(McpTaskRequirement.check(app), (problem) =>
    problem === undefined ? Effect.void : fail(ExitCode.usage, `${command}: ${problem}`))

/** A thread id from the command line, checked (a usage error names the rule). */
export const threadIdFrom = (value: string) =>
  Either.match(Schema.decodeUnknownEither(SafeId)(value), {
    onLeft: () =>
      fail(
        ExitCode.usage,
        `Invalid thread id "${value}": ids are 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit.`
      ),
    onRight: Effect.succeed
  })

/** Runs `effect` over the thread store of the data directory (`ANTLER_HOME`); failures are reported (exit 1). */
export const withStore = <A, E>(effect: (home: string) => Effect.Effect<A, E, ThreadStore>) =>
  Effect.gen(function*() {
    const home = yield* Effect.flatMap(ConfigFile.home, dataHome)
    return yield* effect(home).pipe(Effect.provide(App.storeLayer(home)))
  }).pipe(Effect.catchAll(reportFailure("error")))

// ---------------------------------------------------------------------------------------------------------
// Hints

const PACKAGE_ROOT = PackageRoot.root()

const realpath = (path: string): string | undefined => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return undefined
  }
}

/**
 * The PATH entries npm adds for a command it runs (`npx`, `npm run`): a `node_modules/.bin` or npx's own cache.
 * The user's shell has none of them, so an `antler` found there is not one they can type.
 */
const npmAdded = (dir: string) => /(^|[\\/])node_modules[\\/]\.bin[\\/]?$|[\\/]_npx[\\/]/.test(dir)

/**
 * How the user runs this Antler here, for the hints commands print: `antler` when the `antler` on the user's
 * PATH is this one (a global install or `npm link`), else `npx antler` inside the package's directory (a clone,
 * where `prepare` linked it into node_modules/.bin), else `node <path>/bin/antler.js`.
 */
export const invocation = (env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): string => {
  const bin = Path.join(PACKAGE_ROOT, "bin", "antler.js")
  const real = realpath(bin)
  if (real !== undefined) {
    for (const dir of (env.PATH ?? "").split(Path.delimiter)) {
      if (dir !== "" && !npmAdded(dir) && realpath(Path.join(dir, "antler")) === real) return "antler"
    }
  }
  const inside = Path.relative(PACKAGE_ROOT, cwd)
  if (inside === "" || (!inside.startsWith("..") && !Path.isAbsolute(inside))) return "npx antler"
  return `node ${bin}`
}

// ---------------------------------------------------------------------------------------------------------
// Logs

/**
 * Log lines that repeat what a run's events already show (a retry, a blocked command, the error that ended the
 * run, a failed tool's result): left out of a run's text output, kept with `--verbose` and `--json`.
 */
export const ECHOED_LOGS: ReadonlyArray<RegExp> = [
  /^model call failed/,
  /^sandbox audit: /,
  /^guardrail: /,
  /^Safety termination /,
  /^tool '.*' failed$/
]

/**
 * Warnings about what this machine lets the sandbox enforce (no cgroup memory controller, no overlayfs...):
 * the same on every run, so a run's text output shows each once per data directory (`--verbose`: every time).
 */
export const MACHINE_NOTICES: ReadonlyArray<RegExp> = [/^(bash )?sandbox[ .:]/]

/** The file in the data directory that remembers which machine notices were shown. */
export const NOTICES_FILE = "notices.json"

/** The machine notices already shown for a data directory, and a way to remember one more. */
const noticesOf = (home: string) => {
  const file = Path.join(home, NOTICES_FILE)
  let shown: Array<string> = []
  try {
    const parsed: unknown = JSON.parse(Either.getOrThrow(TextFile.read(file, 64 * 1024)))
    if (Array.isArray(parsed)) shown = parsed.filter((item): item is string => typeof item === "string")
  } catch {
    // none yet (or unreadable, or not a small regular file: shown again)
  }
  return {
    seen: (text: string) => shown.includes(text),
    remember: (text: string) => {
      shown = [...shown, text].slice(-100)
      try {
        Fs.writeFileSync(file, JSON.stringify(shown))
      } catch {
        // shown again next time
      }
    }
  }
}

const logText = (message: unknown): string =>
  Array.isArray(message) ? message.map(logText).join(" ") : typeof message === "string" ? message : ""

/**
 * Runs `effect` with the process's loggers (stderr, as `main` sets them up) cleaning what they print: log
 * messages and annotations (a model error's message, a server's echo) have secrets hidden and control
 * characters made visible. With `quiet`, lines in `ECHOED_LOGS` are left out, and with `home` too, each of
 * `MACHINE_NOTICES` is shown once for that data directory.
 */
export const withCleanLogs = (
  redact: Redact.Redactor,
  options: { readonly quiet?: boolean; readonly home?: string | undefined } = {}
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const clean = (value: unknown): unknown =>
      typeof value === "string" ? Render.safeText(value, redact) : Array.isArray(value) ? value.map(clean) : value
    const matches = (patterns: ReadonlyArray<RegExp>, text: string) => patterns.some((pattern) => pattern.test(text))
    const notices = options.quiet === true && options.home !== undefined ? noticesOf(options.home) : undefined
    return Effect.locallyWith(effect, FiberRef.currentLoggers, HashSet.map((logger) => {
      // (a logged cause, printed as it is, holds what its errors say: it is printed as its text, cleaned, after the
      // message)
      const cleaned = Logger.mapInputOptions(logger, (input) => ({
        ...input,
        message: Cause.isEmpty(input.cause)
          ? clean(input.message)
          : [...[input.message].flat().map(clean), clean(Cause.pretty(input.cause))],
        cause: Cause.empty,
        annotations: HashMap.map(input.annotations, clean)
      }))
      if (options.quiet !== true) return cleaned
      return Logger.make((input) => {
        const text = logText(input.message)
        if (matches(ECHOED_LOGS, text)) return undefined
        if (notices !== undefined && matches(MACHINE_NOTICES, text)) {
          if (notices.seen(text)) return undefined
          notices.remember(text)
          return cleaned.log({ ...input, message: `${text} (shown once for this data directory; --verbose: always)` })
        }
        return cleaned.log(input)
      })
    }))
  })
