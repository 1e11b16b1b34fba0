/**
 * Child processes that die with Antler however it ends, a SIGKILL included (MCP stdio servers: one that ignores
 * the end of its stdin and SIGTERM would otherwise run on for good). On Linux the child gets a parent-death
 * signal: util-linux's `setpriv --pdeathsig KILL -- command args` sets it and then runs the command in its place
 * (same process), so the kernel kills the command when the thread that started it ends; Node starts children
 * from its main thread, which lives as long as the process. Without a usable `setpriv`, or off Linux, commands
 * start as they are, and the caller warns.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** How children are started: through `setpriv`, or as they are (and why). */
export type Wrapper =
  | { readonly _tag: "setpriv"; readonly path: string }
  | { readonly _tag: "none"; readonly reason: string }

const isExecutable = (file: string): boolean => {
  try {
    Fs.accessSync(file, Fs.constants.X_OK)
    return Fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** Where `command` is found as `execvp` would find it (a path is taken relative to `cwd`), or undefined. */
export const which = (command: string, searchPath: string | undefined, cwd: string): string | undefined => {
  if (command === "") return undefined
  if (command.includes("/")) {
    const file = Path.resolve(cwd, command)
    return isExecutable(file) ? file : undefined
  }
  for (const dir of (searchPath ?? "").split(Path.delimiter)) {
    const file = Path.resolve(cwd, dir === "" ? "." : dir, command)
    if (isExecutable(file)) return file
  }
  return undefined
}

/**
 * Finds the wrapper: `setpriv` at `explicit`, else on `PATH`, checked to know `--pdeathsig` (util-linux 2.33 and
 * later); `false`: none, on purpose.
 */
export const find = (explicit?: string | false | undefined): Effect.Effect<Wrapper> =>
  Effect.suspend(() => {
    if (explicit === false) return Effect.succeed<Wrapper>({ _tag: "none", reason: "turned off" })
    if (process.platform !== "linux") {
      return Effect.succeed<Wrapper>({ _tag: "none", reason: "parent-death signals exist on Linux only" })
    }
    const path = explicit ?? which("setpriv", process.env.PATH, process.cwd())
    if (path === undefined || !isExecutable(path)) {
      const where = path === undefined ? "on PATH" : `at ${path}`
      return Effect.succeed<Wrapper>({ _tag: "none", reason: `setpriv (util-linux) was not found ${where}` })
    }
    return Effect.async<Wrapper>((resume) => {
      ChildProcess.execFile(path, ["--help"], { timeout: 5000 }, (_error, stdout) => {
        resume(Effect.succeed(
          String(stdout).includes("--pdeathsig")
            ? { _tag: "setpriv", path }
            : { _tag: "none", reason: `${path} has no --pdeathsig (util-linux 2.33 or later has it)` }
        ))
      })
    })
  })

/**
 * The command and arguments that start `command args` under `wrapper`. A command that cannot be found (on the
 * child's `PATH`, or relative to its `cwd`) is left as it is, so that starting it fails as it would have.
 */
export const wrap = (
  wrapper: Wrapper,
  command: string,
  args: ReadonlyArray<string>,
  where: { readonly path: string | undefined; readonly cwd: string }
): { readonly command: string; readonly args: ReadonlyArray<string> } =>
  wrapper._tag === "none" || which(command, where.path, where.cwd) === undefined
    ? { command, args }
    : { command: wrapper.path, args: ["--pdeathsig", "KILL", "--", command, ...args] }
