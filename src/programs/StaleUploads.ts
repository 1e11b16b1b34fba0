/**
 * The staging files an upload leaves in a thread's uploads directory when its process is killed mid-way
 * (`.upload-*.part`, see `Upload.ts`): no listing shows them, yet they take disk space and count against the user's
 * `gateway.quotas`. The gateway removes them when it starts, as DeerFlow's does
 * (`cleanup_stale_upload_staging_files`): regular files only, in the threads' uploads directories only. Unlike
 * DeerFlow it leaves those written in the last `STALE_AFTER_MS`: another process sharing the data directory (a
 * cluster's runner, `antler upload`) may be writing one at that moment.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { isStagingFile } from "../middleware/Uploads.js"

/** How old a staging file must be to be taken for the leftover of an upload that cannot end any more. */
export const STALE_AFTER_MS = 60 * 60 * 1000

const children = (dir: string) => Fs.readdir(dir, { withFileTypes: true }).catch(() => [])

/**
 * Removes the stale staging files of every thread's uploads (`{home}/users/{user}/threads/{thread}/user-data/uploads`)
 * and answers how many it removed. Never fails: what cannot be read or removed is left.
 */
export const removeStale = (home: string): Effect.Effect<number> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.promise(async () => {
      let removed = 0
      const users = Path.join(home, "users")
      for (const user of await children(users)) {
        if (!user.isDirectory()) continue
        const threads = Path.join(users, user.name, "threads")
        for (const thread of await children(threads)) {
          if (!thread.isDirectory()) continue
          const uploads = Path.join(threads, thread.name, "user-data", "uploads")
          for (const entry of await children(uploads)) {
            if (!entry.isFile() || !isStagingFile(entry.name)) continue
            const file = Path.join(uploads, entry.name)
            const stat = await Fs.lstat(file).catch(() => undefined)
            if (stat === undefined || !stat.isFile() || now - stat.mtimeMs < STALE_AFTER_MS) continue
            if (await Fs.unlink(file).then(() => true, () => false)) removed++
          }
        }
      }
      return removed
    }))
