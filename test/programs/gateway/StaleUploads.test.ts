/**
 * The staging files uploads leave when their process is killed (DeerFlow's test_uploads_manager,
 * `cleanup_stale_upload_staging_files`): the gateway removes them when it starts, and only them: a recent one
 * (another process may be writing it), files that merely look alike and anything outside a thread's uploads stay.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as StaleUploads from "../../../src/programs/StaleUploads.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Support from "./support.js"

describe("stale upload staging files", () => {
  it("are removed when the gateway starts; recent ones, look-alikes and other folders' stay", async () => {
    const home = Support.tempDir("antler-stale-")
    const alice = threadPaths(home, "alice", "t1").uploads
    const bob = threadPaths(home, "bob", "t2").uploads
    const elsewhere = Path.join(home, "misc/t3/user-data/uploads")
    for (const dir of [alice, bob, elsewhere]) Fs.mkdirSync(dir, { recursive: true })
    const old = (Date.now() - StaleUploads.STALE_AFTER_MS - 60_000) / 1000
    const write = (dir: string, name: string, stale = true) => {
      const file = Path.join(dir, name)
      Fs.writeFileSync(file, "partial")
      if (stale) Fs.utimesSync(file, old, old)
      return file
    }
    const gone = [write(alice, ".upload-old.part"), write(bob, ".upload-new.part")]
    const kept = [
      write(alice, ".upload-now.part", false),
      write(alice, ".env"),
      write(alice, ".upload-note.txt"),
      write(alice, "draft.part"),
      write(elsewhere, ".upload-ignore.part")
    ]
    Fs.mkdirSync(Path.join(bob, ".upload-dir.part"))
    const gateway = await Support.start({ script: () => "ok", home })
    try {
      for (const file of gone) assert.isFalse(Fs.existsSync(file), file)
      for (const file of kept) assert.isTrue(Fs.existsSync(file), file)
      assert.isTrue(Fs.statSync(Path.join(bob, ".upload-dir.part")).isDirectory())
    } finally {
      await gateway.stop()
    }
  })
})
