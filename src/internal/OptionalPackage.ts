/**
 * The packages of optional features (document conversion, MCP, tracing), loaded when the feature is first used.
 * They are optional peer dependencies of the package: an app that embeds the agent does not install them, and a
 * feature whose package is missing fails with a `MissingPackageError` naming what to install and why (a clone
 * has them all: they are development dependencies too; see docs/library.md).
 */
import * as Schema from "effect/Schema"

/** A feature was used whose package is not installed: `install mammoth to convert .docx files`. */
export class MissingPackageError extends Schema.TaggedError<MissingPackageError>()("MissingPackageError", {
  /** The packages to install (npm names). */
  packages: Schema.Array(Schema.String),
  /** What needs them, as a verb phrase: `convert .docx files`. */
  feature: Schema.String
}) {
  override get message() {
    return `install ${this.packages.join(" and ")} to ${this.feature} (npm install ${this.packages.join(" ")})`
  }
}

/**
 * Whether `cause` says that `name` itself cannot be found (an ES module's `Cannot find package 'x'`, a CommonJS
 * `Cannot find module 'x'`, a subpath `x/...` included); a package that is there but misses one of its own
 * dependencies is not reported as `name`.
 */
export const isMissing = (cause: unknown, name: string): boolean => {
  const code = (cause as { code?: unknown } | null)?.code
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return false
  const message = String((cause as { message?: unknown }).message ?? "")
  const quoted = /['"]([^'"]+)['"]/.exec(message)?.[1]
  return quoted !== undefined && (quoted === name || quoted.startsWith(`${name}/`))
}

/** `cause` as a `MissingPackageError` when it says one of `packages` is missing; else `cause` itself. */
export const explain = (cause: unknown, packages: ReadonlyArray<string>, feature: string): unknown => {
  if (cause instanceof MissingPackageError) return cause
  const missing = packages.filter((name) => isMissing(cause, name))
  return missing.length === 0 ? cause : new MissingPackageError({ packages: missing, feature })
}

/** Loads an optional package (`() => import("x")`); its absence is thrown as a `MissingPackageError`. */
export const load = async <A>(
  packages: ReadonlyArray<string>,
  feature: string,
  loader: () => Promise<A>
): Promise<A> => {
  try {
    return await loader()
  } catch (cause) {
    throw explain(cause, packages, feature)
  }
}

/** Synchronously (a CommonJS `require`), as `load`. */
export const loadSync = <A>(packages: ReadonlyArray<string>, feature: string, loader: () => A): A => {
  try {
    return loader()
  } catch (cause) {
    throw explain(cause, packages, feature)
  }
}
