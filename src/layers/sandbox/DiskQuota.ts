/**
 * How much disk a thread's files use, for `sandbox.disk_quota_mb`. The exact figure walks the thread's
 * directories; between walks an estimate adds to the last exact figure what the filesystem has lost since
 * (statfs: free blocks and free inodes), which costs one system call. The estimate is never below the truth
 * unless other processes free space on the same filesystem meanwhile, so a command's watcher polls the estimate
 * often, walks when the estimate passes the limit (to confirm), and walks now and then anyway.
 */
import * as Fsp from "node:fs/promises"

/** What each file, directory or link counts at least: one filesystem block (so empty files count too). */
export const MIN_ENTRY_BYTES = 4096

const BATCH = 64

/** The disk the trees under `dirs` use: every inode once, its allocated bytes but at least `MIN_ENTRY_BYTES`. */
export const measure = async (dirs: ReadonlyArray<string>): Promise<number> => {
  const seen = new Set<string>()
  let total = 0
  const count = (stat: { dev: number; ino: number; blocks: number }) => {
    const key = `${stat.dev}:${stat.ino}`
    if (seen.has(key)) return
    seen.add(key)
    total += Math.max(stat.blocks * 512, MIN_ENTRY_BYTES)
  }
  const pending: Array<string> = []
  for (const dir of dirs) {
    const stat = await Fsp.lstat(dir).catch(() => undefined)
    if (stat === undefined) continue
    count(stat)
    if (stat.isDirectory()) pending.push(dir)
  }
  while (pending.length > 0) {
    const dir = pending.pop()!
    const names = await Fsp.readdir(dir).catch(() => [] as Array<string>)
    for (let i = 0; i < names.length; i += BATCH) {
      const stats = await Promise.all(
        names.slice(i, i + BATCH).map((name) => {
          const path = `${dir}/${name}`
          return Fsp.lstat(path).then((stat) => ({ path, stat }), () => undefined)
        })
      )
      for (const entry of stats) {
        if (entry === undefined) continue
        count(entry.stat)
        if (entry.stat.isDirectory()) pending.push(entry.path)
      }
    }
  }
  return total
}

interface Baseline {
  readonly usage: number
  readonly freeBytes: number
  readonly freeInodes: number
}

const free = async (path: string): Promise<{ readonly bytes: number; readonly inodes: number } | undefined> => {
  try {
    const stats = await Fsp.statfs(path)
    return { bytes: stats.bfree * stats.bsize, inodes: stats.ffree }
  } catch {
    return undefined
  }
}

/** A thread's disk use: exact (a walk) or estimated (one statfs since the last walk). */
export interface Meter {
  /** Walks the directories; the result is the new baseline of `estimate`. */
  readonly exact: () => Promise<number>
  /** The last exact usage plus what the filesystem lost since; walks first when there is no baseline yet. */
  readonly estimate: () => Promise<number>
  /** How long the last walk took, in milliseconds. */
  readonly lastWalkMs: () => number
}

/** A meter over the trees under `dirs` (all on the filesystem of `dirs[0]`). */
export const meter = (dirs: ReadonlyArray<string>): Meter => {
  let baseline: Baseline | undefined
  let walkMs = 0
  const exact = async () => {
    const before = await free(dirs[0]!)
    const started = Date.now()
    const usage = await measure(dirs)
    walkMs = Date.now() - started
    baseline = { usage, freeBytes: before?.bytes ?? 0, freeInodes: before?.inodes ?? 0 }
    return usage
  }
  const estimate = async () => {
    if (baseline === undefined) return exact()
    const now = await free(dirs[0]!)
    if (now === undefined) return baseline.usage
    const lost = Math.max(0, baseline.freeBytes - now.bytes) + Math.max(0, baseline.freeInodes - now.inodes) *
        MIN_ENTRY_BYTES
    return baseline.usage + lost
  }
  return { exact, estimate, lastWalkMs: () => walkMs }
}

/** Megabytes for messages (one decimal below 10). */
export const megabytes = (bytes: number): string => {
  const mb = bytes / (1024 * 1024)
  return mb < 10 ? mb.toFixed(1) : String(Math.round(mb))
}
