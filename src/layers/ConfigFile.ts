/**
 * Loading `config.yaml` into `AppConfigService`: find the file, parse the YAML, interpolate `$VAR` /
 * `${VAR}` from the environment, decode with `AppConfigSchema`, and list the keys Antler does not read.
 * Every failure is one `ConfigError` that names the file and, per problem, where and what was expected.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { AppConfig } from "../services/AppConfig.js"
import { AppConfigSchema, AppConfigService, defaults, mountIssues } from "../services/AppConfig.js"
import * as AuthLegacy from "../services/config/AuthLegacy.js"
import * as DatabaseLegacy from "../services/config/DatabaseLegacy.js"
import * as MemoryLegacy from "../services/config/MemoryLegacy.js"
import * as Plugins from "../services/config/Plugins.js"
import * as UploadsLegacy from "../services/config/UploadsLegacy.js"
import * as ModelRequest from "../services/config/ModelRequest.js"
import * as Json from "../state/Json.js"
import * as OnDemand from "../internal/OnDemand.js"
import { ignoredKeys, joinPath } from "./config/ConfigKeys.js"
import { home } from "./config/Home.js"
import * as TextFile from "./TextFile.js"

export { defaultHome, ensureHome, home, HomeError, prepareHome } from "./config/Home.js"
// (the keys of config.yaml: their paths, the ignored ones, the ones beside a path)
export { ignoredKeys, joinPath, keysBeside } from "./config/ConfigKeys.js"

/** One problem in a config file: where (a dotted key path, or a line and column) and what. */
export const ConfigIssue = Schema.Struct({
  /** Dotted key path (`models[0].api_key`); empty for the whole file. */
  path: Schema.String,
  message: Schema.String,
  line: Schema.optional(Schema.Number),
  column: Schema.optional(Schema.Number)
})
export type ConfigIssue = typeof ConfigIssue.Type

/** Renders an issue as `<file>: <path>: <message>` (`<file>:<line>:<column>: <message>` for syntax errors). */
export const formatIssue = (file: string, issue: ConfigIssue): string =>
  issue.line !== undefined
    ? `${file}:${issue.line}:${issue.column ?? 1}: ${issue.message}`
    : issue.path === ""
    ? `${file}: ${issue.message}`
    : `${file}: ${issue.path}: ${issue.message}`

/** The configuration could not be loaded. */
export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  reason: Schema.Literal("not_found", "read", "not_a_file", "too_large", "syntax", "env", "schema"),
  file: Schema.String,
  issues: Schema.Array(ConfigIssue),
  cause: Schema.optional(Schema.Defect)
}) {
  override get message() {
    return this.issues.map((issue) => formatIssue(this.file, issue)).join("\n")
  }
}

// ---------------------------------------------------------------------------------------------------------
// YAML

/**
 * The booleans YAML 1.1 has beyond `true` and `false`, as PyYAML's `safe_load` (how DeerFlow reads its
 * configuration) resolves them: a plain `yes`, `no`, `on` or `off` (lower, capitalised or upper case). `y` and `n`
 * stay text, as in PyYAML.
 */
const pyYamlBool = {
  tag: "tag:yaml.org,2002:bool",
  default: true as const,
  test: /^(?:yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF)$/,
  resolve: (text: string) => /^(?:yes|on)$/i.test(text)
}

/**
 * Parses YAML text as DeerFlow's configuration files are read: YAML 1.2 with PyYAML's booleans (`enabled: yes`
 * is true). Syntax errors come back as issues with line and column.
 */
export const parseYaml = (text: string): Either.Either<unknown, ReadonlyArray<ConfigIssue>> => {
  const doc = OnDemand.yaml().parseDocument(text, {
    merge: true,
    prettyErrors: true,
    customTags: (tags) => [...tags, pyYamlBool]
  })
  if (doc.errors.length > 0) {
    return Either.left(doc.errors.map((error) => {
      const pos = error.linePos?.[0]
      const first = error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")
      return {
        path: "",
        message: `YAML syntax error: ${first}`,
        ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
      }
    }))
  }
  try {
    // (a `__proto__` key is kept as an own key, which Schema would turn into a prototype: see Json.parse)
    return Either.right(Json.withoutProto(doc.toJS({ maxAliasCount: 1000 })))
  } catch (error) {
    return Either.left([{ path: "", message: `YAML error: ${error instanceof Error ? error.message : String(error)}` }])
  }
}

// ---------------------------------------------------------------------------------------------------------
// Environment interpolation

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Replaces `$VAR` and `${VAR}` in every string value with the variable's value (`$$` is a literal `$`).
 * Keys are never interpolated. Each unset variable is an issue naming the key path and the variable.
 */
export const interpolate = (
  value: unknown,
  lookup: (name: string) => string | undefined
): Either.Either<unknown, ReadonlyArray<ConfigIssue>> => {
  const issues: Array<ConfigIssue> = []
  const walk = (node: unknown, path: string): unknown => {
    if (typeof node === "string") {
      if (!node.includes("$")) return node
      const variables = /\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g
      return node.replace(variables, (match, braced: string | undefined, bare: string | undefined) => {
        if (match === "$$") return "$"
        const name = braced ?? bare!
        if (!NAME.test(name)) {
          issues.push({ path, message: `'${match}' is not a valid variable reference (write $$ for a literal $)` })
          return match
        }
        const found = lookup(name)
        if (found === undefined) {
          issues.push({ path, message: `environment variable ${name} is not set` })
          return match
        }
        return found
      })
    }
    if (Array.isArray(node)) return node.map((item, i) => walk(item, joinPath(path, i)))
    if (Json.isRecord(node)) {
      const out: Record<string, unknown> = {}
      for (const [key, item] of Object.entries(node)) out[key] = walk(item, joinPath(path, key))
      return out
    }
    return node
  }
  const out = walk(value, "")
  return issues.length > 0 ? Either.left(issues) : Either.right(out)
}

// ---------------------------------------------------------------------------------------------------------
// Schema issues

// (an ACP agent's `env` values are all secrets, whatever their names; so are headers and environments, and the
// gateway's tokens, however they were written: a list of strings, one string)
const REDACT = new RegExp([
  "(^|[._])(api_?key|secret|token|password|passwd|credentials?)$",
  "(^|\\.)tokens(\\[\\d+\\])?$",
  "(^|[._])(env|headers)([.[]|$)",
  "^acp_agents\\.[^.]+\\.env\\."
].join("|"), "i")

const describeExpected = (expected: string): string => {
  if (expected === "string") return "a string"
  if (expected === "number") return "a number"
  if (expected === "boolean") return "true or false"
  if (expected.startsWith("ReadonlyArray<") || expected.startsWith("readonly [")) return "a list"
  if (expected.startsWith("Struct") || expected.startsWith("{")) return "a mapping (key: value)"
  if (expected.startsWith("a ") || expected.startsWith("an ") || expected.startsWith("\"")) return expected
  return expected.length > 60 ? "a different value" : expected
}

const clip = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max - 3)}...` : text)

const CONTAINERS: ReadonlySet<string> = new Set(["a list", "a mapping (key: value)"])

// (a mapping or list is named, never shown: it may hold a secret under a key of any name, as a string written where
// a section belongs may be one (`auth: <token>`); a value where a single value belongs is shown, a secret key's aside)
const shownActual = (actual: string, expected: ReadonlyArray<string>): string => {
  if (actual.startsWith("{")) return "a mapping"
  if (actual.startsWith("[")) return "a list"
  if (actual.startsWith("\"") && expected.every((what) => CONTAINERS.has(what))) return "a string"
  return clip(actual)
}

/**
 * Turns a decode error into one readable issue per bad key. Union alternatives are merged ("expected
 * "tokens", "messages" or "fraction"") and the `null` / missing alternatives of optional keys are dropped
 * when a more specific problem exists; secret-looking values are never echoed.
 */
export const schemaIssues = (error: ParseResult.ParseError): ReadonlyArray<ConfigIssue> => {
  const raw = ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    tag: issue._tag,
    path: issue.path.reduce<string>((acc, key) => joinPath(acc, key), ""),
    message: issue.message
  }))
  const under = (path: string, other: string) =>
    other !== path && (path === "" || other.startsWith(`${path}.`) || other.startsWith(`${path}[`))
  const hasDeeper = (path: string) => raw.some((other) => under(path, other.path))
  const byPath = new Map<string, Array<(typeof raw)[number]>>()
  for (const issue of raw) byPath.set(issue.path, [...(byPath.get(issue.path) ?? []), issue])
  const issues: Array<ConfigIssue> = []
  for (const [path, group] of byPath) {
    const deeper = hasDeeper(path)
    const optionalNoise = (m: string) => /^Expected (null|undefined), actual /.test(m)
    let kept = group.filter((issue) => !optionalNoise(issue.message))
    if (deeper) kept = kept.filter((issue) => issue.tag !== "Type")
    if (kept.length === 0) continue
    const expected: Array<string> = []
    let actual: string | undefined
    const others: Array<string> = []
    for (const issue of kept) {
      const match = /^Expected (.*), actual (.*)$/s.exec(issue.message)
      if (match !== null) {
        const what = describeExpected(match[1]!)
        if (!expected.includes(what)) expected.push(what)
        actual = match[2]!
      } else if (issue.tag === "Missing") {
        others.push("required key is missing")
      } else if (!others.includes(issue.message)) others.push(issue.message)
    }
    const shown = actual === undefined
      ? ""
      : REDACT.test(path)
      ? ", got a value of the wrong type"
      : `, got ${shownActual(actual, expected)}`
    if (expected.length > 0) {
      const list = expected.length === 1
        ? expected[0]
        : `${expected.slice(0, -1).join(", ")} or ${expected[expected.length - 1]}`
      issues.push({ path, message: `expected ${list}${shown}` })
    }
    for (const message of others) issues.push({ path, message })
  }
  return issues
}

// ---------------------------------------------------------------------------------------------------------
// Loading

/**
 * Where the configuration comes from: `--config`, else `ANTLER_CONFIG`, else `DEER_FLOW_CONFIG_PATH` (DeerFlow's
 * variable), else `./config.yaml` if present.
 */
export const resolvePath = (explicit?: string | undefined): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    if (explicit !== undefined && explicit !== "") return Path.resolve(explicit)
    for (const name of ["ANTLER_CONFIG", "DEER_FLOW_CONFIG_PATH"]) {
      const fromEnv = yield* Config.option(Config.string(name)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(fromEnv) && fromEnv.value !== "") return Path.resolve(fromEnv.value)
    }
    const local = Path.resolve("config.yaml")
    return Fs.existsSync(local) ? local : undefined
  })

const lookupEnv = (name: string): Effect.Effect<string | undefined> =>
  Config.option(Config.string(name)).pipe(
    Effect.map(Option.getOrUndefined),
    Effect.orElseSucceed(() => undefined)
  )

/** DeerFlow's environment variable for the largest `write_file` content (it has no key in `config.yaml`). */
export const WRITE_FILE_MAX_ENV = "DEERFLOW_WRITE_FILE_MAX_BYTES"

/**
 * `sandbox.write_file_max_bytes` from `DEERFLOW_WRITE_FILE_MAX_BYTES` when the file does not set it, as DeerFlow
 * reads it: an integer, `0` or less for no limit; a value that is not an integer is ignored, as there.
 */
const writeFileMaxFromEnv = (config: AppConfig, raw: Record<string, unknown>): Effect.Effect<AppConfig> =>
  Effect.gen(function*() {
    const sandbox = raw["sandbox"]
    if (Json.isRecord(sandbox) && sandbox["write_file_max_bytes"] !== undefined) return config
    const value = (yield* lookupEnv(WRITE_FILE_MAX_ENV))?.trim()
    if (value === undefined || !/^[+-]?\d+$/.test(value)) return config
    return { ...config, sandbox: { ...config.sandbox, write_file_max_bytes: Math.max(0, Number(value)) } }
  })

/**
 * DeerFlow's older layouts (of `memory:`, of the `uploads:` limits, its `checkpointer:` and `memory` database) and
 * its `auth.local.allow_registration` read as what Antler reads, with warnings.
 */
const migrateLegacy = (raw: unknown): MemoryLegacy.Migrated => {
  const memory = MemoryLegacy.migrate(raw)
  const uploads = UploadsLegacy.migrate(memory.raw)
  const database = DatabaseLegacy.migrate(uploads.raw)
  const auth = AuthLegacy.migrate(database.raw)
  return {
    raw: auth.raw,
    warnings: [...memory.warnings, ...uploads.warnings, ...database.warnings, ...auth.warnings]
  }
}

// (the migrated value is a record: the file's top is checked to be one before)
const writtenOf = (raw: unknown): Readonly<Record<string, unknown>> => (Json.isRecord(raw) ? raw : {})

/** Decodes configuration text (YAML) as if read from `file`. */
export const decode = (
  text: string,
  file: string
): Effect.Effect<
  {
    readonly config: AppConfig
    readonly ignored: ReadonlyArray<string>
    readonly written: Readonly<Record<string, unknown>>
  },
  ConfigError
> =>
  Effect.gen(function*() {
    const parsed = parseYaml(text)
    if (Either.isLeft(parsed)) return yield* new ConfigError({ reason: "syntax", file, issues: parsed.left })
    const raw = parsed.right ?? {}
    if (!Json.isRecord(raw)) {
      return yield* new ConfigError({
        reason: "schema",
        file,
        issues: [{ path: "", message: "expected a mapping of sections (key: value) at the top of the file" }]
      })
    }
    // Collect the variables first (the lookup is effectful), then interpolate purely.
    const names = new Set<string>()
    interpolate(raw, (name) => {
      names.add(name)
      return ""
    })
    const values = new Map<string, string | undefined>()
    for (const name of names) values.set(name, yield* lookupEnv(name))
    const interpolated = interpolate(raw, (name) => values.get(name))
    if (Either.isLeft(interpolated)) {
      return yield* new ConfigError({ reason: "env", file, issues: interpolated.left })
    }
    const migrated = migrateLegacy(interpolated.right)
    const decoded = Schema.decodeUnknownEither(AppConfigSchema, { errors: "all" })(migrated.raw)
    if (Either.isLeft(decoded)) {
      const issues = ModelRequest.withModelNames(schemaIssues(decoded.left), migrated.raw)
      return yield* new ConfigError({ reason: "schema", file, issues })
    }
    const problems = [...Plugins.problems(migrated.raw), ...mountProblems(decoded.right)]
    if (problems.length > 0) return yield* new ConfigError({ reason: "schema", file, issues: problems })
    for (const warning of migrated.warnings) yield* Effect.logWarning(`${file}: ${warning}`)
    return {
      config: yield* writeFileMaxFromEnv(decoded.right, raw),
      ignored: ignoredKeys(migrated.raw),
      written: writtenOf(migrated.raw)
    }
  })

/**
 * What is wrong with the sandbox's mounts (`sandbox.mounts`, `skills.container_path`): the rules across sections
 * (`mountIssues`), then each host directory as this process sees it (it must exist and be a directory) and, with
 * `home`, clear of the data directory (which holds every thread's files).
 */
export const mountProblems = (config: AppConfig, home?: string): ReadonlyArray<ConfigIssue> => {
  const issues: Array<ConfigIssue> = [...mountIssues(config.sandbox.mounts, config.skills.container_path)]
  const real = (path: string) => {
    try {
      return Fs.realpathSync(path)
    } catch {
      return path
    }
  }
  const dataDir = home === undefined ? undefined : real(Path.resolve(home))
  const within = (path: string, root: string) =>
    path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)
  config.sandbox.mounts.forEach((mount, i) => {
    const path = `sandbox.mounts[${i}].host_path`
    let stat: Fs.Stats | undefined
    try {
      stat = Fs.statSync(mount.host_path)
    } catch {
      stat = undefined
    }
    if (stat === undefined) {
      issues.push({
        path,
        message: `${mount.host_path} does not exist (as this process sees it: in a container, mount it into the ` +
          "container first)"
      })
    } else if (!stat.isDirectory()) {
      issues.push({ path, message: `${mount.host_path} is not a directory` })
    } else if (dataDir !== undefined) {
      const host = real(mount.host_path)
      if (within(host, dataDir) || within(dataDir, host)) {
        issues.push({
          path,
          message: `${mount.host_path} ${within(host, dataDir) ? "is inside" : "contains"} Antler's data directory ` +
            "(every thread's files); mount a directory outside it"
        })
      }
    }
  })
  return issues
}

/**
 * What is wrong with where memory is stored: `memory.backend_config.storage_path` (relative to the config file) is
 * the root directory of the memory files, so an existing file there is refused before anything runs (DeerMem's
 * factory refuses it), rather than every memory update failing to write.
 */
export const memoryStorageProblems = (config: AppConfig, file: string): ReadonlyArray<ConfigIssue> => {
  const storage = config.memory.backend_config.storage_path
  if (!config.memory.enabled || config.memory.manager_class === "noop" || storage === "") return []
  const root = Path.resolve(Path.dirname(Path.resolve(file)), storage)
  let stat: Fs.Stats | undefined
  try {
    stat = Fs.statSync(root)
  } catch {
    stat = undefined
  }
  return stat === undefined || stat.isDirectory() ? [] : [{
    path: "memory.backend_config.storage_path",
    message: `${storage} is an existing file; it must be the directory memory files are kept under`
  }]
}

/** The largest `config.yaml` (and `extensions_config.json`, an agent's `config.yaml`) read: 1 MiB. */
export const MAX_CONFIG_BYTES = 1024 * 1024

/** A `TextFileError` as a `ConfigError` naming the file (a missing file is `not_found`). */
export const fromTextFileError = (error: TextFile.TextFileError): ConfigError =>
  new ConfigError({
    reason: error.reason === "missing" ? "not_found" : error.reason === "unreadable" ? "read" : error.reason,
    file: error.file,
    issues: [{ path: "", message: error.problem }],
    cause: error
  })

/** The text of a configuration file: a regular file of at most `limit` bytes, else a `ConfigError` saying why. */
export const readConfigText = (file: string, limit: number): Effect.Effect<string, ConfigError> =>
  Effect.suspend(() =>
    Either.match(TextFile.read(file, limit), {
      onLeft: (error) => Effect.fail(fromTextFileError(error)),
      onRight: Effect.succeed
    })
  )

/**
 * Loads the configuration: from `path` if given, else `ANTLER_CONFIG` or `DEER_FLOW_CONFIG_PATH`, else
 * `./config.yaml` when it exists, else the defaults (no file). `home` is `ANTLER_HOME` or `~/.antler`, absolute.
 */
export const load = (path?: string | undefined): Effect.Effect<AppConfigService["Type"], ConfigError> =>
  Effect.gen(function*() {
    const file = yield* resolvePath(path)
    const dataHome = yield* home
    if (file === undefined) {
      return { config: yield* writeFileMaxFromEnv(defaults(), {}), source: undefined, home: dataHome, ignored: [] }
    }
    return yield* loadFile(file, dataHome)
  })

/**
 * Reads and decodes the configuration file `file` for the data directory `home` (absolute), with the checks of
 * `load`: the sandbox's mounts and where memory is stored.
 */
export const loadFile = (file: string, home: string): Effect.Effect<AppConfigService["Type"], ConfigError> =>
  Effect.gen(function*() {
    const text = yield* readConfigText(file, MAX_CONFIG_BYTES)
    const { config, ignored, written } = yield* decode(text, file)
    const problems = [...mountProblems(config, home), ...memoryStorageProblems(config, file)]
    if (problems.length > 0) return yield* new ConfigError({ reason: "schema", file, issues: problems })
    return { config, source: file, home, ignored, written }
  })

/** A layer providing `AppConfigService` from `load(path)`. */
export const layer = (path?: string | undefined): Layer.Layer<AppConfigService, ConfigError> =>
  Layer.effect(AppConfigService, load(path))

/** A layer providing `AppConfigService` from a config value (tests, embedding). */
export const layerFrom = (
  config: AppConfig,
  options: { readonly home: string; readonly source?: string | undefined }
): Layer.Layer<AppConfigService> =>
  Layer.succeed(AppConfigService, { config, source: options.source, home: Path.resolve(options.home), ignored: [] })

/**
 * The configuration from a value in `config.yaml`'s shape (keys as DeerFlow spells them; what is left out
 * takes the defaults), decoded with the same checks and readable errors as the file. For apps that embed
 * Antler: `layerFromObject({ models: [...], sandbox: { allow_host_bash: false } }, { home: "./data" })`.
 */
export const fromObject = (
  raw: unknown,
  options: { readonly home: string; readonly source?: string | undefined }
): Effect.Effect<AppConfigService["Type"], ConfigError> => {
  const file = options.source ?? "(configuration)"
  if (!Json.isRecord(raw)) {
    return Effect.fail(
      new ConfigError({ reason: "schema", file, issues: [{ path: "", message: "expected an object of sections" }] })
    )
  }
  const migrated = migrateLegacy(raw)
  return Either.match(Schema.decodeUnknownEither(AppConfigSchema, { errors: "all" })(migrated.raw), {
    onLeft: (error) =>
      Effect.fail(
        new ConfigError({
          reason: "schema",
          file,
          issues: ModelRequest.withModelNames(schemaIssues(error), migrated.raw)
        })
      ),
    onRight: (config) => {
      const problems = [...Plugins.problems(migrated.raw), ...mountProblems(config, options.home)]
      return problems.length > 0
        ? Effect.fail(new ConfigError({ reason: "schema", file, issues: problems }))
        : Effect.as(Effect.forEach(migrated.warnings, (warning) => Effect.logWarning(`${file}: ${warning}`)), {
          config,
          source: options.source,
          home: Path.resolve(options.home),
          ignored: ignoredKeys(migrated.raw),
          written: writtenOf(migrated.raw)
        })
    }
  })
}

/** A layer providing `AppConfigService` from a value in `config.yaml`'s shape (see `fromObject`). */
export const layerFromObject = (
  raw: unknown,
  options: { readonly home: string; readonly source?: string | undefined }
): Layer.Layer<AppConfigService, ConfigError> => Layer.effect(AppConfigService, fromObject(raw, options))
