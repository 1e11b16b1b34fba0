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
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import type { ConfigError } from "../layers/ConfigFile.js"
import * as ExtensionsFile from "../layers/ExtensionsFile.js"
import * as Chain from "../middleware/Chain.js"
import * as Middleware from "../middleware/Middleware.js"
import type { AppConfigService } from "../services/AppConfig.js"

/** A configured middleware that cannot be used: the entry, and why. */
export class ConfiguredMiddlewareError extends Schema.TaggedError<ConfiguredMiddlewareError>()(
  "ConfiguredMiddlewareError",
  {
    reason: Schema.Literal("format", "module_not_found", "import_failed", "export_missing", "not_middleware", "init_failed"),
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
  const at = entry.lastIndexOf(":")
  const module = at > 0 ? entry.slice(0, at).trim() : ""
  const exportName = at > 0 ? entry.slice(at + 1).trim() : ""
  if (module === "" || !/^[A-Za-z_$][\w$]*$/.test(exportName)) {
    return new ConfiguredMiddlewareError({
      reason: "format",
      entry,
      message: `extensions.middlewares: "${entry}" is not a middleware path. Write "module:Export", e.g. ` +
        `"./middlewares/guard.mjs:DomainGuard" (a path relative to the configuration file, or a package name)`
    })
  }
  return { module, exportName }
}

const isClass = (f: Function): boolean => /^class[\s{]/.test(Function.prototype.toString.call(f))

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
  const call = (): unknown => (isClass(factory) ? Reflect.construct(factory, []) : factory())
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

const errorText = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/**
 * Node's own `import()` of a module URL. Bundled, `antler` is a CommonJS script in which the bundler turns
 * `import(url)` into `require`, which cannot load an ES module: there a function made at run time does the real
 * import. Where that has no import of its own (a test runner's VM context), the module system's `import()` does.
 */
const importUrl = (url: string): Promise<Record<string, unknown>> => {
  const native = new Function("url", "return import(url)") as (url: string) => Promise<Record<string, unknown>>
  return native(url).catch((cause) =>
    (cause as { code?: unknown })?.code === "ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING"
      ? import(url) as Promise<Record<string, unknown>>
      : Promise.reject(cause)
  )
}

/** Where a module of an entry is: a file path, resolved from `baseDir`, or a package found from there. */
const resolveModule = (entry: string, module: string, baseDir: string): string | ConfiguredMiddlewareError => {
  if (module.startsWith(".") || Path.isAbsolute(module)) {
    const file = Path.resolve(baseDir, module)
    if (Fs.existsSync(file)) return file
    return new ConfiguredMiddlewareError({
      reason: "module_not_found",
      entry,
      message: `extensions.middlewares: "${entry}": no module at ${file} (a relative path is read from ${baseDir})`
    })
  }
  try {
    return createRequire(Path.join(baseDir, "antler-configured-middlewares.js")).resolve(module)
  } catch (cause) {
    return new ConfiguredMiddlewareError({
      reason: "module_not_found",
      entry,
      message: `extensions.middlewares: "${entry}": could not find the package "${module}" from ${baseDir}; ` +
        `install it there (npm install ${module.startsWith("@") ? module.split("/").slice(0, 2).join("/") : module.split("/")[0]}) ` +
        `or give a path to the module`,
      cause
    })
  }
}

/** One entry, imported and checked. */
const loadEntry = (entry: string, baseDir: string): Effect.Effect<Chain.Entry, ConfiguredMiddlewareError> =>
  Effect.gen(function*() {
    const parsed = parseEntry(entry)
    if (parsed instanceof ConfiguredMiddlewareError) return yield* parsed
    const file = resolveModule(entry, parsed.module, baseDir)
    if (file instanceof ConfiguredMiddlewareError) return yield* file
    const module = yield* Effect.tryPromise({
      try: () => importUrl(pathToFileURL(file).href),
      catch: (cause) =>
        new ConfiguredMiddlewareError({
          reason: "import_failed",
          entry,
          message: `extensions.middlewares: "${entry}": importing ${file} failed: ${errorText(cause)}`,
          cause
        })
    })
    if (!(parsed.exportName in module)) {
      const names = Object.keys(module).filter((name) => name !== "__esModule").sort()
      return yield* new ConfiguredMiddlewareError({
        reason: "export_missing",
        entry,
        message: `extensions.middlewares: "${entry}": ${file} has no export named ${parsed.exportName}` +
          ` (its exports: ${names.length === 0 ? "none" : names.join(", ")})`
      })
    }
    const made = entryOf(entry, module[parsed.exportName])
    return made instanceof ConfiguredMiddlewareError ? yield* made : made
  })

/** The entries of a list of `module:Export` paths, in order, relative to `baseDir`. */
export const load = (
  entries: ReadonlyArray<string>,
  baseDir: string
): Effect.Effect<ReadonlyArray<Chain.Entry>, ConfiguredMiddlewareError> =>
  Effect.forEach(entries, (entry) => loadEntry(entry, baseDir))

/** The app's configured middlewares (see the module header). */
export const layer = (
  app: AppConfigService["Type"]
): Layer.Layer<ConfiguredMiddlewares, ConfiguredMiddlewareError | ConfigError, FileSystem.FileSystem> =>
  Layer.effect(
    ConfiguredMiddlewares,
    Effect.gen(function*() {
      const declared = app.config.extensions?.middlewares
      if (declared !== undefined) {
        const baseDir = app.source !== undefined ? Path.dirname(app.source) : process.cwd()
        return { entries: yield* load(declared, baseDir) }
      }
      const { config, source } = yield* ExtensionsFile.find(app.source, app.home)
      const listed = config.middlewares ?? []
      if (listed.length === 0) return { entries: [] }
      return { entries: yield* load(listed, source !== undefined ? Path.dirname(source) : process.cwd()) }
    })
  )
