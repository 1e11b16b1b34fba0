/**
 * vitest global setup: the run's temporary files go in one directory of their own, removed when the run ends.
 * Tests make temp directories (homes, stores, uploads, fixtures) with `os.tmpdir()`, and so do the processes they
 * start; with TMPDIR pointing here, none of them is left behind in the system's temp directory. Set
 * ANTLER_KEEP_TEST_TMP=1 to keep it (its path is printed) for a look after a failure.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export default function setup() {
  const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-test-run-")))
  // as /tmp is: tests run some processes as other users (PostgreSQL, a sandbox as uid 65534), which must reach
  // the directories made here and may make their own
  Fs.chmodSync(dir, 0o1777)
  process.env.TMPDIR = dir
  return () => {
    if (process.env.ANTLER_KEEP_TEST_TMP === "1") {
      process.stderr.write(`[test] temporary files kept in ${dir}\n`)
      return
    }
    Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
  }
}
