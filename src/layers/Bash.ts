/**
 * The process runner behind the sandbox's `bash`: bubblewrap isolation (argument building and a one-time
 * probe), the host-bash guard used when isolation is knowingly switched off, and a runner that spawns a real
 * child process, captures stdout and stderr together, enforces a timeout that kills the whole process tree,
 * and kills it too when the calling fiber is interrupted.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { StringDecoder } from "node:string_decoder"
import * as Effect from "effect/Effect"
import { SandboxError } from "../services/Sandbox.js"

// ---------------------------------------------------------------------------------------------------------
// Output

/** The marker put where the middle of a long output was cut (SPEC §7.2). */
export const middleMarker = (skipped: number): string => `\n... [middle truncated: ${skipped} chars skipped] ...\n`

/**
 * Middle-truncates from the first and last parts of a text of `total` chars (`head` holds at least the
 * first `max` chars, `tail` at least the last `max`): half head, half tail, marker between, at most `max`
 * chars in all. `max = 0` means unlimited.
 */
export const middleTruncateParts = (head: string, tail: string, total: number, max: number): string => {
  if (max <= 0 || total <= max) return head
  // The marker is sized for the worst case (every char skipped) so the result never exceeds `max`.
  const kept = Math.max(0, max - middleMarker(total).length)
  if (kept === 0) return head.slice(0, max)
  const headLength = Math.floor(kept / 2)
  const tailLength = kept - headLength
  return head.slice(0, headLength) + middleMarker(total - kept) + (tailLength > 0 ? tail.slice(-tailLength) : "")
}

/** Middle-truncates a text to `max` chars (0 = unlimited) with `middleMarker`. */
export const middleTruncate = (text: string, max: number): string =>
  middleTruncateParts(text, text, text.length, max)

/** What the runner keeps of an unlimited output (0 = unlimited still needs a bound on memory). */
export const UNLIMITED_OUTPUT_CHARS = 32 * 1024 * 1024

/** Keeps the first and the last `cap` chars of a stream of text, and counts the rest. */
export class OutputCollector {
  head = ""
  tail = ""
  total = 0
  constructor(readonly cap: number) {}
  push(chunk: string): void {
    if (chunk.length === 0) return
    this.total += chunk.length
    if (this.head.length < this.cap) this.head += chunk.slice(0, this.cap - this.head.length)
    this.tail = (this.tail + chunk).slice(-this.cap)
  }
  /** The collected text, masked, then middle-truncated to `max` (0 = unlimited, bounded by the cap). */
  render(max: number, mask: (text: string) => string = (text) => text): string {
    if (this.total <= this.cap) {
      const text = mask(this.head)
      return middleTruncate(text, max)
    }
    // Masking shortens host paths, so the parts are masked first and the total adjusted by what it removed.
    const head = mask(this.head)
    const tail = mask(this.tail)
    const total = this.total - (this.head.length - head.length) - (this.tail.length - tail.length)
    return middleTruncateParts(head, tail, total, max > 0 ? max : this.cap)
  }
}

// ---------------------------------------------------------------------------------------------------------
// bubblewrap

/** A host directory bound into the sandbox. */
export interface Mount {
  readonly host: string
  readonly target: string
  readonly writable: boolean
}

/** How the host's root is laid out: what each top-level system path is (merged /usr or not). */
export interface RootLayout {
  readonly entries: ReadonlyArray<
    { readonly path: string; readonly kind: "symlink"; readonly target: string } | {
      readonly path: string
      readonly kind: "directory"
    }
  >
  /** Secret-bearing files (`/etc/shadow`...) and directories (`/etc/ssh`...) that exist and are hidden. */
  readonly hiddenFiles: ReadonlyArray<string>
  readonly hiddenDirs: ReadonlyArray<string>
}

const ROOT_PATHS = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
const SECRET_FILES = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/npmrc"]
const SECRET_DIRS = ["/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d"]

/** Reads the host's root layout (merged-/usr symlinks, secret files present in /etc). */
export const hostRootLayout = (): RootLayout => {
  const entries: Array<RootLayout["entries"][number]> = []
  for (const path of ROOT_PATHS) {
    try {
      const stat = Fs.lstatSync(path)
      if (stat.isSymbolicLink()) entries.push({ path, kind: "symlink", target: Fs.readlinkSync(path) })
      else if (stat.isDirectory()) entries.push({ path, kind: "directory" })
    } catch {
      // absent on this host
    }
  }
  const exists = (path: string, directory: boolean) => {
    try {
      const stat = Fs.lstatSync(path)
      return directory ? stat.isDirectory() : !stat.isDirectory()
    } catch {
      return false
    }
  }
  return {
    entries,
    hiddenFiles: SECRET_FILES.filter((path) => exists(path, false)),
    hiddenDirs: SECRET_DIRS.filter((path) => exists(path, true))
  }
}

/** The PATH inside the sandbox (and for host bash). */
export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/** What one sandboxed command needs. */
export interface BwrapSpec {
  readonly layout: RootLayout
  /** Bound in order; targets are created under a tmpfs `/mnt`, which is then made read-only. */
  readonly mounts: ReadonlyArray<Mount>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly command: string
}

/**
 * bubblewrap arguments for one command (ECOSYSTEM §6): a narrowed read-only root (`/usr`, the merged-/usr
 * symlinks, `/etc` with its secrets hidden), fresh `/dev`, `/proc` and private `/tmp`, the thread's
 * directories at their virtual paths under a read-only tmpfs `/mnt`, every namespace unshared (no network,
 * own PIDs), all capabilities dropped (as root, without `--cap-drop ALL` the command could remount `/`
 * read-write), killed with its parent, a new session (no terminal injection), and a cleared environment.
 */
export const bwrapArgs = (spec: BwrapSpec): Array<string> => {
  const args: Array<string> = ["--ro-bind", "/usr", "/usr"]
  for (const entry of spec.layout.entries) {
    if (entry.kind === "symlink") args.push("--symlink", entry.target, entry.path)
    else args.push("--ro-bind", entry.path, entry.path)
  }
  args.push("--ro-bind", "/etc", "/etc")
  for (const file of spec.layout.hiddenFiles) args.push("--ro-bind", "/dev/null", file)
  for (const dir of spec.layout.hiddenDirs) args.push("--tmpfs", dir)
  args.push("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/mnt")
  for (const mount of spec.mounts) args.push(mount.writable ? "--bind" : "--ro-bind", mount.host, mount.target)
  args.push(
    "--remount-ro",
    "/mnt",
    "--unshare-all",
    "--hostname",
    "sandbox",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--clearenv"
  )
  for (const [key, value] of Object.entries(spec.env)) args.push("--setenv", key, value)
  args.push("--chdir", spec.cwd, "--", "/bin/bash", "-c", spec.command)
  return args
}

/** Whether bubblewrap can be used here, and why not when it cannot. */
export type BwrapStatus =
  | { readonly available: true; readonly path: string }
  | { readonly available: false; readonly reason: string }

const findExecutable = (name: string): string | undefined => {
  const dirs = [...(process.env.PATH ?? "").split(":"), ...SANDBOX_PATH.split(":")].filter((dir) => dir.startsWith("/"))
  for (const dir of dirs) {
    const candidate = `${dir}/${name}`
    try {
      Fs.accessSync(candidate, Fs.constants.X_OK)
      if (Fs.statSync(candidate).isFile()) return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/**
 * Finds `bwrap` and checks that it can really build the sandbox here (user namespaces may be disabled, e.g.
 * in some containers): it runs `true` with the same flags as a real command.
 */
export const probeBwrap = (): BwrapStatus => {
  const path = findExecutable("bwrap")
  if (path === undefined) return { available: false, reason: "`bwrap` was not found on PATH" }
  const args = bwrapArgs({
    layout: hostRootLayout(),
    mounts: [],
    cwd: "/",
    env: { PATH: SANDBOX_PATH },
    command: "true"
  })
  const result = ChildProcess.spawnSync(path, args, { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 })
  if (result.status === 0) return { available: true, path }
  const detail = result.error?.message ?? result.stderr?.toString("utf8").trim() ?? `exit ${result.status}`
  return {
    available: false,
    reason: `\`bwrap\` is installed but cannot create a sandbox here (${detail || "no detail"})`
  }
}

let probed: BwrapStatus | undefined

/** `probeBwrap`, run once per process. */
export const detectBwrap: Effect.Effect<BwrapStatus> = Effect.sync(() => (probed ??= probeBwrap()))

// ---------------------------------------------------------------------------------------------------------
// Host bash (only with `sandbox.allow_host_bash: true` and no bubblewrap)

/** System prefixes an absolute path in a host command may use besides the virtual roots (SPEC §7.2). */
export const SYSTEM_PREFIXES = ["/bin/", "/usr/bin/", "/usr/sbin/", "/sbin/", "/opt/homebrew/bin/", "/dev/"]

// An absolute path starts a word: at the start, or after whitespace, a quote, `=`, `:`, a redirection or an
// operator. URLs are taken out first so their `//host/path` is not read as a path.
const BOUNDARY = String.raw`(^|[\s"'\x60=:(<>|;&])`
const ABSOLUTE = new RegExp(`${BOUNDARY}(/[^\\s"'\\x60;&|<>()]*)`, "g")
const URL = /\b[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^\s"'`;&|<>()]*/g
const DOTDOT = /(^|[\s/"'`=:(<>|;&])\.\.(?=$|[\s/"'`;&|<>)])/

/**
 * Checks a command for host bash: absolute paths must be under a virtual root or a system prefix, no `..`
 * segments, no `file://` URLs. Returns the problem, or undefined. A guard against mistakes, not isolation.
 */
export const validateHostCommand = (command: string, roots: ReadonlyArray<string>): string | undefined => {
  if (/\bfile:\/\//i.test(command)) return "file:// URLs are not allowed in commands"
  if (command.includes("\0")) return "the command contains a NUL byte"
  if (DOTDOT.test(command)) return "'..' path segments are not allowed in commands; use absolute virtual paths"
  const withoutUrls = command.replace(URL, " ")
  for (const match of withoutUrls.matchAll(ABSOLUTE)) {
    const path = match[2]!
    if (path === "/") return "the path / is outside the sandbox"
    const allowed = roots.some((root) => path === root || path.startsWith(`${root}/`)) ||
      SYSTEM_PREFIXES.some((prefix) => path.startsWith(prefix) || `${path}/` === prefix)
    if (!allowed) return `the path ${path} is outside the sandbox (allowed: ${roots.join(", ")} and system binaries)`
  }
  return undefined
}

/** Rewrites virtual roots at the start of words to host directories (longest root first). */
export const rewriteHostCommand = (command: string, mapping: ReadonlyArray<readonly [string, string]>): string => {
  const sorted = [...mapping].sort((a, b) => b[0].length - a[0].length)
  const roots = sorted.map(([root]) => root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")
  const pattern = new RegExp(`${BOUNDARY}(${roots})(?=$|[/\\s"'\\x60;&|<>()])`, "g")
  const hosts = new Map(sorted)
  return command.replace(pattern, (_, before: string, root: string) => `${before}${shellQuote(hosts.get(root)!)}`)
}

/** Quotes a string for bash. */
export const shellQuote = (value: string): string => /^[A-Za-z0-9_./:@%+=,-]+$/.test(value)
  ? value
  : `'${value.replace(/'/g, `'\\''`)}'`

// ---------------------------------------------------------------------------------------------------------
// Running

/** One process to run. */
export interface ProcessSpec {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** Output cap in chars (0 = unlimited, bounded by `UNLIMITED_OUTPUT_CHARS`). */
  readonly maxOutputChars: number
  /** Applied to the output before truncation (masks host paths). */
  readonly mask?: (text: string) => string
}

/** What a process did. */
export interface ProcessOutcome {
  readonly output: string
  readonly exitCode: number | null
  readonly signal: string | null
  readonly timedOut: boolean
}

// After the main process exits, how long to wait for its pipes to close before giving up on them.
const PIPE_GRACE_MS = 500

const killGroup = (pid: number | undefined) => {
  if (pid === undefined) return
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // already gone
  }
}

/**
 * Runs a process in its own process group, stdout and stderr captured together. On timeout, on
 * interruption of the fiber and after the main process exits, the whole group is killed (under bwrap the
 * PID namespace then takes every descendant with it, including `setsid`/`nohup` children).
 */
export const run = (spec: ProcessSpec): Effect.Effect<ProcessOutcome, SandboxError> =>
  Effect.async<ProcessOutcome, SandboxError>((resume) => {
    const collector = new OutputCollector(spec.maxOutputChars > 0 ? spec.maxOutputChars : UNLIMITED_OUTPUT_CHARS)
    let child: ChildProcess.ChildProcess
    try {
      child = ChildProcess.spawn(spec.file, spec.args, {
        cwd: spec.cwd,
        env: { ...spec.env },
        detached: true,
        stdio: ["ignore", "pipe", "pipe"]
      })
    } catch (cause) {
      resume(Effect.fail(new SandboxError({ reason: "io", message: "Could not start the command", cause })))
      return
    }
    let timedOut = false
    let finished = false
    let exit: { code: number | null; signal: string | null } | undefined
    let grace: NodeJS.Timeout | undefined
    const decoders = [new StringDecoder("utf8"), new StringDecoder("utf8")] as const
    child.stdout!.on("data", (chunk: Buffer) => collector.push(decoders[0].write(chunk)))
    child.stderr!.on("data", (chunk: Buffer) => collector.push(decoders[1].write(chunk)))
    const timer = setTimeout(() => {
      timedOut = true
      killGroup(child.pid)
    }, spec.timeoutMs)

    const finish = () => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      if (grace !== undefined) clearTimeout(grace)
      collector.push(decoders[0].end())
      collector.push(decoders[1].end())
      const output = collector.render(spec.maxOutputChars, spec.mask)
      resume(Effect.succeed({ output, exitCode: exit?.code ?? null, signal: exit?.signal ?? null, timedOut }))
    }
    child.once("error", (cause) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      resume(Effect.fail(new SandboxError({ reason: "io", message: `Could not start the command (${cause.message})` })))
    })
    child.once("exit", (code, signal) => {
      exit = { code, signal }
      // Whatever the command left running in its group goes too; then wait (briefly) for the pipes.
      killGroup(child.pid)
      grace = setTimeout(() => {
        child.stdout?.destroy()
        child.stderr?.destroy()
        finish()
      }, PIPE_GRACE_MS)
    })
    child.once("close", (code, signal) => {
      exit ??= { code, signal }
      finish()
    })

    return Effect.async<void>((done) => {
      if (finished || exit !== undefined) {
        killGroup(child.pid)
        done(Effect.void)
        return
      }
      finished = true
      clearTimeout(timer)
      // Wait for the kill to land, so an interrupted call leaves nothing running behind it.
      const fallback = setTimeout(() => done(Effect.void), 5_000)
      child.once("exit", () => {
        clearTimeout(fallback)
        done(Effect.void)
      })
      killGroup(child.pid)
    })
  })
