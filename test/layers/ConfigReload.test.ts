/**
 * DeerFlow test_app_config_reload.py (`get_app_config()` reloads when the file changed, keeps the last good
 * configuration when an edit does not validate) and test_reload_boundary.py (the sections read once at the start):
 * `ConfigReload` over a real `config.yaml` in a temp directory. The gateway's runs over it are in
 * test/programs/gateway/ConfigReload.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ConfigReload from "../../src/layers/ConfigReload.js"
import type { AppConfigService } from "../../src/services/AppConfig.js"
import { STARTUP_ONLY } from "../../src/services/LiveConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"
import { captureLogs } from "../support/logs.js"

const tempDir = tempDirs()

const model = (name: string) => ({ name, model: `${name}-id`, base_url: "http://127.0.0.1:9/v1", api_key: "sk-x" })
const unused = ModelService.of({ generate: () => Effect.die("no model call in these tests") })

/** A config file in a temp dir, the configuration loaded from it, and a `LiveConfig` over it. */
const setup = (first: Record<string, unknown>, options: { readonly recheckMs?: number } = {}) =>
  Effect.gen(function*() {
    const dir = tempDir("antler-reload-")
    const file = Path.join(dir, "config.yaml")
    const write = (content: Record<string, unknown> | string) =>
      Fs.writeFileSync(file, typeof content === "string" ? content : Yaml.stringify(content))
    write(first)
    const app = yield* ConfigFile.loadFile(file, dir)
    const prepared: Array<AppConfigService["Type"]> = []
    const live = yield* ConfigReload.make({
      initial: { app, models: app.config.models, model: unused },
      prepare: (edited) =>
        Effect.suspend(() => {
          prepared.push(edited)
          return edited.config.models.length === 0
            ? Effect.fail("no model is configured")
            : Effect.succeed({ models: edited.config.models, model: unused })
        }),
      recheckMs: options.recheckMs ?? 0
    })
    return { file, write, live, prepared }
  })

describe("config.yaml edited while the process runs", () => {
  it.effect("an edit is taken for what asks next; an unchanged file is not read again", () =>
    Effect.gen(function*() {
      const { write, live, prepared } = yield* setup({ models: [model("a"), model("b")], title: { enabled: true } })
      const first = yield* live.current
      assert.strictEqual(first.revision, 0)
      assert.deepStrictEqual(first.models.map((m) => m.name), ["a", "b"])
      assert.strictEqual(yield* live.current, first, "an untouched file changes nothing")
      write({ models: [model("b"), model("a")], title: { enabled: false, max_words: 3 } })
      const second = yield* live.current
      assert.strictEqual(second.revision, 1)
      assert.deepStrictEqual(second.models.map((m) => m.name), ["b", "a"])
      assert.strictEqual(second.app.config.title.enabled, false)
      assert.strictEqual(second.app.config.title.max_words, 3)
      assert.strictEqual(yield* live.current, second)
      assert.lengthOf(prepared, 1)
      // a section removed takes its default again (DeerFlow's singletons reset when their section goes)
      write({ models: [model("b")] })
      const third = yield* live.current
      assert.strictEqual(third.revision, 2)
      assert.strictEqual(third.app.config.title.enabled, true)
    }))

  it.effect("an edit that does not decode is refused with one warning; the last good configuration stays", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      const { file, write, live } = yield* setup({ models: [model("a")], title: { enabled: false } })
      write("models: [{ name: a\n")
      const kept = yield* Effect.provide(live.current, capture)
      assert.strictEqual(kept.revision, 0)
      assert.strictEqual(kept.app.config.title.enabled, false)
      assert.strictEqual(yield* Effect.provide(live.current, capture), kept)
      assert.lengthOf(logged, 1, logged.join("\n"))
      assert.include(logged[0]!, `${file} changed but was not taken; runs go on with the configuration taken before it`)
      assert.include(logged[0]!, "YAML syntax error")
      // a value of the wrong type: the key and what was expected
      write({ models: [model("a")], title: false })
      assert.strictEqual((yield* Effect.provide(live.current, capture)).revision, 0)
      assert.lengthOf(logged, 2)
      assert.include(logged[1]!, "title: expected a mapping (key: value), got false")
      // fixed: taken; a key mistyped in the same edit is named
      write({ models: [model("a")], title: { enabled: true }, titel: { enabled: false } })
      const fixed = yield* Effect.provide(live.current, capture)
      assert.strictEqual(fixed.revision, 1)
      assert.strictEqual(fixed.app.config.title.enabled, true)
      assert.strictEqual(logged[2], `${file}: the edit has keys Antler does not read: titel`)
    }))

  it.effect("an edit the process cannot use (its model choice fails) is refused; a removed file keeps the last", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      const { file, write, live } = yield* setup({ models: [model("a")] })
      write({ models: [] })
      assert.strictEqual((yield* Effect.provide(live.current, capture)).revision, 0)
      assert.deepStrictEqual(logged, [
        `${file} changed but was not taken; runs go on with the configuration taken before it: no model is configured`
      ])
      Fs.rmSync(file)
      const kept = yield* Effect.provide(live.current, capture)
      assert.deepStrictEqual(kept.models.map((m) => m.name), ["a"])
      assert.lengthOf(logged, 2)
      assert.include(logged[1]!, "changed but was not taken")
      assert.strictEqual(yield* Effect.provide(live.current, capture), kept)
      assert.lengthOf(logged, 2, "said once")
    }))

  it.effect("the same size and modification time, another content: taken (DeerFlow's content digest)", () =>
    Effect.gen(function*() {
      const { file, write, live } = yield* setup({ models: [model("a")] })
      const { mtime, size } = Fs.statSync(file)
      write({ models: [model("b")] })
      assert.strictEqual(Fs.statSync(file).size, size)
      Fs.utimesSync(file, mtime, mtime)
      assert.deepStrictEqual((yield* live.current).models.map((m) => m.name), ["b"])
    }))

  it.effect("the sections read at the start keep their values; their edit is named as taking effect on a restart", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      const { file, write, live } = yield* setup({ models: [model("a")], gateway: { port: 8001 } })
      write({ models: [model("a")], gateway: { port: 9001 } })
      const same = yield* Effect.provide(live.current, capture)
      assert.strictEqual(same.revision, 0, "nothing a run reads changed")
      assert.deepStrictEqual(logged, [
        `${file}: gateway changed; that section is read when the process starts, so the edit takes effect on a restart`
      ])
      write({ models: [model("a")], gateway: { port: 9001 }, sandbox: { allow_host_bash: true }, recursion_limit: 7 })
      const next = yield* Effect.provide(live.current, capture)
      assert.strictEqual(next.revision, 1)
      assert.strictEqual(next.app.config.recursion_limit, 7)
      assert.strictEqual(next.app.config.gateway.port, 8001)
      assert.strictEqual(next.app.config.sandbox.allow_host_bash, false, "the sandbox stays as it started")
      assert.include(logged[1]!, "gateway, sandbox changed; these sections are read when the process starts")
      assert.deepStrictEqual([...STARTUP_ONLY].sort(), [
        "authorization",
        "database",
        "extensions",
        "gateway",
        "log_level",
        "logging",
        "mcp_tasks",
        "memory.backend_config.manifest_filename",
        "memory.backend_config.patterns_dir",
        "memory.backend_config.prompts_dir",
        "memory.backend_config.storage_class",
        "memory.backend_config.storage_path",
        "memory.manager_class",
        "sandbox",
        "skills.container_path",
        "skills.path",
        "tracing"
      ])
    }))

  it.effect("memory follows the edit but where its files are and its backend: those keep their values, named", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      const { file, write, live } = yield* setup({ models: [model("a")], memory: { enabled: false } })
      write({
        models: [model("a")],
        memory: {
          enabled: true,
          manager_class: "noop",
          backend_config: { max_facts: 7, debounce_seconds: 1, storage_path: "elsewhere" }
        }
      })
      const next = yield* Effect.provide(live.current, capture)
      assert.strictEqual(next.revision, 1)
      const memory = next.app.config.memory
      assert.strictEqual(memory.enabled, true)
      assert.strictEqual(memory.backend_config.max_facts, 7)
      assert.strictEqual(memory.backend_config.debounce_seconds, 1)
      assert.strictEqual(memory.backend_config.storage_path, "", "where the files are: as it started")
      assert.strictEqual(memory.manager_class, "deermem", "the backend: as it started")
      assert.deepStrictEqual(logged, [
        `${file}: memory.manager_class, memory.backend_config.storage_path changed; these settings are read when ` +
          "the process starts, so the edit takes effect on a restart",
        `${file} changed: the runs started from now on use it`
      ])
    }))

  it.effect("the file is looked at once every recheckMs at most", () =>
    Effect.gen(function*() {
      const { write, live } = yield* setup({ models: [model("a")] }, { recheckMs: ConfigReload.RECHECK_MS })
      write({ models: [model("b")] })
      assert.deepStrictEqual((yield* live.current).models.map((m) => m.name), ["a"])
      yield* TestClock.adjust(ConfigReload.RECHECK_MS)
      assert.deepStrictEqual((yield* live.current).models.map((m) => m.name), ["b"])
    }))
})
