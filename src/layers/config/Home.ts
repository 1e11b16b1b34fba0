/**
 * The data directory (`ANTLER_HOME`, else `~/.antler`): where it is, and making it ready to use (created level by
 * level, and probed for writing), with a `HomeError` naming the directory at fault.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * The data directory when `ANTLER_HOME` is not set: `.antler` in the user's home directory, the same whatever
 * directory a command runs in (so `antler threads list` finds every thread of the user).
 */
export const defaultHome = (): string => Path.join(Os.homedir(), ".antler")

/** The data directory: `ANTLER_HOME`, default `~/.antler` (`defaultHome`), absolute. */
export const home: Effect.Effect<string> = Config.string("ANTLER_HOME").pipe(
  Config.withDefault(""),
  Effect.orElseSucceed(() => ""),
  Effect.map((dir) => (dir === "" ? defaultHome() : Path.resolve(dir)))
)

/** The data directory cannot be used. */
export class HomeError extends Schema.TaggedError<HomeError>()("HomeError", {
  reason: Schema.Literal("not_a_directory", "cannot_create", "not_writable"),
  /** The directory in question (the data directory or the ancestor at fault). */
  path: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

const errnoText = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/**
 * Checks the data directory synchronously and creates it if missing; a `HomeError` saying which directory is
 * at fault, or undefined when the directory is ready. Missing levels are created one at a time: Node's
 * recursive `mkdir` never returns where `mkdir` fails with ENOENT although the parent exists (under `/proc`),
 * and that loop cannot even be stopped with a signal. A probe directory is then made and removed, so a
 * read-only or pseudo file system is caught here rather than by the first write of a run.
 */
export const prepareHome = (dir: string): HomeError | undefined => {
  const home = Path.resolve(dir)
  const missing: Array<string> = []
  for (let at = home;;) {
    let stat: Fs.Stats
    try {
      stat = Fs.statSync(at)
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException).code
      const parent = Path.dirname(at)
      if ((code === "ENOENT" || code === "ENOTDIR") && parent !== at) {
        missing.unshift(at)
        at = parent
        continue
      }
      const message = `cannot read ${at}: ${errnoText(cause)}`
      return new HomeError({ reason: "cannot_create", path: at, message, cause })
    }
    if (!stat.isDirectory()) {
      return new HomeError({ reason: "not_a_directory", path: at, message: `${at} is not a directory` })
    }
    break
  }
  for (const level of missing) {
    try {
      Fs.mkdirSync(level)
    } catch (cause) {
      return new HomeError({
        reason: "cannot_create",
        path: level,
        message: `cannot create ${level}: ${errnoText(cause)}`,
        cause
      })
    }
  }
  const probe = Path.join(home, `.probe-${process.pid}-${Date.now().toString(36)}`)
  try {
    Fs.mkdirSync(probe)
    Fs.rmdirSync(probe)
  } catch (cause) {
    return new HomeError({
      reason: "not_writable",
      path: home,
      message: `cannot create files in ${home}: ${errnoText(cause)}`,
      cause
    })
  }
  return undefined
}

/** `prepareHome` as an effect: the absolute data directory, ready to use, or a `HomeError`. */
export const ensureHome = (dir: string): Effect.Effect<string, HomeError> =>
  Effect.suspend(() => {
    const problem = prepareHome(dir)
    return problem === undefined ? Effect.succeed(Path.resolve(dir)) : Effect.fail(problem)
  })
