/**
 * An operator's own JavaScript module named in the configuration as `module:Export` (a configured middleware, a
 * guardrail provider): where its module is, and its export, imported. The module is a path relative to the
 * configuration file that names it, an absolute path, or a package found from that file's folder. Each failure
 * says which entry, and why, prefixed by the configuration key (`label`) that named it.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { clipChars } from "../state/Chars.js"

/** A `module:Export` entry that cannot be imported: why, and a message naming the entry. */
export class UserModuleError extends Data.TaggedError("UserModuleError")<{
  readonly reason: "module_not_found" | "import_failed" | "export_missing"
  readonly message: string
  readonly cause?: unknown
}> {}

/** `module:Export` split at its last colon; undefined when either part is missing or the export is no name. */
export const split = (entry: string): { readonly module: string; readonly exportName: string } | undefined => {
  const at = entry.lastIndexOf(":")
  const module = at > 0 ? entry.slice(0, at).trim() : ""
  const exportName = at > 0 ? entry.slice(at + 1).trim() : ""
  return module === "" || !/^[A-Za-z_$][\w$]*$/.test(exportName) ? undefined : { module, exportName }
}

/**
 * Whether an entry names a JavaScript module (`./x.mjs:X`, `/abs/x.js:X`, `@scope/pkg:X`, `my-pkg:X`) rather than a
 * Python path (`deerflow.guardrails.builtin:AllowlistProvider`), which only DeerFlow can load.
 */
export const isScriptEntry = (entry: string): boolean => {
  const parsed = split(entry)
  return parsed !== undefined && !/^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(parsed.module)
}

/** The folder a configuration's relative module paths are read from: its file's, else the working directory. */
export const baseDirOf = (source: string | undefined): string =>
  source !== undefined ? Path.dirname(source) : process.cwd()

const messageOf = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

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
export const resolve = (
  label: string,
  entry: string,
  module: string,
  baseDir: string
): Effect.Effect<string, UserModuleError> => {
  if (module.startsWith(".") || Path.isAbsolute(module)) {
    const file = Path.resolve(baseDir, module)
    if (Fs.existsSync(file)) return Effect.succeed(file)
    return Effect.fail(
      new UserModuleError({
        reason: "module_not_found",
        message: `${label}: "${entry}": no module at ${file} (a relative path is read from ${baseDir})`
      })
    )
  }
  return Effect.try({
    try: () => createRequire(Path.join(baseDir, "antler-configured-modules.js")).resolve(module),
    catch: (cause) => {
      const install = module.startsWith("@") ? module.split("/").slice(0, 2).join("/") : module.split("/")[0]
      return new UserModuleError({
        reason: "module_not_found",
        message: `${label}: "${entry}": could not find the package "${module}" from ${baseDir}; ` +
          `install it there (npm install ${install}) or give a path to the module`,
        cause
      })
    }
  })
}

/** The export of an entry (already `split`), its module resolved from `baseDir` and imported. */
export const load = (
  label: string,
  entry: string,
  parsed: { readonly module: string; readonly exportName: string },
  baseDir: string
): Effect.Effect<unknown, UserModuleError> =>
  Effect.gen(function*() {
    const file = yield* resolve(label, entry, parsed.module, baseDir)
    const module = yield* Effect.tryPromise({
      try: () => importUrl(pathToFileURL(file).href),
      catch: (cause) =>
        new UserModuleError({
          reason: "import_failed",
          message: `${label}: "${entry}": importing ${file} failed: ${messageOf(cause)}`,
          cause
        })
    })
    if (!(parsed.exportName in module)) {
      const names = Object.keys(module).filter((name) => name !== "__esModule").sort()
      return yield* new UserModuleError({
        reason: "export_missing",
        message: `${label}: "${entry}": ${file} has no export named ${parsed.exportName}` +
          ` (its exports: ${names.length === 0 ? "none" : names.join(", ")})`
      })
    }
    return module[parsed.exportName]
  })

/** Whether a function is a class (called with `new`). */
export const isClass = (f: Function): boolean => /^class[\s{]/.test(Function.prototype.toString.call(f))

/** What a provider threw, as an error repeats it: its message, past 300 characters cut there and "…". */
export const errorText = (cause: unknown): string => clipChars(messageOf(cause), 301)

/**
 * A provider made from a module's export, given a copy of `config`: a class constructed, a function called (its
 * answer awaited), anything else taken as it is; within `timeout`, else the failure `fail` makes of what went wrong
 * (`what` names the provider in it, e.g. `guardrails.provider: "./x.mjs:X"`).
 */
export const instantiate = <E>(
  exported: unknown,
  config: unknown,
  timeout: Duration.DurationInput,
  what: string,
  fail: (message: string) => E
): Effect.Effect<unknown, E> => {
  const copy = structuredClone(config)
  return Effect.tryPromise({
    try: () =>
      Promise.resolve(
        typeof exported !== "function"
          ? exported
          : isClass(exported)
          ? Reflect.construct(exported, [copy])
          : (exported as (config: unknown) => unknown)(copy)
      ),
    catch: (cause) => fail(`${what} failed when created: ${errorText(cause)}`)
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => fail(`${what} was not created within ${Duration.format(timeout)}`)
    })
  )
}

/** The method `key` of what a module's export created (`instantiate`), when it has a function by that name. */
export const methodOf = <F extends Function>(created: unknown, key: string): F | undefined => {
  const found = typeof created === "object" && created !== null
    ? (created as Record<string, unknown>)[key]
    : undefined
  return typeof found === "function" ? found as F : undefined
}

/** What a module's export created, said where it lacks the method `method`: for "it gave ...". */
export const gave = (created: unknown, method: string): string =>
  created === null
    ? "null"
    : typeof created === "object"
    ? `an object without an ${method} method`
    : typeof created

/** The name a provider gives itself (a `name` that is not blank), else `fallback` (its export's name). */
export const nameOf = (created: object, fallback: string): string => {
  const own = (created as { name?: unknown }).name
  return typeof own === "string" && own.trim() !== "" ? own : fallback
}
