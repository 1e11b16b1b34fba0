/**
 * The local sandbox provider: each thread gets host directories under the data directory
 * (`{home}/users/{user}/threads/{thread}/user-data/{workspace,uploads,outputs}`) that the model sees only as
 * `/mnt/user-data/{workspace,uploads,outputs}`, plus the skills directory at `/mnt/skills` (read-only).
 *
 * Every path is checked twice: when it is resolved (virtual roots only, no `..`, no encoded separators, no
 * NUL bytes, and a real path, symlinks followed, inside the thread's directories) and again after the file
 * is opened (the open descriptor's real path, on Linux), so a symlink swapped in between by a concurrent
 * command cannot redirect a read or a write. Commands run under bubblewrap (see `Bash.ts`); without it, bash
 * is refused unless `sandbox.allow_host_bash` is set.
 *
 * Resource limits (`sandbox.max_processes`, `max_memory_mb`, `tmp_size_mb`, `max_file_size_mb`,
 * `disk_quota_mb`): each command gets its own cgroup where one can be made (`Cgroup.ts`) and rlimits; a watcher
 * stops a command that hits the process cap or grows the thread's files past the quota (`DiskQuota.ts`), and
 * the file tools refuse writes past the file size limit or the quota. What the host cannot enforce is warned
 * about once per provider.
 */
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Fsp from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { AppConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type {
  ExecOptions,
  ExecResult,
  FileInfo,
  Sandbox,
  ThreadPaths,
  WalkEntry,
  WalkOptions
} from "../services/Sandbox.js"
import {
  absoluteVirtual,
  OUTPUTS,
  SafeId,
  SandboxError,
  SandboxProvider,
  SKILLS,
  threadPaths,
  UPLOADS,
  USER_DATA,
  WORKSPACE
} from "../services/Sandbox.js"
import * as Bash from "./sandbox/Bash.js"
import * as SkillsDirectory from "./SkillsDirectory.js"
import * as Cgroup from "./sandbox/Cgroup.js"
import * as DiskQuota from "./sandbox/DiskQuota.js"

/** Options of the local provider. */
export interface Options {
  /**
   * `"auto"` (default) uses bubblewrap when it is installed and works; `"off"` behaves as if it were not
   * installed (bash is then refused, or runs on the host with `sandbox.allow_host_bash: true`).
   */
  readonly bwrap?: "auto" | "off"
  /** How many thread sandboxes to keep cached (least recently used are dropped; they are re-made on use). */
  readonly maxCached?: number
  /** `"auto"` (default) gives each command a cgroup where one can be made; `"off"` never does. */
  readonly cgroup?: "auto" | "off"
}

/** What `mask` shows instead of the data directory (outside the thread's own directories). */
export const HIDDEN_HOME = "<antler-home>"

/** The largest file `readText` reads. */
export const MAX_TEXT_BYTES = 32 * 1024 * 1024

/** One virtual root and the host directory behind it. */
export interface MountPoint {
  readonly virtual: string
  readonly host: string
  /** The host directory with symlinks resolved. */
  readonly real: string
  readonly writable: boolean
}

/** A virtual path split into its mount and the segments below it. */
export interface ParsedPath {
  readonly virtual: string
  readonly mount: MountPoint
  readonly rest: ReadonlyArray<string>
}

const isInside = (path: string, root: string) =>
  path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)

const ENCODED = /%(2e|2f|5c|00)/i

/** The virtual roots the model may use, for messages. */
export const VIRTUAL_ROOTS_TEXT = `${WORKSPACE}, ${UPLOADS}, ${OUTPUTS} or ${SKILLS}`

/**
 * Parses a virtual path against mount points (pure): rejects NUL bytes, percent-encoded dots, slashes,
 * backslashes and NULs, `..` segments, and anything not under a mount; a relative path is taken from the
 * workspace. `show` renders the input for messages (it masks host paths).
 */
export const parseVirtual = (
  input: string,
  mounts: ReadonlyArray<MountPoint>,
  show: (text: string) => string
): Either.Either<ParsedPath, SandboxError> => {
  const shown = () => show(input)
  const fail = (reason: SandboxError["reason"], message: string) =>
    Either.left(new SandboxError({ reason, message, path: shown() }))
  if (input.includes("\0")) return fail("path_escape", `Path contains a NUL byte: ${shown()}`)
  if (ENCODED.test(input)) {
    return fail("path_escape", `Path contains a percent-encoded '.', '/', '\\' or NUL: ${shown()}. Use a plain path.`)
  }
  if (input.trim() === "") return fail("not_found", `Path is empty: give a path under ${VIRTUAL_ROOTS_TEXT}`)
  // A relative path is taken from the workspace, as in bash (where the workspace is the current directory).
  const virtual = absoluteVirtual(input)
  if (virtual.split("/").includes("..")) return fail("path_escape", `Path may not contain '..' segments: ${shown()}`)
  let best: MountPoint | undefined
  for (const mount of mounts) {
    if (isInside(virtual, mount.virtual) && (best === undefined || mount.virtual.length > best.virtual.length)) {
      best = mount
    }
  }
  if (best === undefined) {
    if (isInside(virtual, SKILLS)) {
      return fail(
        "not_found",
        `${virtual} does not exist: there is no skills directory (skills.path in config.yaml, or skills/ next to it)`
      )
    }
    const masked = shown()
    if (masked !== input && masked.startsWith("/mnt/")) {
      return fail("path_escape", `Host paths are not accepted; use the virtual path ${masked} instead.`)
    }
    const what = masked === OUTSIDE_PATH ? "That path" : masked
    return fail("path_escape", `Access denied: ${what} is outside the sandbox. Use paths under ${VIRTUAL_ROOTS_TEXT}.`)
  }
  const rest = virtual === best.virtual ? [] : virtual.slice(best.virtual.length + 1).split("/")
  return Either.right({ virtual, mount: best, rest })
}

/** What messages say instead of an absolute path outside the virtual roots. */
export const OUTSIDE_PATH = "(a path outside the sandbox)"

/**
 * How a (masked) path argument is echoed in messages: virtual and relative paths as given (cut at 300
 * chars), any other absolute path not at all, so messages never carry a host path.
 */
export const displayPath = (masked: string): string => {
  const cut = masked.length > 300 ? `${masked.slice(0, 300)}...` : masked
  return masked.startsWith("/") && !masked.startsWith("/mnt/") ? OUTSIDE_PATH : cut
}

// Characters that continue a path segment: a host directory followed (or preceded) by one of these is part of
// a different name (`/srv/skills-extra`, `/x/srv/skills`), not that directory.
const SEGMENT_CHAR = "A-Za-z0-9_.~+@%#-"

/**
 * Replaces host directories in text with virtual roots (pure), whole path segments only: a directory matches
 * where it starts a path (not inside a longer name or path) and is followed by `/`, the end, or a character
 * that cannot continue its last segment (a period counts only when no such character follows it, as at the end
 * of a sentence). One pass, longest directory first, so a replacement is never rewritten again.
 */
export const makeMask = (pairs: ReadonlyArray<readonly [host: string, virtual: string]>) => {
  const sorted = [...new Map(pairs.filter(([host]) => host.length > 1)).entries()]
    .map(([host, virtual]) => [host.replace(/\/+$/, ""), virtual] as const)
    .filter(([host]) => host.length > 1)
    .sort((a, b) => b[0].length - a[0].length)
  if (sorted.length === 0) return (text: string): string => text
  const virtuals = new Map(sorted)
  const alternatives = sorted.map(([host]) => host.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")
  const pattern = new RegExp(
    `(?<![${SEGMENT_CHAR}])(${alternatives})(?=$|/|[^${SEGMENT_CHAR}]|\\.(?![${SEGMENT_CHAR}]))`,
    "g"
  )
  return (text: string): string =>
    sorted.some(([host]) => text.includes(host)) ? text.replace(pattern, (host) => virtuals.get(host)!) : text
}

type ErrnoError = NodeJS.ErrnoException

const codeOf = (cause: unknown): string | undefined => (cause as ErrnoError | undefined)?.code

/** A readable SandboxError for a file-system failure, naming only the virtual path. */
export const fsError = (
  cause: unknown,
  virtual: string,
  what: "file" | "directory" | "path" = "path"
): SandboxError => {
  if (cause instanceof SandboxError) return cause
  const code = codeOf(cause)
  const noun = what === "file" ? "File" : what === "directory" ? "Directory" : "Path"
  switch (code) {
    case "ENOENT":
      // (the common failure, e.g. every check of a file before it is written: its fields are ours, valid by
      // construction, so the constructor does not validate them again)
      return new SandboxError({ reason: "not_found", message: `${noun} not found: ${virtual}`, path: virtual }, true)
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return new SandboxError({ reason: "permission", message: `Permission denied: ${virtual}`, path: virtual })
    case "EISDIR":
      return isDirectoryError(virtual)
    case "ENOTDIR":
      return new SandboxError({
        reason: "not_a_directory",
        message: `A part of the path is a file, not a directory: ${virtual}`,
        path: virtual
      })
    case "ELOOP":
      return new SandboxError({
        reason: "path_escape",
        message: `Access denied: ${virtual} is a symbolic link that cannot be followed safely`,
        path: virtual
      })
    case "ENOSPC":
    case "EDQUOT":
      return new SandboxError({ reason: "io", message: `No space left to write ${virtual}`, path: virtual })
    default:
      return new SandboxError({
        reason: "io",
        message: `File-system error on ${virtual} (${code ?? (cause instanceof Error ? cause.name : "unknown")})`,
        path: virtual
      })
  }
}

const isDirectoryError = (virtual: string) =>
  new SandboxError({ reason: "is_directory", message: `Path is a directory, not a file: ${virtual}`, path: virtual })

const execResult = (outcome: Bash.ProcessOutcome, timeoutMs: number): ExecResult => ({
  output: outcome.output,
  exitCode: outcome.timedOut || outcome.stopped !== undefined ? null : outcome.exitCode,
  timedOut: outcome.timedOut,
  timeoutMs
})

const escapeError = (virtual: string) =>
  new SandboxError({
    reason: "path_escape",
    message: `Access denied: ${virtual} leads (through a symbolic link) outside the sandbox`,
    path: virtual
  })

/** A keyed, process-wide lock (one permit per key; entries are dropped when unused). */
export const makeKeyedLock = () => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let entry = locks.get(key)
      if (entry === undefined) {
        entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
        locks.set(key, entry)
      }
      const held = entry
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          held.users--
          if (held.users === 0 && locks.get(key) === held) locks.delete(key)
        }))
      )
    })
}

/** The message bash gives when it cannot run (no bubblewrap, host bash not allowed). */
export const bashDisabledMessage = (reason: string): string =>
  `bash is unavailable: commands run only inside a bubblewrap sandbox, and ${reason}. ` +
  "To enable bash, install bubblewrap on the machine running the agent " +
  "(Debian/Ubuntu: `apt-get install bubblewrap`), " +
  "or set `sandbox.allow_host_bash: true` in config.yaml to run commands directly on the host without isolation " +
  "(only where you trust the agent with that machine). The file tools (read_file, write_file, str_replace, ls, " +
  "glob, grep) still work."

interface Resolved {
  /** The real host path. */
  readonly real: string
  /** The deepest existing ancestor (real) and the missing segments below it. */
  readonly base: string
  readonly missing: ReadonlyArray<string>
}

/** Everything a thread's sandbox is made from. */
export interface SandboxSpec {
  readonly threadId: string
  readonly userId: string
  readonly paths: ThreadPaths
  /** The host skills directory, when configured and present. */
  readonly skills: string | undefined
  /** The data directory, hidden from messages. */
  readonly home: string
  readonly config: AppConfig["sandbox"]
  readonly bwrap: Effect.Effect<Bash.BwrapStatus>
  /** Where command cgroups can be made (detected once per provider). */
  readonly cgroups: Effect.Effect<Cgroup.Availability>
  readonly layout: () => Bash.RootLayout
  /** Logs a warning once per provider and key. */
  readonly warn: (key: string, message: string) => Effect.Effect<void>
  readonly lock: ReturnType<typeof makeKeyedLock>
}

const MB = 1024 * 1024

/** Where overlayfs work directories of running commands are made, inside the thread's directory. */
export const WORK_DIR = ".sandbox-work"

const sweepWorkDirs = (root: string) => {
  let names: Array<string> = []
  try {
    names = Fs.readdirSync(root)
  } catch {
    return
  }
  for (const name of names) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1])
    let alive = false
    try {
      process.kill(pid, 0)
      alive = true
    } catch (cause) {
      alive = codeOf(cause) === "EPERM"
    }
    if (!alive) Bash.removeTree(Path.join(root, name))
  }
}

/** The limits of a configuration, in bytes. */
export const limitsOf = (config: AppConfig["sandbox"]) => ({
  processes: config.max_processes,
  memoryBytes: config.max_memory_mb * MB,
  tmpBytes: config.tmp_size_mb * MB,
  fileSizeBytes: config.max_file_size_mb * MB,
  diskQuotaBytes: config.disk_quota_mb * MB
})

// RLIMIT_NPROC is counted per user namespace since Linux 5.14 (and never applies to root): only then does it
// cap one sandbox rather than every process of the host user.
const nprocPerNamespace = (): boolean => {
  if (typeof process.getuid !== "function" || process.getuid() === 0) return false
  const [major = 0, minor = 0] = Os.release().split(".").map((part) => parseInt(part, 10))
  return major > 5 || (major === 5 && minor >= 14)
}

const MEMORY_FAILURE = new RegExp(
  [
    String.raw`\bMemoryError\b`,
    "Cannot allocate memory",
    "[Oo]ut of memory",
    String.raw`\bOOM\b`,
    "std::bad_alloc",
    "[Aa]llocation failed",
    "memory exhausted",
    "Failed to reserve virtual memory"
  ].join("|")
)
const FILE_SIZE_FAILURE = /File size limit exceeded|File too large/
const NO_SPACE = /No space left on device/
const FORK_FAILURE =
  /fork: (retry: )?Resource temporarily unavailable|[Cc]annot fork|can't fork|BlockingIOError: \[Errno 11\]/
const SIGXFSZ_EXIT = 128 + 25

const realOrSelf = (path: string) => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return path
  }
}

/** Builds one thread's sandbox over existing directories. */
export const makeSandbox = (spec: SandboxSpec): Sandbox => {
  const { paths } = spec
  const mount = (virtual: string, host: string, writable: boolean): MountPoint => ({
    virtual,
    host,
    real: realOrSelf(host),
    writable
  })
  const mounts: Array<MountPoint> = [
    mount(WORKSPACE, paths.workspace, true),
    mount(UPLOADS, paths.uploads, true),
    mount(OUTPUTS, paths.outputs, true),
    mount(USER_DATA, paths.root, false)
  ]
  if (spec.skills !== undefined) mounts.push(mount(SKILLS, spec.skills, false))
  const writableRoots = mounts.filter((m) => m.writable).map((m) => m.real)
  const readableRoots = mounts.map((m) => m.real)
  const allowed = (real: string, access: "read" | "write") =>
    (access === "write" ? writableRoots : readableRoots).some((root) => isInside(real, root))

  // The data directory itself is hidden too, so another thread's host path never shows either.
  const home = spec.home.replace(/\/+$/, "")
  const mask = makeMask([
    ...mounts.flatMap((m) => [[m.host, m.virtual], [m.real, m.virtual]] as const),
    [home, HIDDEN_HOME],
    [realOrSelf(home), HIDDEN_HOME]
  ])
  const show = (text: string) => displayPath(mask(text.replace(/\0/g, "\\0")))

  const limits = limitsOf(spec.config)
  const usage = DiskQuota.meter([paths.root])
  const quotaMessage = (bytes: number) =>
    `${DiskQuota.megabytes(bytes)} MB, over the disk quota of ${spec.config.disk_quota_mb} MB ` +
    "(sandbox.disk_quota_mb). Delete files you no longer need (e.g. with rm in bash) first."

  const parse = (input: string) => Effect.suspend(() => parseVirtual(input, mounts, show))

  // Follows the candidate's symlinks; for a path that does not exist yet, resolves its deepest existing
  // ancestor. A path component that exists but cannot be resolved is a broken or looping symlink.
  const realResolve = (parsed: ParsedPath, access: "read" | "write"): Effect.Effect<Resolved, SandboxError> =>
    Effect.tryPromise({
      try: async () => {
        const missing: Array<string> = []
        let current = parsed.rest.length === 0 ? parsed.mount.host : `${parsed.mount.host}/${parsed.rest.join("/")}`
        for (;;) {
          try {
            const base = await Fsp.realpath(current)
            missing.reverse()
            return { base, missing, real: missing.length === 0 ? base : `${base}/${missing.join("/")}` }
          } catch (cause) {
            if (codeOf(cause) !== "ENOENT") throw cause
            const exists = await Fsp.lstat(current).then(() => true, () => false)
            if (exists) {
              throw new SandboxError({
                reason: access === "write" ? "path_escape" : "not_found",
                message: access === "write"
                  ? `Refusing to write through a broken symbolic link: ${parsed.virtual}`
                  : `File not found: ${parsed.virtual} (a symbolic link whose target does not exist)`,
                path: parsed.virtual
              })
            }
            if (current === parsed.mount.host || current.length <= parsed.mount.host.length) throw cause
            missing.push(Path.basename(current))
            current = Path.dirname(current)
          }
        }
      },
      catch: (cause) => fsError(cause, parsed.virtual)
    }).pipe(
      Effect.filterOrFail((resolved) => allowed(resolved.real, access), () => escapeError(parsed.virtual))
    )

  const resolveParsed = (input: string, access: "read" | "write") =>
    Effect.flatMap(parse(input), (parsed) => {
      if (access === "write" && !parsed.mount.writable) {
        return Effect.fail(
          new SandboxError({
            reason: "read_only",
            message: parsed.mount.virtual === SKILLS
              ? `${parsed.virtual} is read-only (skills cannot be changed from the sandbox). ` +
                `Write under ${WORKSPACE} or ${OUTPUTS}.`
              : `${parsed.virtual} is read-only. Write under ${WORKSPACE}, ${UPLOADS} or ${OUTPUTS}.`,
            path: parsed.virtual
          })
        )
      }
      return Effect.map(realResolve(parsed, access), (resolved) => ({ parsed, resolved }))
    })

  // Checks, after opening, that the descriptor really is inside the sandbox (defeats symlink swaps between
  // the check and the open). Linux only: elsewhere the resolve-time check stands alone.
  const verifyDescriptor = (fd: number, access: "read" | "write"): string | undefined => {
    if (process.platform !== "linux") return undefined
    const actual = Fs.readlinkSync(`/proc/self/fd/${fd}`)
    return allowed(actual, access) ? undefined : actual
  }

  const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_APPEND } = Fs.constants

  const openRead = (virtual: string, real: string) =>
    Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const handle = await Fsp.open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
          if (verifyDescriptor(handle.fd, "read") !== undefined) {
            await handle.close()
            throw escapeError(virtual)
          }
          return handle
        },
        catch: (cause) => fsError(cause, virtual, "file")
      }),
      (handle) => Effect.promise(() => handle.close().catch(() => undefined))
    )

  const readBytes = (input: string, maxBytes: number): Effect.Effect<Uint8Array, SandboxError> =>
    Effect.scoped(Effect.gen(function*() {
      const { parsed, resolved } = yield* resolveParsed(input, "read")
      const handle = yield* openRead(parsed.virtual, resolved.real)
      const stat = yield* Effect.tryPromise({ try: () => handle.stat(), catch: (e) => fsError(e, parsed.virtual) })
      if (stat.isDirectory()) {
        return yield* new SandboxError({
          reason: "is_directory",
          message: `Path is a directory, not a file: ${parsed.virtual}`,
          path: parsed.virtual
        })
      }
      if (!stat.isFile()) {
        return yield* new SandboxError({
          reason: "permission",
          message: `Not a regular file: ${parsed.virtual}`,
          path: parsed.virtual
        })
      }
      if (stat.size > maxBytes) {
        return yield* new SandboxError({
          reason: "too_large",
          message: `File is too large: ${parsed.virtual} is ${stat.size} bytes (limit ${maxBytes})`,
          path: parsed.virtual
        })
      }
      // Reads at most the size seen above, so a file growing meanwhile cannot blow past the limit.
      return yield* Effect.tryPromise({
        try: async () => {
          const buffer = Buffer.alloc(stat.size)
          let offset = 0
          while (offset < buffer.length) {
            const { bytesRead } = await handle.read(buffer, offset, buffer.length - offset, offset)
            if (bytesRead === 0) break
            offset += bytesRead
          }
          return buffer.subarray(0, offset)
        },
        catch: (e) => fsError(e, parsed.virtual, "file")
      })
    }))

  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
  const readText = (input: string): Effect.Effect<string, SandboxError> =>
    Effect.flatMap(readBytes(input, MAX_TEXT_BYTES), (bytes) => {
      const virtual = Either.getOrElse(parseVirtual(input, mounts, show), () => ({ virtual: input })).virtual
      const binary = new SandboxError({
        reason: "binary",
        message: `Cannot read ${virtual} as text: it is binary or not UTF-8.`,
        path: virtual
      })
      if (bytes.includes(0)) return Effect.fail(binary)
      try {
        return Effect.succeed(decoder.decode(bytes))
      } catch {
        return Effect.fail(binary)
      }
    })

  // Creates the missing directories one by one below a verified real ancestor, refusing to follow any
  // symlink that appears meanwhile.
  const makeParents = (virtual: string, resolved: Resolved) =>
    Effect.tryPromise({
      try: async () => {
        let dir = resolved.base
        for (const segment of resolved.missing.slice(0, -1)) {
          dir = `${dir}/${segment}`
          try {
            await Fsp.mkdir(dir)
          } catch (cause) {
            if (codeOf(cause) !== "EEXIST") throw cause
            const stat = await Fsp.lstat(dir)
            if (!stat.isDirectory()) throw stat.isSymbolicLink() ? escapeError(virtual) : cause
          }
        }
      },
      catch: (cause) => fsError(cause, virtual)
    })

  // The per-file limit and the thread's disk quota, for a write that makes a file `kept + content` bytes long
  // where it was `before` bytes.
  const checkWrite = async (
    virtual: string,
    kept: number,
    before: number,
    content: string
  ): Promise<SandboxError | undefined> => {
    const after = kept + Buffer.byteLength(content, "utf8")
    if (limits.fileSizeBytes > 0 && after > limits.fileSizeBytes) {
      return new SandboxError({
        reason: "too_large",
        message: `${virtual} would be ${DiskQuota.megabytes(after)} MB, over the limit of ` +
          `${spec.config.max_file_size_mb} MB for one file (sandbox.max_file_size_mb).`,
        path: virtual
      })
    }
    const growth = after - before
    if (limits.diskQuotaBytes <= 0 || growth <= 0) return undefined
    if ((await usage.estimate()) + growth <= limits.diskQuotaBytes) return undefined
    const used = await usage.exact()
    if (used + growth <= limits.diskQuotaBytes) return undefined
    return new SandboxError({
      reason: "quota",
      message: `Writing ${virtual} would take the thread's files to ${quotaMessage(used + growth)}`,
      path: virtual
    })
  }

  const writeText = (input: string, content: string, append = false): Effect.Effect<void, SandboxError> =>
    Effect.gen(function*() {
      const { parsed, resolved } = yield* resolveParsed(input, "write")
      const virtual = parsed.virtual
      if (parsed.rest.length === 0) {
        return yield* isDirectoryError(virtual)
      }
      yield* makeParents(virtual, resolved)
      yield* Effect.tryPromise({
        try: async () => {
          const flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | (append ? O_APPEND : 0)
          // O_EXCL first tells whether this call created the file, so a refused file is removed again.
          let created = true
          let handle: Fsp.FileHandle
          try {
            handle = await Fsp.open(resolved.real, flags | O_CREAT | O_EXCL, 0o644)
          } catch (cause) {
            if (codeOf(cause) !== "EEXIST") throw cause
            created = false
            handle = await Fsp.open(resolved.real, flags)
          }
          try {
            const outside = verifyDescriptor(handle.fd, "write")
            if (outside !== undefined) {
              if (created) await Fsp.unlink(outside).catch(() => undefined)
              throw escapeError(virtual)
            }
            const stat = await handle.stat()
            if (!stat.isFile()) {
              throw new SandboxError({ reason: "permission", message: `Not a regular file: ${virtual}`, path: virtual })
            }
            const refusal = await checkWrite(virtual, append ? stat.size : 0, stat.size, content)
            if (refusal !== undefined) {
              if (created) await Fsp.unlink(resolved.real).catch(() => undefined)
              throw refusal
            }
            if (!append && !created) await handle.truncate(0)
            await handle.writeFile(content, "utf8")
          } finally {
            await handle.close().catch(() => undefined)
          }
        },
        catch: (cause) => fsError(cause, virtual, "file")
      })
    })

  const stat = (input: string): Effect.Effect<FileInfo, SandboxError> =>
    Effect.flatMap(resolveParsed(input, "read"), ({ parsed, resolved }) =>
      Effect.tryPromise({
        try: async () => {
          const info = await Fsp.stat(resolved.real)
          return {
            kind: info.isFile() ? "file" : info.isDirectory() ? "directory" : "other",
            size: info.isFile() ? info.size : 0
          } satisfies FileInfo
        },
        catch: (cause) => fsError(cause, parsed.virtual)
      }))

  const walk = (input: string, options: WalkOptions = {}) =>
    Effect.flatMap(resolveParsed(input, "read"), ({ parsed, resolved }) =>
      Effect.tryPromise({
        try: async () => {
          const info = await Fsp.stat(resolved.real)
          if (!info.isDirectory()) {
            throw new SandboxError({
              reason: "not_a_directory",
              message: `Not a directory: ${parsed.virtual}`,
              path: parsed.virtual
            })
          }
          const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY
          const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY
          const entries: Array<WalkEntry> = []
          let truncated = false
          const prefix = parsed.virtual === "/" ? "" : parsed.virtual
          const visit = async (dir: string, relative: string, depth: number): Promise<void> => {
            let dirents: Array<Fs.Dirent>
            try {
              dirents = await Fsp.readdir(dir, { withFileTypes: true })
            } catch {
              return
            }
            dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
            for (const dirent of dirents) {
              if (truncated) return
              const host = `${dir}/${dirent.name}`
              let kind: "file" | "directory" | undefined
              let descend = false
              if (dirent.isDirectory()) {
                kind = "directory"
                descend = true
              } else if (dirent.isFile()) {
                kind = "file"
              } else if (dirent.isSymbolicLink()) {
                // Shown as what it points to when that stays inside; never descended into (no cycles).
                const target = await Fsp.realpath(host).catch(() => undefined)
                if (target === undefined || !allowed(target, "read")) continue
                const targetStat = await Fsp.stat(target).catch(() => undefined)
                kind = targetStat?.isDirectory() ? "directory" : targetStat?.isFile() ? "file" : undefined
              }
              if (kind === undefined) continue
              if (options.skip?.(dirent.name, kind) === true) continue
              const rel = relative === "" ? dirent.name : `${relative}/${dirent.name}`
              if (entries.length >= maxEntries) {
                truncated = true
                return
              }
              entries.push({ path: `${prefix}/${rel}`, relative: rel, kind, depth })
              if (descend && depth < maxDepth) await visit(host, rel, depth + 1)
            }
          }
          await visit(resolved.real, "", 1)
          return { entries, truncated }
        },
        catch: (cause) => fsError(cause, parsed.virtual, "directory")
      }))

  const withFileLock = <A, E, R>(
    input: string,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | SandboxError, R> =>
    Effect.flatMap(resolveParsed(input, "write"), ({ resolved }) => spec.lock(resolved.real, effect))

  // Overlayfs work directories of running commands live next to user-data (same filesystem, not visible to the
  // model); those of an Antler process that died are removed when the sandbox is made.
  const threadDir = Path.dirname(paths.root)
  const workRoot = Path.join(threadDir, WORK_DIR)
  sweepWorkDirs(workRoot)

  // One-time warnings about limits this host cannot enforce.
  const warnLimits = (groups: Cgroup.Availability) =>
    Effect.gen(function*() {
      if (limits.processes > 0 && !groups.available) {
        yield* spec.warn(
          "processes",
          nprocPerNamespace()
            ? `sandbox.max_processes is enforced with RLIMIT_NPROC in the sandbox's user namespace, as no cgroup ` +
              `can be used (${groups.reason}); a command that reaches it is not stopped early`
            : `sandbox.max_processes cannot be enforced (${groups.reason}): a command can start processes without ` +
              "limit until it times out"
        )
      }
      if (limits.memoryBytes > 0 && !(groups.available && groups.hierarchy.memory)) {
        yield* spec.warn(
          "memory",
          "sandbox.max_memory_mb limits the memory of each process only: the total of a command's processes is " +
            "capped only with a cgroup v2 memory controller, which Antler cannot use here"
        )
      }
    })

  const acquireResources = (groups: Cgroup.Availability, staged: boolean) =>
    Effect.gen(function*() {
      let group: Cgroup.Group | undefined
      if (groups.available && (limits.processes > 0 || limits.memoryBytes > 0)) {
        const made = yield* Effect.either(
          Cgroup.create(groups.hierarchy, { processes: limits.processes, memoryBytes: limits.memoryBytes })
        )
        if (made._tag === "Right") group = made.right
        else yield* spec.warn("cgroup", `sandbox limits: ${made.left.message}; the command runs without it`)
      }
      let work: string | undefined
      if (staged) {
        try {
          work = Path.join(workRoot, `${process.pid}-${randomBytes(6).toString("hex")}`)
          for (const name of ["0", "1", "2"]) Fs.mkdirSync(Path.join(work, name), { recursive: true })
        } catch {
          work = undefined
        }
      }
      return { group, work }
    })

  const releaseResources = (
    resources: { readonly group: Cgroup.Group | undefined; readonly work: string | undefined }
  ) =>
    Effect.zipRight(
      resources.group?.destroy ?? Effect.void,
      Effect.sync(() => {
        if (resources.work !== undefined) Bash.removeTree(resources.work)
      })
    )

  // Stops the command when it hits the process cap, or when the thread's files pass `diskLimit`.
  const guardOf = (group: Cgroup.Group | undefined, diskLimit: number): Bash.Guard | undefined => {
    if (group === undefined && diskLimit <= 0) return undefined
    let walked = Date.now()
    return {
      intervalMs: 100,
      check: async () => {
        if (group !== undefined && group.forkFailures() > 0) {
          return `it tried to run more than ${spec.config.max_processes} processes and threads at once, the ` +
            "sandbox's limit (sandbox.max_processes). A fork bomb or a loop that keeps starting processes does " +
            "this; start fewer at a time."
        }
        if (diskLimit <= 0) return undefined
        const estimate = await usage.estimate()
        const due = Date.now() - walked > Math.max(5000, 20 * usage.lastWalkMs())
        if (estimate <= diskLimit && !due) return undefined
        const used = await usage.exact()
        walked = Date.now()
        return used > diskLimit ? `the thread's files grew to ${quotaMessage(used)}` : undefined
      }
    }
  }

  const notesOf = (outcome: Bash.ProcessOutcome, group: Cgroup.Group | undefined, isolated: boolean) => {
    const notes: Array<string> = []
    if (outcome.timedOut || outcome.stopped !== undefined) return notes
    const text = outcome.output
    if (limits.memoryBytes > 0 && (MEMORY_FAILURE.test(text) || (group?.oomKills() ?? 0) > 0)) {
      notes.push(
        `Each process may use at most ${spec.config.max_memory_mb} MB of memory (sandbox.max_memory_mb): work ` +
          "on the data in smaller pieces."
      )
    }
    if (limits.fileSizeBytes > 0 && (outcome.exitCode === SIGXFSZ_EXIT || FILE_SIZE_FAILURE.test(text))) {
      notes.push(`A file may be at most ${spec.config.max_file_size_mb} MB (sandbox.max_file_size_mb).`)
    }
    if (NO_SPACE.test(text)) {
      notes.push(
        (isolated && limits.tmpBytes > 0
          ? `/tmp and /dev/shm hold at most ${spec.config.tmp_size_mb} MB each (sandbox.tmp_size_mb). `
          : "") +
          (limits.diskQuotaBytes > 0
            ? `The thread's files may use ${spec.config.disk_quota_mb} MB in all (sandbox.disk_quota_mb).`
            : "")
      )
    }
    if (limits.processes > 0 && FORK_FAILURE.test(text)) {
      notes.push(
        `A command may run at most ${spec.config.max_processes} processes and threads at once ` +
          "(sandbox.max_processes)."
      )
    }
    return notes.filter((note) => note !== "")
  }

  const exec = (command: string, options: ExecOptions = {}): Effect.Effect<ExecResult, SandboxError> =>
    Effect.gen(function*() {
      const configuredMs = Math.round(spec.config.bash_command_timeout * 1000)
      const timeoutMs = Math.max(1, Math.min(options.timeoutMs ?? configuredMs, configuredMs))
      const maxOutputChars = options.maxOutputChars ?? spec.config.bash_output_max_chars
      const status = yield* spec.bwrap
      const env = { ...options.env }
      let rewritten: string | undefined
      if (!status.available) {
        if (!spec.config.allow_host_bash) {
          return yield* new SandboxError({ reason: "bash_disabled", message: bashDisabledMessage(status.reason) })
        }
        const problem = Bash.validateHostCommand(command, mounts.map((m) => m.virtual))
        if (problem !== undefined) {
          return yield* new SandboxError({ reason: "path_escape", message: `Command refused: ${problem}.` })
        }
        rewritten = Bash.rewriteHostCommand(command, mounts.map((m) => [m.virtual, m.host] as const))
      } else if (status.warning !== undefined) {
        yield* spec.warn("bwrap", `bash sandbox: ${status.warning}`)
      }
      const groups = yield* spec.cgroups
      yield* warnLimits(groups)
      const staged = status.available && status.mode === "staged"
      return yield* Effect.acquireUseRelease(
        acquireResources(groups, staged),
        ({ group, work }) =>
          Effect.gen(function*() {
            let file: string
            let args: ReadonlyArray<string>
            let inputs: ReadonlyArray<string> = []
            let statusFd: number | undefined
            let childEnv: Record<string, string> = { PATH: Bash.SANDBOX_PATH }
            let cwd: string | undefined
            if (status.available) {
              const stage = realOrSelf(threadDir)
              const writable = [[paths.workspace, WORKSPACE], [paths.uploads, UPLOADS], [paths.outputs, OUTPUTS]]
              const bwrapMounts: Array<Bash.Mount & { readonly work?: string }> = writable.map(([host, target], i) =>
                work === undefined
                  ? { host: host!, target: target!, writable: true }
                  : {
                    host: realOrSelf(host!),
                    target: target!,
                    writable: true,
                    work: Path.join(realOrSelf(work), `${i}`)
                  }
              )
              if (spec.skills !== undefined) bwrapMounts.push({ host: spec.skills, target: SKILLS, writable: false })
              // Staged only when every writable directory is inside the thread's directory (overlayfs needs its
              // work directory on the same mount); otherwise bind-mounted directly.
              const mode = work !== undefined &&
                  bwrapMounts.every((m) => !m.writable || (isInside(m.host, stage) && m.work !== undefined))
                ? "staged"
                : "direct"
              const invocation = Bash.bwrapInvocation({
                mode,
                layout: spec.layout(),
                mounts: bwrapMounts,
                stage,
                cwd: WORKSPACE,
                env: {
                  PATH: Bash.SANDBOX_PATH,
                  HOME: WORKSPACE,
                  USER: Bash.SANDBOX_USER.name,
                  LOGNAME: Bash.SANDBOX_USER.name,
                  LANG: "C.UTF-8",
                  TMPDIR: "/tmp",
                  ...env
                },
                command,
                limits: {
                  tmpBytes: limits.tmpBytes,
                  memoryBytes: limits.memoryBytes,
                  fileSizeBytes: limits.fileSizeBytes,
                  processes: nprocPerNamespace() ? limits.processes : 0
                }
              })
              file = status.path
              args = invocation.argv
              inputs = [invocation.options.join("\0"), ...invocation.files]
              statusFd = invocation.statusFd
            } else {
              file = "/bin/bash"
              // RLIMIT_NPROC would count every process of the host user here, so it is not set.
              args = Bash.hostBashArgs(`cd ${Bash.shellQuote(paths.workspace)} && ${rewritten}`, {
                tmpBytes: 0,
                memoryBytes: limits.memoryBytes,
                fileSizeBytes: limits.fileSizeBytes,
                processes: 0
              })
              cwd = paths.workspace
              // Never the agent's own environment: it holds API keys.
              childEnv = { PATH: Bash.SANDBOX_PATH, HOME: paths.workspace, LANG: "C.UTF-8", ...env }
            }
            // A command may shrink a thread that is over its quota, not grow it.
            let diskLimit = limits.diskQuotaBytes
            if (diskLimit > 0 && (yield* Effect.promise(() => usage.estimate())) > diskLimit) {
              diskLimit = Math.max(diskLimit, yield* Effect.promise(() => usage.exact()))
            }
            const launch = Bash.wrapped(group?.procs, inputs.length + (statusFd === undefined ? 0 : 1), file, args)
            const onOutput = options.onOutput
            const lines = new Bash.LineBuffer()
            const show = (text: string) => {
              if (onOutput !== undefined && text !== "") onOutput(mask(text))
            }
            const outcome = yield* Bash.run({
              file: launch.file,
              args: launch.args,
              ...(cwd === undefined ? {} : { cwd }),
              env: childEnv,
              timeoutMs,
              maxOutputChars,
              mask,
              inputs,
              statusFd,
              ...(() => {
                const guard = guardOf(group, diskLimit)
                return guard === undefined ? {} : { guard }
              })(),
              ...(onOutput === undefined ? {} : { onOutput: (chunk: string) => show(lines.push(chunk)) })
            })
            show(lines.end())
            const setup = Bash.parseSetupStatus(outcome.status)
            if (setup.bound.length > 0) {
              yield* spec.warn(
                "overlay",
                "bash sandbox: overlayfs could not be mounted for the thread's directories, so they are " +
                  "bind-mounted and /proc/self/mountinfo in the sandbox shows their host paths"
              )
            }
            if (setup.failure !== undefined && outcome.exitCode === 125) {
              return yield* new SandboxError({
                reason: "io",
                message: `The sandbox could not be set up (${mask(setup.failure)}); the command did not run.`
              })
            }
            const notes = notesOf(outcome, group, status.available)
            // A command that ends before the watcher's next look may have passed the quota all the same.
            if (diskLimit > 0 && outcome.stopped === undefined && !outcome.timedOut) {
              if ((yield* Effect.promise(() => usage.estimate())) > diskLimit) {
                const used = yield* Effect.promise(() => usage.exact())
                if (used > diskLimit) notes.push(`The thread's files now use ${quotaMessage(used)}`)
              }
            }
            return {
              ...execResult(outcome, timeoutMs),
              ...(outcome.stopped === undefined ? {} : { stopped: outcome.stopped }),
              ...(notes.length === 0 ? {} : { notes })
            }
          }),
        releaseResources
      )
    })

  return {
    id: sandboxId(spec.userId, spec.threadId),
    threadId: spec.threadId,
    userId: spec.userId,
    paths,
    usesThreadDataMounts: true,
    resolve: (input, access) => Effect.map(resolveParsed(input, access), ({ resolved }) => resolved.real),
    mask,
    exec,
    readText,
    writeText,
    readBytes,
    stat,
    walk,
    withFileLock
  }
}

const BWRAP_OFF: Bash.BwrapStatus = { available: false, reason: "bubblewrap is switched off for this provider" }

/** The id of a thread's local sandbox. */
export const sandboxId = (userId: string, threadId: string): string => `local:${userId}:${threadId}`

/**
 * The host skills directory mounted at `/mnt/skills`, if present: `skills.path` (relative to the config file's
 * directory), else `$DEER_FLOW_SKILLS_PATH` / `$ANTLER_SKILLS_PATH`, else `skills/` next to the config file.
 */
export const skillsDirectory = (config: AppConfigService["Type"]): string | undefined => SkillsDirectory.root(config)

const decodeId = Schema.decodeUnknownEither(SafeId)

/**
 * The local provider. `acquire` validates the ids, creates the thread's directories and caches the sandbox
 * (idempotent: the same sandbox for the same thread). `release` is a no-op: the directories are the
 * thread's data and outlive runs.
 */
export const make = (app: AppConfigService["Type"], options: Options = {}): SandboxProvider["Type"] => {
  const cache = new Map<string, Sandbox>()
  const maxCached = Math.max(1, options.maxCached ?? 1000)
  const lock = makeKeyedLock()
  const skills = skillsDirectory(app)
  // What the host offers is found out once per provider, on first use.
  const once = <A>(effect: Effect.Effect<A>): Effect.Effect<A> => {
    const semaphore = Effect.unsafeMakeSemaphore(1)
    let found: { readonly value: A } | undefined
    return semaphore.withPermits(1)(Effect.suspend(() =>
      found !== undefined ? Effect.succeed(found.value) : Effect.tap(effect, (value) => {
        found = { value }
      })
    ))
  }
  const bwrap = options.bwrap === "off" ? Effect.succeed(BWRAP_OFF) : once(Bash.probeBwrap)
  const cgroups = options.cgroup === "off"
    ? Effect.succeed<Cgroup.Availability>({ available: false, reason: "cgroups are switched off for this provider" })
    : once(Cgroup.detect())
  let rootLayout: Bash.RootLayout | undefined
  const layout = () => (rootLayout ??= Bash.hostRootLayout())
  const warned = new Set<string>()
  const warn = (key: string, message: string) =>
    Effect.suspend(() => {
      if (warned.has(key)) return Effect.void
      warned.add(key)
      return Effect.logWarning(message)
    })

  const touch = (id: string) => {
    const sandbox = cache.get(id)
    if (sandbox !== undefined) {
      cache.delete(id)
      cache.set(id, sandbox)
    }
    return sandbox
  }

  const acquire = (threadId: string, userId: string) =>
    Effect.suspend(() => {
      for (const [name, value] of [["thread", threadId], ["user", userId]] as const) {
        const decoded = decodeId(value)
        if (Either.isLeft(decoded)) {
          return Effect.fail(
            new SandboxError({
              reason: "invalid_id",
              message: `Invalid ${name} id ${JSON.stringify(value)}: ids must be 1-128 letters, digits, ` +
                "'.', '_' or '-', starting with a letter or digit"
            })
          )
        }
      }
      const id = sandboxId(userId, threadId)
      return Effect.try({
        try: () => {
          const cached = touch(id)
          // The directories are (re)made on every acquire: a host command may have removed one.
          const paths = cached?.paths ?? threadPaths(Path.resolve(app.home), userId, threadId)
          for (const dir of [paths.workspace, paths.uploads, paths.outputs]) Fs.mkdirSync(dir, { recursive: true })
          if (cached !== undefined) return cached
          const sandbox = makeSandbox({
            threadId,
            userId,
            paths,
            skills,
            home: Path.resolve(app.home),
            config: app.config.sandbox,
            bwrap,
            cgroups,
            layout,
            warn,
            lock
          })
          cache.set(id, sandbox)
          while (cache.size > maxCached) cache.delete(cache.keys().next().value!)
          return sandbox
        },
        catch: (cause) =>
          new SandboxError({
            reason: "io",
            message: `Could not create the thread's sandbox directories (${codeOf(cause) ?? "error"})`,
            cause
          })
      })
    })

  return SandboxProvider.of({
    acquire,
    current: (threadId, userId) => Effect.sync(() => Option.fromNullable(touch(sandboxId(userId, threadId)))),
    get: (id) => Effect.sync(() => Option.fromNullable(touch(id))),
    release: () => Effect.void
  })
}

/** How bash runs under a configuration: isolated by bubblewrap, on the host, or not at all (with why). */
export type BashMode =
  | { readonly mode: "bwrap"; readonly path: string }
  | { readonly mode: "host" }
  | { readonly mode: "disabled"; readonly message: string }

/** The bash mode for a configuration (probes bubblewrap once per process), e.g. for a startup notice. */
export const bashMode = (app: AppConfigService["Type"], options: Options = {}): Effect.Effect<BashMode> =>
  Effect.map(
    options.bwrap === "off" ? Effect.succeed(BWRAP_OFF) : Bash.probeBwrap,
    (status): BashMode =>
      status.available
        ? { mode: "bwrap", path: status.path }
        : app.config.sandbox.allow_host_bash
        ? { mode: "host" }
        : { mode: "disabled", message: bashDisabledMessage(status.reason) }
  )

/** A layer of the local provider, reading the data directory and sandbox settings from AppConfigService. */
export const layer = (options: Options = {}): Layer.Layer<SandboxProvider, never, AppConfigService> =>
  Layer.effect(SandboxProvider, Effect.map(AppConfigService, (app) => make(app, options)))
