/**
 * `loop_detection` and `token_usage` in `config.yaml`, as a user writes them. Mirrors DeerFlow's
 * test_loop_detection_config.py (its defaults, custom values, zero thresholds and a hard limit below its warning
 * refused, per-tool overrides) and test_token_usage_config.py (TokenUsage on by default). A refusal is a
 * configuration error naming the file, the key and the rule.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as Chain from "../../src/middleware/Chain.js"
import * as Chains from "../../src/programs/Chains.js"

const fileOf = (config: Record<string, unknown>) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-guards-"))
  const file = Path.join(dir, "config.yaml")
  Fs.writeFileSync(file, Yaml.stringify(config))
  return file
}

const load = (config: Record<string, unknown>) => ConfigFile.load(fileOf(config)).pipe(Effect.map((app) => app.config))

/** The lines of the configuration error the file gives, without the file's name before each. */
const problems = (loopDetection: Record<string, unknown>) =>
  Effect.gen(function*() {
    const file = fileOf({ loop_detection: loopDetection })
    const error = yield* Effect.flip(ConfigFile.load(file))
    assert.strictEqual(error.reason, "schema")
    return error.message.split("\n").map((line) => line.replace(`${file}: `, ""))
  })

describe("loop_detection", () => {
  it.effect("left out, it is on with DeerFlow's thresholds", () =>
    Effect.gen(function*() {
      const config = yield* load({})
      assert.deepStrictEqual(config.loop_detection, {
        enabled: true,
        warn_threshold: 3,
        hard_limit: 5,
        window_size: 20,
        max_tracked_threads: 100,
        tool_freq_warn: 30,
        tool_freq_hard_limit: 50,
        tool_freq_overrides: {}
      })
      assert.include(Chain.names(Chains.chain({ config })), "LoopDetection")
    }))

  it.effect("custom values and a per-tool override are taken as written", () =>
    Effect.gen(function*() {
      const written = {
        enabled: false,
        warn_threshold: 10,
        hard_limit: 20,
        window_size: 50,
        max_tracked_threads: 200,
        tool_freq_warn: 60,
        tool_freq_hard_limit: 80,
        tool_freq_overrides: { bash: { warn: 150, hard_limit: 300 } }
      }
      const config = yield* load({ loop_detection: written })
      assert.deepStrictEqual(config.loop_detection, written)
      assert.notInclude(Chain.names(Chains.chain({ config })), "LoopDetection")
    }))

  it.effect("a zero threshold is refused, naming the key", () =>
    Effect.gen(function*() {
      for (const key of ["warn_threshold", "hard_limit", "tool_freq_warn", "tool_freq_hard_limit"]) {
        const lines = yield* problems({ [key]: 0 })
        assert.isTrue(lines.some((line) => line.startsWith(`loop_detection.${key}: `) && line.includes("got 0")),
          `${key}: ${lines.join(" | ")}`)
      }
    }))

  it.effect("a hard limit below its warning is refused, naming the rule", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* problems({ warn_threshold: 5, hard_limit: 4 }), [
        "loop_detection: hard_limit must be >= warn_threshold"
      ])
      assert.deepStrictEqual(yield* problems({ tool_freq_warn: 5, tool_freq_hard_limit: 4 }), [
        "loop_detection: tool_freq_hard_limit must be >= tool_freq_warn"
      ])
    }))

  it.effect("an override with a zero warning, or a hard limit below it, is refused, naming the tool", () =>
    Effect.gen(function*() {
      const zero = yield* problems({ tool_freq_overrides: { bash: { warn: 0, hard_limit: 10 } } })
      assert.isTrue(zero.some((line) => line.startsWith("loop_detection.tool_freq_overrides.bash.warn: ")),
        zero.join(" | "))
      assert.deepStrictEqual(yield* problems({ tool_freq_overrides: { bash: { warn: 100, hard_limit: 50 } } }), [
        "loop_detection.tool_freq_overrides.bash: hard_limit must be >= warn"
      ])
    }))
})

describe("token_usage", () => {
  it.effect("left out, TokenUsage is on; `enabled: false` leaves it out of the chain", () =>
    Effect.gen(function*() {
      const config = yield* load({})
      assert.isTrue(config.token_usage.enabled)
      assert.include(Chain.names(Chains.chain({ config })), "TokenUsage")
      const off = yield* load({ token_usage: { enabled: false } })
      assert.notInclude(Chain.names(Chains.chain({ config: off })), "TokenUsage")
    }))
})
