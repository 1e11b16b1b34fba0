/**
 * Attack round 22 on a run's settings, as a user who varies them: the agent factory keeps one agent per shape of
 * the settings, for ever (until the configuration or skills change). `max_concurrent_subagents` and
 * `max_total_subagents` were in the shape as the run asked for them, any positive whole number, though the agent
 * clamps them (1-4, 1-50): a run for each of a million values built and kept a million agents. Now the shape holds
 * them clamped, as the agent enforces them and its prompt states them.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Factory from "../../src/programs/Factory.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const models = [Schema.decodeUnknownSync(ModelConfig)({ name: "fast", model: "gpt-fast" })]

describe("a run's subagent limits and the agents kept", () => {
  it.scoped("limits past the clamps resolve clamped and share one agent", () =>
    Effect.gen(function*() {
      const layer = Factory.layer({ models }).pipe(
        Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(() => "ok"))),
        Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({}, { home: tempDir("antler-attack22-factory-") })),
        Layer.provide(NodeFileSystem.layer)
      )
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      const ask = (concurrent: number, total: number) =>
        factory.resolve({ subagent_enabled: true, max_concurrent_subagents: concurrent, max_total_subagents: total })
      const first = yield* ask(1000, 1_000_000)
      assert.deepStrictEqual(first.subagents, { enabled: true, maxConcurrent: 4, maxTotal: 50 })
      const agent = yield* factory.agent(first)
      for (const [concurrent, total] of [[5, 51], [77, 999_999], [4, 50]] as const) {
        assert.strictEqual(yield* factory.agent(yield* ask(concurrent, total)), agent, `${concurrent}, ${total}`)
      }
      // within the clamps, each value is its own agent, as before
      const two = yield* ask(2, 7)
      assert.deepStrictEqual(two.subagents, { enabled: true, maxConcurrent: 2, maxTotal: 7 })
      assert.notStrictEqual(yield* factory.agent(two), agent)
    }))
})
