/**
 * The resource limits of one command and how bash applies them: `ulimit` hard and soft limits set before the
 * command runs in a fresh bash (the staged setup script applies the same limits itself).
 */

/** Resource limits of one command (0 = none). */
export interface Limits {
  /** Size of `/tmp` and of `/dev/shm`, each. */
  readonly tmpBytes: number
  /** Address space of each process (RLIMIT_AS). */
  readonly memoryBytes: number
  /** The largest file a process may write (RLIMIT_FSIZE). */
  readonly fileSizeBytes: number
  /** Tasks of the sandbox's user (RLIMIT_NPROC: a per-sandbox cap only when not running as root). */
  readonly processes: number
}

/** No limits. */
export const NO_LIMITS: Limits = { tmpBytes: 0, memoryBytes: 0, fileSizeBytes: 0, processes: 0 }

/** `ulimit` arguments for limits (bash: -v and -f in KiB), core dumps always off. */
export const ulimitArgs = (limits: Limits): Array<string> => {
  const kib = (bytes: number) => String(Math.max(1, Math.floor(bytes / 1024)))
  return [
    limits.memoryBytes > 0 ? kib(limits.memoryBytes) : "",
    limits.fileSizeBytes > 0 ? kib(limits.fileSizeBytes) : "",
    limits.processes > 0 ? String(limits.processes) : ""
  ]
}

/**
 * Sets hard and soft limits (a process without CAP_SYS_RESOURCE cannot raise them again), then runs the
 * command in a fresh bash, so its line numbers and `$0` are its own. Arguments: memory KiB, file KiB, tasks
 * (empty = none), command.
 */
export const LIMITS_PRELUDE = `limit() { [ -z "$2" ] || ulimit -H -S "$1" "$2"; }
ulimit -H -S -c 0 && limit -v "$1" && limit -f "$2" && limit -u "$3" ||
  { echo "antler: could not apply the sandbox's resource limits" >&2; exit 126; }
exec /bin/bash -c "$4" 2>&1`
