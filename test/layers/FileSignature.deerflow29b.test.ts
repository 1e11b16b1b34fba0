/**
 * DeerFlow test_file_signature.py: the signature by which a process sees that its configuration file changed
 * (DeerFlow's mtime, size and sha256; Antler's device, inode, size and modification and change times, `stampOf`).
 * What an operator sees of it: an edit of the same length, with its modification time set back, is still taken.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ConfigReload from "../../src/layers/ConfigReload.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"
import { captureLogs } from "../support/logs.js"

const tempDir = tempDirs()
// a whole second, so the file's modification time can be set back exactly
const WHEN = 1_700_000_000
const unused = ModelService.of({ generate: () => Effect.die("no model call in these tests") })
const model = { name: "a", model: "a-id", base_url: "http://127.0.0.1:9/v1", api_key: "sk-x" }

const setup = (first: Record<string, unknown>) =>
  Effect.gen(function*() {
    const dir = tempDir("antler-signature-")
    const file = Path.join(dir, "config.yaml")
    Fs.writeFileSync(file, Yaml.stringify(first))
    Fs.utimesSync(file, WHEN, WHEN)
    const app = yield* ConfigFile.loadFile(file, dir)
    const live = yield* ConfigReload.make({
      initial: { app, models: app.config.models, model: unused },
      prepare: (edited) => Effect.succeed({ models: edited.config.models, model: unused }),
      recheckMs: 0
    })
    return { file, live }
  })

describe("DeerFlow test_file_signature", () => {
  it.effect("test_content_change_changes_signature_even_with_same_mtime_and_size: the swap is taken", () =>
    Effect.gen(function*() {
      const { file, live } = yield* setup({ models: [model], title: { max_words: 5 } })
      assert.strictEqual((yield* live.current).app.config.title.max_words, 5)
      const before = Fs.statSync(file)
      Fs.writeFileSync(file, Yaml.stringify({ models: [model], title: { max_words: 9 } }))
      Fs.utimesSync(file, WHEN, WHEN)
      const after = Fs.statSync(file)
      assert.strictEqual(after.mtimeMs, before.mtimeMs, "guard: the modification time is the one before")
      assert.strictEqual(after.size, before.size, "guard: the size is the one before")
      const taken = yield* live.current
      assert.strictEqual(taken.revision, 1)
      assert.strictEqual(taken.app.config.title.max_words, 9)
    }))

  it.effect("test_missing_file_returns_none: a removed file is not a configuration; the last one stays, said once", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      const { file, live } = yield* setup({ models: [model], title: { max_words: 5 } })
      Fs.rmSync(file)
      const kept = yield* Effect.provide(live.current, capture)
      assert.strictEqual(kept.revision, 0)
      assert.strictEqual(kept.app.config.title.max_words, 5)
      yield* Effect.provide(live.current, capture)
      const warnings = logged.filter((line) => line.includes("changed but was not taken"))
      assert.lengthOf(warnings, 1)
      assert.include(warnings[0], file)
    }))
})
