/**
 * The resource limits of a thread's sandbox (`sandbox.max_processes`, `max_memory_mb`, `tmp_size_mb`,
 * `max_file_size_mb`, `disk_quota_mb`): the limits in bytes, the disk quota and file size checks of a write, the
 * watcher that stops a command at the process cap or past the quota, the notes that explain a failure a limit
 * caused, and the warnings about limits this host cannot enforce.
 */
import * as Os from "node:os"
import * as Effect from "effect/Effect"
import type { AppConfig } from "../../services/AppConfig.js"
import { SandboxError } from "../../services/Sandbox.js"
import type * as Bash from "./Bash.js"
import type * as Cgroup from "./Cgroup.js"
import * as DiskQuota from "./DiskQuota.js"

const MB = 1024 * 1024

/** The limits of a configuration, in bytes. */
export const limitsOf = (config: AppConfig["sandbox"]) => ({
  processes: config.max_processes,
  memoryBytes: config.max_memory_mb * MB,
  tmpBytes: config.tmp_size_mb * MB,
  fileSizeBytes: config.max_file_size_mb * MB,
  diskQuotaBytes: config.disk_quota_mb * MB
})

/** What `limitsOf` gives: each limit in bytes (or processes), 0 for none. */
export type Limits = ReturnType<typeof limitsOf>

/** What the limits of one thread's sandbox are checked with. */
export interface Quota {
  readonly config: AppConfig["sandbox"]
  readonly limits: Limits
  /** The disk use of the thread's files. */
  readonly usage: DiskQuota.Meter
}

/** The limits of a configuration over the thread directory `root` (its `user-data`). */
export const make = (config: AppConfig["sandbox"], root: string): Quota => ({
  config,
  limits: limitsOf(config),
  usage: DiskQuota.meter([root])
})

/** The end of a message about passing the disk quota: the usage, the quota and what to do. */
export const quotaMessage = (quota: Quota, bytes: number): string =>
  `${DiskQuota.megabytes(bytes)} MB, over the disk quota of ${quota.config.disk_quota_mb} MB ` +
  "(sandbox.disk_quota_mb). Delete files you no longer need (e.g. with rm in bash) first."

/**
 * Whether RLIMIT_NPROC caps one sandbox: it is counted per user namespace since Linux 5.14 (and never applies to
 * root); before, it would cap every process of the host user.
 */
export const nprocPerNamespace = (): boolean => {
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

/**
 * The per-file limit and the thread's disk quota, for a write that makes a file `kept + content` bytes long
 * where it was `before` bytes: the refusal, or undefined.
 */
export const checkWrite = async (
  quota: Quota,
  virtual: string,
  kept: number,
  before: number,
  content: string
): Promise<SandboxError | undefined> => {
  const { limits, usage } = quota
  const after = kept + Buffer.byteLength(content, "utf8")
  if (limits.fileSizeBytes > 0 && after > limits.fileSizeBytes) {
    return new SandboxError({
      reason: "too_large",
      message: `${virtual} would be ${DiskQuota.megabytes(after)} MB, over the limit of ` +
        `${quota.config.max_file_size_mb} MB for one file (sandbox.max_file_size_mb).`,
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
    message: `Writing ${virtual} would take the thread's files to ${quotaMessage(quota, used + growth)}`,
    path: virtual
  })
}

/** One-time warnings (through `warn`, once per provider and key) about limits this host cannot enforce. */
export const warnUnenforced = (
  quota: Quota,
  groups: Cgroup.Availability,
  warn: (key: string, message: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const { limits } = quota
    if (limits.processes > 0 && !groups.available) {
      yield* warn(
        "processes",
        nprocPerNamespace()
          ? `sandbox.max_processes is enforced with RLIMIT_NPROC in the sandbox's user namespace, as no cgroup ` +
            `can be used (${groups.reason}); a command that reaches it is not stopped early`
          : `sandbox.max_processes cannot be enforced (${groups.reason}): a command can start processes without ` +
            "limit until it times out"
      )
    }
    if (limits.memoryBytes > 0 && !(groups.available && groups.hierarchy.memory)) {
      yield* warn(
        "memory",
        "sandbox.max_memory_mb limits the memory of each process only: the total of a command's processes is " +
          "capped only with a cgroup v2 memory controller, which Antler cannot use here"
      )
    }
  })

/** Stops the command when it hits the process cap, or when the thread's files pass `diskLimit`. */
export const guardOf = (quota: Quota, group: Cgroup.Group | undefined, diskLimit: number): Bash.Guard | undefined => {
  if (group === undefined && diskLimit <= 0) return undefined
  const { usage } = quota
  let walked = Date.now()
  return {
    intervalMs: 100,
    check: async () => {
      if (group !== undefined && group.forkFailures() > 0) {
        return `it tried to run more than ${quota.config.max_processes} processes and threads at once, the ` +
          "sandbox's limit (sandbox.max_processes). A fork bomb or a loop that keeps starting processes does " +
          "this; start fewer at a time."
      }
      if (diskLimit <= 0) return undefined
      const estimate = await usage.estimate()
      const due = Date.now() - walked > Math.max(5000, 20 * usage.lastWalkMs())
      if (estimate <= diskLimit && !due) return undefined
      const used = await usage.exact()
      walked = Date.now()
      return used > diskLimit ? `the thread's files grew to ${quotaMessage(quota, used)}` : undefined
    }
  }
}

/** Notes on a finished command's failure that a limit explains (what the limit is, and where it is set). */
export const notesOf = (
  quota: Quota,
  outcome: Bash.ProcessOutcome,
  group: Cgroup.Group | undefined,
  isolated: boolean
): Array<string> => {
  const { config, limits } = quota
  const notes: Array<string> = []
  if (outcome.timedOut || outcome.stopped !== undefined) return notes
  const text = outcome.output
  if (limits.memoryBytes > 0 && (MEMORY_FAILURE.test(text) || (group?.oomKills() ?? 0) > 0)) {
    notes.push(
      `Each process may use at most ${config.max_memory_mb} MB of memory (sandbox.max_memory_mb): work ` +
        "on the data in smaller pieces."
    )
  }
  if (limits.fileSizeBytes > 0 && (outcome.exitCode === SIGXFSZ_EXIT || FILE_SIZE_FAILURE.test(text))) {
    notes.push(`A file may be at most ${config.max_file_size_mb} MB (sandbox.max_file_size_mb).`)
  }
  if (NO_SPACE.test(text)) {
    notes.push(
      (isolated && limits.tmpBytes > 0
        ? `/tmp and /dev/shm hold at most ${config.tmp_size_mb} MB each (sandbox.tmp_size_mb). `
        : "") +
        (limits.diskQuotaBytes > 0
          ? `The thread's files may use ${config.disk_quota_mb} MB in all (sandbox.disk_quota_mb).`
          : "")
    )
  }
  if (limits.processes > 0 && FORK_FAILURE.test(text)) {
    notes.push(
      `A command may run at most ${config.max_processes} processes and threads at once ` +
        "(sandbox.max_processes)."
    )
  }
  return notes.filter((note) => note !== "")
}
