/**
 * Attack round 22 on a run's settings, as a user who varies them: the agent factory keeps one agent per shape of
 * the settings, for ever (until the configuration or skills change). `max_concurrent_subagents` and
 * `max_total_subagents` were in the shape as the run asked for them, any positive whole number, though the agent
 * clamps them (1-4, 1-50): a run for each of a million values built and kept a million agents. Now the shape holds
 * them clamped, as the agent enforces them and its prompt states them. Other parts of the shape come from the
 * settings too (a bootstrap's new agent name, any name): the factory keeps at most `MAX_KEPT_AGENTS`, the one used
 * longest ago given up (closed once no run holds it).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Factory from "../../src/programs/Factory.js"
import * as Shared from "../../src/programs/Shared.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const models = [Schema.decodeUnknownSync(ModelConfig)({ name: "fast", model: "gpt-fast" })]

const factoryOf = Effect.gen(function*() {
  const layer = Factory.layer({ models }).pipe(
    Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(() => "ok"))),
    Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
    Layer.provide(ConfigFile.layerFromObject({}, { home: tempDir("antler-attack22-factory-") })),
    Layer.provide(NodeFileSystem.layer)
  )
  return Context.get(yield* Layer.build(layer), Factory.AgentFactory)
})

describe("a run's subagent limits and the agents kept", () => {
  it.scoped("limits past the clamps resolve clamped and share one agent", () =>
    Effect.gen(function*() {
      const factory = yield* factoryOf
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

describe("the agents kept are bounded", () => {
  it.scoped("a bootstrap per new agent name: the agent used longest ago is rebuilt, the one in use kept", () =>
    Effect.gen(function*() {
      const factory = yield* factoryOf
      const bootstrap = (name: string) => factory.resolve({ is_bootstrap: true, agent_name: name })
      const first = yield* factory.agent(yield* bootstrap("agent-0"))
      const recent = yield* factory.agent(yield* bootstrap("agent-1"))
      for (let i = 2; i <= Factory.MAX_KEPT_AGENTS; i++) {
        yield* factory.agent(yield* bootstrap(`agent-${i}`))
        // (agent-1 used again each time: the one used longest ago is agent-0)
        assert.strictEqual(yield* factory.agent(yield* bootstrap("agent-1")), recent)
      }
      assert.notStrictEqual(yield* factory.agent(yield* bootstrap("agent-0")), first, "agent-0 was given up")
      assert.strictEqual(yield* factory.agent(yield* bootstrap("agent-1")), recent)
    }))

  it.effect("Shared.kept: past its bound the value used longest ago is retired, closed once its user releases it", () =>
    Effect.gen(function*() {
      const closed: Array<string> = []
      // (a value whose scope's closing is recorded)
      const made = (name: string) =>
        Effect.flatMap(Scope.make(), (scope) =>
          Effect.as(Scope.addFinalizer(scope, Effect.sync(() => closed.push(name))), {
            shared: Shared.make(name, scope)
          }))
      const kept = Shared.kept<string>(2)
      const values: Array<{ readonly shared: Shared.Shared<string> }> = []
      for (const name of ["a", "b", "c"]) values.push(yield* made(name))
      const [a, b, c] = values
      yield* kept.keep("a", a!.shared)
      yield* kept.keep("b", b!.shared)
      const held = kept.hold("a")!
      yield* kept.keep("c", c!.shared)
      assert.deepStrictEqual(closed, ["b"], "b, used longest ago, is retired and closed")
      assert.isUndefined(kept.hold("b"))
      assert.strictEqual(kept.hold("c"), c!.shared)
      yield* kept.keep("d", (yield* made("d")).shared)
      assert.deepStrictEqual(closed, ["b"], "a is retired, still held")
      assert.isUndefined(kept.hold("a"))
      yield* held.release
      assert.deepStrictEqual(closed, ["b", "a"])
    }))
})
