/**
 * The sandbox port. A thread's sandbox is where the model's files live and its commands run. The model sees
 * only virtual paths (`/mnt/user-data/{workspace,uploads,outputs}`, `/mnt/skills`); the sandbox maps them to
 * host directories and back, and refuses anything that would leave them.
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

/** The host directories of a thread under the data directory (`ANTLER_HOME`). Pure: creates nothing. */
export const threadPaths = (home: string, userId: string, threadId: string): ThreadPaths => {
  const root = `${home.replace(/\/+$/, "")}/users/${userId}/threads/${threadId}/user-data`
  return { root, workspace: `${root}/workspace`, uploads: `${root}/uploads`, outputs: `${root}/outputs` }
}

/** Why a sandbox operation failed. */
export const SandboxErrorReason = Schema.Literal(
  "path_escape",
  "not_found",
  "permission",
  "is_directory",
  "not_a_directory",
  "too_large",
  "binary",
  "bash_disabled",
  "timeout",
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

/** The outcome of a command. */
export interface ExecResult {
  /** stdout and stderr interleaved as the process wrote them, host paths masked. */
  readonly output: string
  readonly exitCode: number | null
  readonly timedOut: boolean
}

/** One thread's sandbox. Every path argument is a virtual path. */
export interface Sandbox {
  readonly id: string
  readonly threadId: string
  readonly paths: ThreadPaths
  /** Whether this sandbox's files are the thread's host directories (true for the local sandbox). */
  readonly usesThreadDataMounts: boolean
  /** Maps a virtual path to a host path, refusing escapes; `write` also refuses read-only mounts. */
  readonly resolve: (virtualPath: string, access: "read" | "write") => Effect.Effect<string, SandboxError>
  /** Replaces host paths in text with their virtual paths. */
  readonly mask: (text: string) => string
  /** Runs a shell command in the workspace. */
  readonly exec: (
    command: string,
    options?: { readonly timeoutMs?: number; readonly env?: Readonly<Record<string, string>> }
  ) => Effect.Effect<ExecResult, SandboxError>
  readonly readText: (virtualPath: string) => Effect.Effect<string, SandboxError>
  readonly writeText: (virtualPath: string, content: string, append?: boolean) => Effect.Effect<void, SandboxError>
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
