/**
 * Mirrors DeerFlow's test_memory_manager_interface.py (test_invariant_tool_mode_requires_search,
 * test_invariant_tool_mode_factory_path_raises): in tool mode the model searches memory with `memory_search`, so
 * tool mode on a backend that cannot search (DeerFlow's noop) is a misconfiguration refused at once, rather than an
 * agent whose memory tools silently never appear. Middleware mode takes either backend, and tool mode with memory
 * off is the warning FileMemory.test checks. Real config files, read as `antler` reads them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const load = (memory: string) => {
  const file = Path.join(tempDir("antler-memcfg-"), "config.yaml")
  Fs.writeFileSync(file, `memory:\n${memory}`)
  return ConfigFile.load(file).pipe(
    Effect.either,
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map())),
    Effect.map((loaded) => ({ file, loaded }))
  )
}

describe("memory.mode tool needs a backend that searches", () => {
  it.effect("tool mode on the noop backend is a configuration error naming memory and what to do", () =>
    Effect.gen(function*() {
      const { file, loaded } = yield* load("  mode: tool\n  manager_class: noop\n")
      if (Either.isRight(loaded)) return assert.fail("tool mode on the noop backend was loaded")
      assert.strictEqual(loaded.left.reason, "schema")
      assert.strictEqual(
        loaded.left.message,
        `${file}: memory: memory.mode 'tool' needs a backend that searches memory (memory_search), and ` +
          "manager_class 'noop' does not: use mode 'middleware', manager_class 'deermem', or enabled: false"
      )
    }))

  it.effect("middleware mode takes the noop backend; tool mode takes deermem, and noop with memory off", () =>
    Effect.gen(function*() {
      for (const memory of [
        "  mode: middleware\n  manager_class: noop\n",
        "  mode: tool\n  manager_class: deermem\n",
        "  enabled: false\n  mode: tool\n  manager_class: noop\n"
      ]) {
        const { loaded } = yield* load(memory)
        assert.isTrue(Either.isRight(loaded), `${memory}: ${Either.isLeft(loaded) ? loaded.left.message : ""}`)
      }
    }))
})
