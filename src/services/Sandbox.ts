/**
 * The sandbox port. A thread's sandbox is where the model's files live and its commands run. The model sees
 * only virtual paths (`/mnt/user-data/{workspace,uploads,outputs}`, `/mnt/skills`); the sandbox maps them to
 * host directories and back, and refuses anything that would leave them. Every file operation of the port
 * takes a virtual path and reports failures with virtual paths only, so tools built on it never show the
 * model a host path.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** The virtual root of a thread's user data. */
export const USER_DATA = "/mnt/user-data"
export const WORKSPACE = "/mnt/user-data/workspace"
export const UPLOADS = "/mnt/user-data/uploads"
export const OUTPUTS = "/mnt/user-data/outputs"
/** Where skills are mounted (read-only). */
export const SKILLS = "/mnt/skills"
/** Where the thread's ACP workspace is mounted, read-only: ACP agents write there, the lead agent only reads. */
export const ACP_WORKSPACE = "/mnt/acp-workspace"

/**
 * Environment variables a command is never given: those that make bash or the dynamic linker run other code
 * (`BASH_ENV`, `LD_PRELOAD`...). The bubblewrap sandbox leaves them out of a command's environment, and a skill may
 * not declare them as secrets (so bash on the host never gets them from a request either).
 */
export const UNSAFE_ENV_NAME = /^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|BASH_FUNC_.*|LD_.*)$/

/**
 * A path argument as the file tools take it, made absolute and normalised: a relative path is taken from the
 * workspace, empty and `.` segments are dropped (`..` is kept: a sandbox refuses it). Pure; checks nothing else.
 */
export const absoluteVirtual = (input: string): string => {
  const absolute = input.startsWith("/") ? input : `${WORKSPACE}/${input}`
  return `/${absolute.split("/").filter((segment) => segment !== "" && segment !== ".").join("/")}`
}

/** Host directories of one thread. */
export interface ThreadPaths {
  /** `{home}/users/{user}/threads/{thread}/user-data` */
  readonly root: string
  readonly workspace: string
  readonly uploads: string
  readonly outputs: string
}

/** A thread or user id that is safe as one path segment. */
export const SafeId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, {
    message: () => "ids must be 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)

/** Whether a text is a `SafeId` (one path segment of allowed characters). */
export const isSafeId: (u: unknown) => u is string = Schema.is(SafeId)

/** The host directories of a thread under the data directory (`ANTLER_HOME`). Pure: creates nothing. */
export const threadPaths = (home: string, userId: string, threadId: string): ThreadPaths => {
  const root = `${home.replace(/\/+$/, "")}/users/${userId}/threads/${threadId}/user-data`
  return { root, workspace: `${root}/workspace`, uploads: `${root}/uploads`, outputs: `${root}/outputs` }
}

/**
 * The host directory of a thread's ACP workspace (`{home}/users/{user}/threads/{thread}/acp-workspace`, next to
 * its `user-data`, as in DeerFlow). Pure: creates nothing.
 */
export const acpWorkspacePath = (home: string, userId: string, threadId: string): string =>
  `${home.replace(/\/+$/, "")}/users/${userId}/threads/${threadId}/acp-workspace`

/** Why a sandbox operation failed. */
export const SandboxErrorReason = Schema.Literal(
  "path_escape",
  "read_only",
  "invalid_id",
  "not_found",
  "permission",
  "is_directory",
  "not_a_directory",
  "too_large",
  "binary",
  "bash_disabled",
  "timeout",
  "quota",
  "io"
)
export type SandboxErrorReason = typeof SandboxErrorReason.Type

/** A sandbox operation that failed; `message` is safe to show the model (virtual paths only). */
export class SandboxError extends Schema.TaggedError<SandboxError>()("SandboxError", {
  reason: SandboxErrorReason,
  message: Schema.String,
  path: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

/** Options of one command. */
export interface ExecOptions {
  /** A shorter timeout than the configured one (`sandbox.bash_command_timeout`); a longer one is capped. */
  readonly timeoutMs?: number
  /** Extra environment variables for this command. */
  readonly env?: Readonly<Record<string, string>>
  /**
   * Texts shown as `[redacted]` wherever the command's output goes (the result, `onOutput`): the secrets `env`
   * gives it (`SkillSecrets.maskedTexts`).
   */
  readonly masked?: ReadonlyArray<string>
  /** Overrides `sandbox.bash_output_max_chars` (0 = unlimited). */
  readonly maxOutputChars?: number
  /**
   * Called with the command's output while it runs (stdout and stderr as written, host paths masked), a line
   * at a time: `\n` or `\r` ends one, a longer stretch without either comes in pieces, and what is left comes
   * when the command ends. For showing progress only: the result's `output` is the same with or without it.
   */
  readonly onOutput?: (text: string) => void
  /**
   * Virtual directories inside a read-only mount (the skills') the command does not see: under bubblewrap each
   * shows empty and read-only; on the host (the skills' only) a command naming one is refused, and the others see
   * the skills without them.
   */
  readonly hidden?: ReadonlyArray<string>
}

/** The outcome of a command. */
export interface ExecResult {
  /**
   * stdout and stderr interleaved as the process wrote them, host paths masked, and middle-truncated to the
   * output cap with `\n... [middle truncated: {n} chars skipped] ...\n`.
   */
  readonly output: string
  /** The exit code; `null` when the command was stopped (a timeout or a limit in `stopped`). */
  readonly exitCode: number | null
  readonly timedOut: boolean
  /** The timeout that applied, in milliseconds. */
  readonly timeoutMs: number
  /**
   * Why the command was stopped before it finished, other than the timeout (a resource limit), in words the
   * model can act on.
   */
  readonly stopped?: string
  /** Resource limits the command's output suggests it ran into, in words the model can act on. */
  readonly notes?: ReadonlyArray<string>
}

/** What a path is. */
export interface FileInfo {
  readonly kind: "file" | "directory" | "other"
  /** Bytes, for files. */
  readonly size: number
}

/** One entry found by `walk`. */
export interface WalkEntry {
  /** The entry's virtual path. */
  readonly path: string
  /** The path relative to the walked directory, `/`-separated. */
  readonly relative: string
  readonly kind: "file" | "directory"
  /** 1 for direct children. */
  readonly depth: number
}

/** Options of `walk`. */
export interface WalkOptions {
  /** How deep to go (1 = direct children only). Unlimited by default. */
  readonly maxDepth?: number
  /** Stop after this many entries (then `truncated` is true). */
  readonly maxEntries?: number
  /** Entries to leave out (and not descend into), by name. */
  readonly skip?: (name: string, kind: "file" | "directory") => boolean
}

/** What `walk` found, in depth-first order with sorted siblings. */
export interface WalkResult {
  readonly entries: ReadonlyArray<WalkEntry>
  readonly truncated: boolean
}

/** One thread's sandbox. Every path argument is a virtual path. */
export interface Sandbox {
  readonly id: string
  readonly threadId: string
  readonly userId: string
  readonly paths: ThreadPaths
  /** Whether this sandbox's files are the thread's host directories (true for the local sandbox). */
  readonly usesThreadDataMounts: boolean
  /**
   * Maps a virtual path to a host path, refusing escapes (`..`, encoded separators, NUL bytes, paths outside
   * the virtual roots, symlinks leading out of the thread's directories); `write` also refuses read-only
   * mounts. The result is the real path (symlinks resolved). For the host side only: never show it.
   */
  readonly resolve: (virtualPath: string, access: "read" | "write") => Effect.Effect<string, SandboxError>
  /** Replaces host paths in text with their virtual paths. */
  readonly mask: (text: string) => string
  /** Runs a shell command in the workspace (isolated; see the provider for how). */
  readonly exec: (command: string, options?: ExecOptions) => Effect.Effect<ExecResult, SandboxError>
  /** Reads a UTF-8 text file; binary or non-UTF-8 content fails with reason `binary`. */
  readonly readText: (virtualPath: string) => Effect.Effect<string, SandboxError>
  /** Writes (or appends to) a file, creating parent directories. */
  readonly writeText: (virtualPath: string, content: string, append?: boolean) => Effect.Effect<void, SandboxError>
  /** Reads a file's bytes; files over `maxBytes` fail with reason `too_large` without being read. */
  readonly readBytes: (virtualPath: string, maxBytes: number) => Effect.Effect<Uint8Array, SandboxError>
  /** What a path is. */
  readonly stat: (virtualPath: string) => Effect.Effect<FileInfo, SandboxError>
  /**
   * Lists a directory tree. Symlinks are reported as what they point to when that stays inside the
   * thread's directories and skipped otherwise; symlinked directories are never descended into.
   */
  readonly walk: (virtualPath: string, options?: WalkOptions) => Effect.Effect<WalkResult, SandboxError>
  /** Runs `effect` holding the lock of one file (process-wide), so writes to a file never interleave. */
  readonly withFileLock: <A, E, R>(
    virtualPath: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | SandboxError, R>
}

/** Hands out per-thread sandboxes. App-level: built once per process. */
export class SandboxProvider extends Context.Tag("antler/SandboxProvider")<
  SandboxProvider,
  {
    /** The thread's sandbox, created on first use; the same id every time for the same thread. */
    readonly acquire: (threadId: string, userId: string) => Effect.Effect<Sandbox, SandboxError>
    /** The sandbox already acquired for this thread, if any (does not acquire one). */
    readonly current: (threadId: string, userId: string) => Effect.Effect<Option.Option<Sandbox>>
    /** A sandbox handed out earlier, if it is still live. */
    readonly get: (sandboxId: string) => Effect.Effect<Option.Option<Sandbox>>
    /** Gives a sandbox back after a run (the local provider keeps it: release is a no-op there). */
    readonly release: (sandboxId: string) => Effect.Effect<void>
  }
>() {}
