/**
 * Configured middlewares (DeerFlow's `extensions.middlewares`, SPEC §4.1 slot 32 and §4.2): an operator's own
 * middlewares, named in the configuration as `module:Export` and loaded when the app starts. They join the lead
 * chain after the built-in runtime middlewares and before its safety and clarification tail (just outside
 * TerminalResponse), and a subagent's chain just outside its SafetyFinishReason, in the order listed.
 *
 * The export is a zero-argument factory (a function, or a class) of one of:
 * - a middleware layer (`Middleware.make(...)`);
 * - a chain entry (`Chain.entry(name, make, facts)`): its name, and ordering facts the chain checks;
 * - wrappers (`{ model?, tool?, run?, tools? }`, what `Middleware.make` takes): a class instance's methods are
 *   called on the instance.
 * The factory is called once when the app starts, to check what it gives, and again for every chain built (each
 * gets fresh wrappers, as each DeerFlow agent gets a new instance). The modules run with Antler's rights: the
 * list is the operator's configuration, never written over HTTP.
 *
 * Loading: the list is `extensions.middlewares` of `config.yaml` when it declares one, else `middlewares` of the
 * extensions file (`ExtensionsFile`); each entry's module is a path relative to the file that names it, an
 * absolute path, or a package found from that file's folder. Every entry is imported and checked when the app
 * starts: a missing module, a missing export or an export that is not a middleware factory fails the start with
 * a `ConfiguredMiddlewareError` naming the entry.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as UserModule from "../internal/UserModule.js"
import type { ConfigError } from "../layers/ConfigFile.js"
import * as ExtensionsFile from "../layers/ExtensionsFile.js"
import * as Chain from "../middleware/Chain.js"
import * as Middleware from "../middleware/Middleware.js"
import type { AppConfigService } from "../services/AppConfig.js"

/** A configured middleware that cannot be used: the entry, and why. */
export class ConfiguredMiddlewareError extends Schema.TaggedError<ConfiguredMiddlewareError>()(
  "ConfiguredMiddlewareError",
  {
    reason: Schema.Literal(
      "format",
      "module_not_found",
      "import_failed",
      "export_missing",
      "not_middleware",
      "init_failed",
      "duplicate"
    ),
    /** The entry as configured (`module:Export`). */
    entry: Schema.String,
    message: Schema.String,
    cause: Schema.optional(Schema.Defect)
  }
) {}

/** The app's configured middlewares, as chain entries (none when the configuration names none). */
export class ConfiguredMiddlewares extends Context.Tag("antler/ConfiguredMiddlewares")<
  ConfiguredMiddlewares,
  { readonly entries: ReadonlyArray<Chain.Entry> }
>() {}

/** A configured entry split into its module and its export: `./guards.mjs:DomainGuard`. */
export const parseEntry = (
  entry: string
): { readonly module: string; readonly exportName: string } | ConfiguredMiddlewareError => {
  const parsed = UserModule.split(entry)
  if (parsed === undefined) {
    return new ConfiguredMiddlewareError({
      reason: "format",
      entry,
      message: `extensions.middlewares: "${entry}" is not a middleware path. Write "module:Export", e.g. ` +
        `"./middlewares/guard.mjs:DomainGuard" (a path relative to the configuration file, or a package name)`
    })
  }
  return parsed
}

const WRAPPERS = ["model", "tool", "run"] as const

const isEntry = (value: object): value is Chain.Entry =>
  typeof (value as Chain.Entry).name === "string" && typeof (value as Chain.Entry).make === "function" &&
  Array.isArray((value as Chain.Entry).facts)

/** What the factory gave, as a fresh middleware layer, or why it is not a middleware. */
const middlewareOf = (value: unknown): Middleware.Middleware<any, any> | string => {
  if (Layer.isLayer(value)) return value as Middleware.Middleware<any, any>
  if (typeof value !== "object" || value === null) return `it gave ${value === null ? "null" : typeof value}`
  const wrappers: Record<string, unknown> = {}
  for (const key of WRAPPERS) {
    const wrap = (value as Record<string, unknown>)[key]
    if (wrap === undefined) continue
    if (typeof wrap !== "function") return `its "${key}" is ${typeof wrap}, not a function`
    wrappers[key] = wrap.bind(value)
  }
  const tools = (value as { tools?: unknown }).tools
  if (tools !== undefined && !Array.isArray(tools)) return `its "tools" is not an array`
  if (Object.keys(wrappers).length === 0 && (tools === undefined || tools.length === 0)) {
    return `it gave an object with no "model", "tool" or "run" wrapper and no tools`
  }
  return Middleware.make({ ...wrappers, ...(tools !== undefined ? { tools } : {}) } as Middleware.Spec)
}

/**
 * The chain entry of a configured middleware from its module's export: checked now (the factory called once),
 * made fresh for every chain. Fails when the export is not a factory of a middleware.
 */
export const entryOf = (entry: string, exported: unknown): Chain.Entry | ConfiguredMiddlewareError => {
  const fail = (reason: "not_middleware" | "init_failed", detail: string, cause?: unknown) =>
    new ConfiguredMiddlewareError({
      reason,
      entry,
      message: `extensions.middlewares: "${entry}" ${detail}`,
      ...(cause !== undefined ? { cause } : {})
    })
  if (typeof exported !== "function") {
    return fail(
      "not_middleware",
      `is not a middleware factory: the export is ${exported === null ? "null" : typeof exported}; export a ` +
        `function or class taking no arguments that returns Middleware.make(...), a Chain entry, or wrappers`
    )
  }
  const factory = exported as Function
  const call = (): unknown => (UserModule.isClass(factory) ? Reflect.construct(factory, []) : factory())
  let first: unknown
  try {
    first = call()
  } catch (cause) {
    return fail("init_failed", `failed when created: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
  }
  if (typeof first === "object" && first !== null && !Layer.isLayer(first) && isEntry(first)) {
    return Chain.entry(first.name, () => (call() as Chain.Entry).make(), first.facts)
  }
  const checked = middlewareOf(first)
  if (typeof checked === "string") {
    return fail(
      "not_middleware",
      `is not a middleware: ${checked}. Return Middleware.make(...), a Chain entry, or { model, tool, run } wrappers`
    )
  }
  return Chain.entry(entry, () => {
    const made = middlewareOf(call())
    if (typeof made === "string") throw fail("not_middleware", `is not a middleware: ${made}`)
    return made
  })
}

/** No configured middlewares. */
export const none: Layer.Layer<ConfiguredMiddlewares> = Layer.succeed(ConfiguredMiddlewares, { entries: [] })

// ---------------------------------------------------------------------------------------------------------
// Loading

const LABEL = "extensions.middlewares"

/** One entry, imported and checked. */
const loadEntry = (entry: string, baseDir: string): Effect.Effect<Chain.Entry, ConfiguredMiddlewareError> =>
  Effect.gen(function*() {
    const parsed = parseEntry(entry)
    if (parsed instanceof ConfiguredMiddlewareError) return yield* parsed
    const exported = yield* UserModule.load(LABEL, entry, parsed, baseDir).pipe(
      Effect.mapError((error) =>
        new ConfiguredMiddlewareError({
          reason: error.reason,
          entry,
          message: error.message,
          ...(error.cause !== undefined ? { cause: error.cause } : {})
        })
      )
    )
    const made = entryOf(entry, exported)
    return made instanceof ConfiguredMiddlewareError ? yield* made : made
  })

/**
 * The entries of a list of `module:Export` paths, in order, relative to `baseDir`. Two entries of one name (one
 * path listed twice, or two factories giving one name) are refused: a chain holds one entry of each name.
 */
export const load = (
  entries: ReadonlyArray<string>,
  baseDir: string
): Effect.Effect<ReadonlyArray<Chain.Entry>, ConfiguredMiddlewareError> =>
  Effect.gen(function*() {
    const loaded: Array<Chain.Entry> = []
    for (const [i, entry] of entries.entries()) {
      const made = yield* loadEntry(entry, baseDir)
      const before = loaded.findIndex((other) => other.name === made.name)
      if (before >= 0) {
        return yield* new ConfiguredMiddlewareError({
          reason: "duplicate",
          entry,
          message: `extensions.middlewares: "${entry}" (entry ${i + 1}) is named "${made.name}", as entry ` +
            `${before + 1} ("${entries[before]}") is: list each middleware once (a chain holds one of each name)`
        })
      }
      loaded.push(made)
    }
    return loaded
  })

/** The app's configured middlewares (see the module header). */
export const layer = (
  app: AppConfigService["Type"]
): Layer.Layer<ConfiguredMiddlewares, ConfiguredMiddlewareError | ConfigError, FileSystem.FileSystem> =>
  Layer.effect(
    ConfiguredMiddlewares,
    Effect.gen(function*() {
      const declared = app.config.extensions?.middlewares
      if (declared !== undefined) {
        const baseDir = UserModule.baseDirOf(app.source)
        return { entries: yield* load(declared, baseDir) }
      }
      const { config, source } = yield* ExtensionsFile.find(app.source, app.home)
      const listed = config.middlewares ?? []
      if (listed.length === 0) return { entries: [] }
      return { entries: yield* load(listed, UserModule.baseDirOf(source)) }
    })
  )
