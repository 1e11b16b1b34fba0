/**
 * The lead agent factory: the runtime merge, model resolution (an unknown model is a warning, not a silent
 * fallback), thinking and effort per model, a bad setting refused readably, and agents built once per shape.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as CustomAgents from "../../src/programs/CustomAgents.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Factory from "../../src/programs/Factory.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const model = (fields: Record<string, unknown>) => Schema.decodeUnknownSync(ModelConfig)(fields)
const models = [
  model({ name: "fast", model: "gpt-fast" }),
  model({ name: "deep", model: "gpt-deep", supports_thinking: true, supports_reasoning_effort: true }),
  model({ name: "eyes", model: "gpt-eyes", supports_vision: true })
]

describe("Factory: settings", () => {
  it("context wins over configurable; internal keys are dropped", () => {
    const merged = Factory.mergeRuntime(
      { model_name: "fast", is_plan_mode: true, __pregel_internal: 1 },
      { model_name: "deep", __checkpoint_ns: "x" }
    )
    assert.deepStrictEqual(merged, { model_name: "deep", is_plan_mode: true })
  })

  it("a bad setting is refused with the key and the problem", () => {
    const bad = Factory.settingsOf({ agent_name: "../etc", max_concurrent_subagents: 0, is_plan_mode: "yes" })
    assert.isTrue(Either.isLeft(bad))
    const message = Either.isLeft(bad) ? bad.left.message : ""
    assert.include(message, "agent_name: agent names are letters, digits and '-'")
    assert.include(message, "max_concurrent_subagents")
    assert.include(message, "is_plan_mode")
  })

  it("an unknown model is a warning and the default is used; thinking and effort follow the model", () => {
    const unknown = Factory.resolve(models, { model_name: "gpt-9" })
    assert.strictEqual(unknown.modelName, "fast")
    assert.match(unknown.warnings[0]!, /No configured model is named "gpt-9"; using the default model "fast"/)
    const fast = Factory.resolve(models, { model: "fast", thinking_enabled: true, reasoning_effort: "high" })
    assert.isFalse(fast.thinkingEnabled)
    assert.isUndefined(fast.reasoningEffort)
    assert.lengthOf(fast.warnings, 2)
    const deep = Factory.resolve(models, { model_name: "deep", reasoning_effort: "high" })
    assert.deepStrictEqual([deep.thinkingEnabled, deep.reasoningEffort, deep.warnings], [true, "high", []])
    const quiet = Factory.resolve(models, { model_name: "deep", thinking_enabled: false })
    assert.isFalse(quiet.thinkingEnabled)
    const byAgent = Factory.resolve(models, {}, { model: "eyes" })
    assert.deepStrictEqual([byAgent.modelName, byAgent.vision], ["eyes", true])
  })
})

const factoryLayer = (seen: Array<ModelRequest>) =>
  Factory.layer({ models }).pipe(
    Layer.provide(Layer.succeed(ModelService, ScriptedModel.make((request) => (seen.push(request), "ok")))),
    Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
    Layer.provide(ConfigFile.layerFromObject({}, { home: tempDir("antler-factory-") })),
    Layer.provide(NodeFileSystem.layer)
  )

describe("Factory: the service", () => {
  it.scoped("runs go to the resolved model; a warning comes right after run_start; agents are kept per shape", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const factory = Context.get(yield* Layer.build(factoryLayer(seen)), Factory.AgentFactory)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(
        factory.run({ threadId: "t1", prompt: "hi", settings: { model_name: "gpt-9" } })
      ))
      assert.strictEqual(events[0]!.type, "run_start")
      assert.deepInclude(events[1]!, { type: "custom", name: "warning" })
      assert.strictEqual(events.at(-1)!.type, "run_end")
      assert.strictEqual(seen[0]!.settings.modelName, "fast")

      yield* Stream.runDrain(factory.run({ threadId: "t2", prompt: "hi", settings: { model: "deep" } }))
      assert.strictEqual(seen.at(-1)!.settings.modelName, "deep")
      assert.isTrue(seen.at(-1)!.settings.thinkingEnabled)

      const a = yield* factory.agent(Factory.resolve(models, { model_name: "fast" }))
      const b = yield* factory.agent(Factory.resolve(models, { model_name: "deep" }))
      const c = yield* factory.agent(Factory.resolve(models, { model_name: "eyes" }))
      assert.strictEqual(a, b, "same shape, same agent")
      assert.notStrictEqual(a, c, "vision changes the tools")
      assert.include(c.tools.map((t) => t.name), "view_image")
      assert.notInclude(a.tools.map((t) => t.name), "view_image")
    }))

  it.scoped("a custom agent's tool groups filter its tools (an agent of its own); left-out tools are warned per run", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const layer = Factory.layer({ models }).pipe(
        Layer.provide(Layer.succeed(ModelService, ScriptedModel.make((request) => (seen.push(request), "ok")))),
        Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({
          tools: [
            { name: "read_file", group: "file:read", use: "deerflow.sandbox.tools:read_file_tool" },
            { name: "bash", group: "bash", use: "deerflow.sandbox.tools:bash_tool" },
            { name: "web_capture", group: "web", use: "deerflow.community.browserless.tools:web_capture_tool" }
          ]
        }, { home: tempDir("antler-factory-groups-") })),
        Layer.provide(NodeFileSystem.layer)
      )
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      const all = Factory.resolve(models, {})
      const reader = Factory.resolve(models, {}, { toolGroups: ["file:read"] })
      assert.deepStrictEqual(reader.toolGroups, ["file:read"])
      assert.notStrictEqual(Factory.shapeKey(all), Factory.shapeKey(reader))
      const names = (yield* factory.agent(reader)).tools.map((t) => t.name)
      assert.include(names, "read_file")
      assert.notInclude(names, "bash")
      assert.include((yield* factory.agent(all)).tools.map((t) => t.name), "bash")
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(factory.run({ threadId: "t9", prompt: "hi" })))
      const warnings = events.flatMap((e) => (e.type === "custom" && e.name === "warning" ? [(e.data as any).message] : []))
      assert.deepStrictEqual(warnings, ["tools[2] (web_capture): left out: Antler has no browser tools"])
      assert.deepStrictEqual(seen[0]!.tools.map((t) => t.name).slice(0, 2), ["read_file", "bash"])
    }))

  it.scoped("plan mode changes the agent's shape: the Todo middleware and write_todos exist only there", () =>
    Effect.gen(function*() {
      const factory = Context.get(yield* Layer.build(factoryLayer([])), Factory.AgentFactory)
      const plain = yield* factory.agent(Factory.resolve(models, { model_name: "fast" }))
      const planned = yield* factory.agent(Factory.resolve(models, { model_name: "fast", is_plan_mode: true }))
      assert.notStrictEqual(plain, planned)
      assert.notInclude(plain.order, "Todo")
      assert.notInclude(plain.tools.map((t) => t.name), "write_todos")
      assert.include(planned.tools.map((t) => t.name), "write_todos")
      // at its slot: inside DurableContext (and Summarization, off here), outside TokenUsage
      const at = planned.order.indexOf("Todo")
      assert.strictEqual(planned.order[at - 1], "DurableContext")
      assert.strictEqual(planned.order[at + 1], "TokenUsage")
      // the prompt itself is the same: plan mode's guidance is added to every request of the planned agent
      assert.strictEqual(planned.systemPrompt, plain.systemPrompt)
    }))

  it.scoped("subagents and custom agents: agents of their own, the limits and the agent's files in the prompt", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-factory-agents-")
      const layer = Factory.layer({ models }).pipe(
        Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(() => "ok"))),
        Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({ subagents: { max_total_per_run: 4 } }, { home })),
        Layer.provide(NodeFileSystem.layer)
      )
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      const plain = yield* factory.agent(yield* factory.resolve({}))
      assert.notInclude(plain.tools.map((t) => t.name), "task")

      // subagents: the task tool, SubagentLimit, and the prompt stating the limits it enforces
      const delegating = yield* factory.resolve({ subagent_enabled: true, max_concurrent_subagents: 2 })
      assert.deepStrictEqual(delegating.subagents, { enabled: true, maxConcurrent: 2, maxTotal: 4 })
      const withTask = yield* factory.agent(delegating)
      assert.notStrictEqual(withTask, plain)
      assert.include(withTask.tools.map((t) => t.name), "task")
      assert.include(withTask.order, "SubagentLimit")
      assert.include(withTask.systemPrompt, "MAXIMUM 2 `task` CALLS PER RESPONSE")
      assert.include(withTask.systemPrompt, "MAXIMUM 4 `task` CALLS PER RUN")
      assert.include(withTask.systemPrompt, "- **general-purpose**: ")

      // a custom agent: its model, tool groups, skills and SOUL from its files; update_agent; no group-less bash
      yield* CustomAgents.save(home, "default", "ada", {
        config: { description: "Ada", model: "deep", tool_groups: ["file:read"], skills: [] },
        soul: "I am Ada."
      })
      const ada = yield* factory.resolve({ agent_name: "ada" })
      assert.deepStrictEqual([ada.modelName, ada.agentName, ada.toolGroups], ["deep", "ada", ["file:read"]])
      const adaAgent = yield* factory.agent(ada)
      const names = adaAgent.tools.map((t) => t.name)
      assert.includeMembers(names, ["read_file", "update_agent"])
      assert.notInclude(names, "bash")
      assert.include(adaAgent.systemPrompt, "You are ada,")
      assert.include(adaAgent.systemPrompt, "<soul>\nI am Ada.\n</soul>")
      assert.include(adaAgent.systemPrompt, "<self_update>")
      // what update_agent (or anyone) changes in its files is the next run's agent
      yield* CustomAgents.save(home, "default", "ada", {
        config: { description: "Ada", model: "deep", tool_groups: ["file:read"], skills: [] },
        soul: "I am Ada, shorter."
      })
      const changed = yield* factory.agent(yield* factory.resolve({ agent_name: "ada" }))
      assert.include(changed.systemPrompt, "I am Ada, shorter.")
      // a name with no agent behind it is a settings error naming it
      const missing = yield* Effect.flip(factory.resolve({ agent_name: "nobody" }))
      assert.match(missing.message, /^agent_name: .*nobody/)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("settings that do not decode end the run at once, readably", () =>
    Effect.gen(function*() {
      const factory = Context.get(yield* Layer.build(factoryLayer([])), Factory.AgentFactory)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(
        factory.run({ threadId: "t3", prompt: "hi", settings: { agent_name: "no/slashes" } })
      ))
      assert.deepStrictEqual(events.map((e) => e.type), ["run_start", "run_end"])
      const end = events[1]!
      assert.strictEqual(end.type === "run_end" && end.error?.name, "SettingsError")
    }))
})

describe("Factory: DeerFlow's factory details (SPEC §3.2)", () => {
  it.scoped("no configured model: every run ends at once with DeerFlow's error, no model is called", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const layer = Factory.layer({ models: [] }).pipe(
        Layer.provide(Layer.succeed(ModelService, ScriptedModel.make((request) => (seen.push(request), "ok")))),
        Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({}, { home: tempDir("antler-factory-none-") })),
        Layer.provide(NodeFileSystem.layer)
      )
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      const refused = yield* Effect.flip(factory.resolve({ model_name: "anything" }))
      assert.strictEqual(refused._tag, "NoModelsError")
      assert.strictEqual(
        refused.message,
        "No chat models are configured. Please configure at least one model in config.yaml."
      )
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(factory.run({ threadId: "t0", prompt: "hi" })))
      assert.deepStrictEqual(events.map((e) => e.type), ["run_start", "run_end"])
      const end = events[1]!
      assert.deepStrictEqual(end.type === "run_end" ? end.error : undefined, {
        name: "NoModelsError",
        message: "No chat models are configured. Please configure at least one model in config.yaml."
      })
      assert.lengthOf(seen, 0)
    }))

  it("thinking and effort: the request (even false), else the agent's default, else on / none", () => {
    const agent = { thinkingEnabled: false, reasoningEffort: "low" }
    const byAgent = Factory.resolve(models, { model_name: "deep" }, agent)
    assert.deepStrictEqual([byAgent.thinkingEnabled, byAgent.reasoningEffort], [false, "low"])
    const byRequest = Factory.resolve(models, { model_name: "deep", thinking_enabled: true, reasoning_effort: "high" }, agent)
    assert.deepStrictEqual([byRequest.thinkingEnabled, byRequest.reasoningEffort], [true, "high"])
    const offByRequest = Factory.resolve(models, { model_name: "deep", thinking_enabled: false }, { thinkingEnabled: true })
    assert.isFalse(offByRequest.thinkingEnabled)
    const byDefault = Factory.resolve(models, { model_name: "deep" }, {})
    assert.deepStrictEqual([byDefault.thinkingEnabled, byDefault.reasoningEffort], [true, undefined])
  })

  it.scoped("a custom agent's model settings, thinking and effort reach the model's request; the run's own win", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const home = tempDir("antler-factory-settings-")
      const app = yield* ConfigFile.fromObject({
        models: [{
          name: "deep",
          model: "deep-model",
          base_url: server.url,
          api_key: "sk-test-settings",
          supports_thinking: true,
          supports_reasoning_effort: true,
          temperature: 1,
          max_tokens: 1000,
          when_thinking_enabled: { extra_body: { thinking: { type: "enabled" } } }
        }],
        title: { enabled: false },
        memory: { enabled: false }
      }, { home })
      yield* CustomAgents.save(home, "default", "tuned", {
        config: {
          description: "Tuned",
          model_settings: { temperature: 0.3, max_tokens: 321 },
          thinking_enabled: false,
          reasoning_effort: "low"
        },
        soul: "Tuned."
      })
      const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
      const factory = Context.get(
        yield* Layer.build(App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer))),
        Factory.AgentFactory
      )
      yield* Stream.runDrain(factory.run({ threadId: "a1", prompt: "first", settings: { agent_name: "tuned" } }))
      const first = server.requests.at(-1) as any
      assert.deepStrictEqual(
        [first.model, first.temperature, first.max_tokens, first.reasoning_effort, first.thinking],
        ["deep-model", 0.3, 321, "low", { type: "disabled" }]
      )
      yield* Stream.runDrain(factory.run({
        threadId: "a2",
        prompt: "second",
        settings: { agent_name: "tuned", thinking_enabled: true, reasoning_effort: "high" }
      }))
      const second = server.requests.at(-1) as any
      assert.deepStrictEqual(
        [second.temperature, second.max_tokens, second.reasoning_effort, second.thinking],
        [0.3, 321, "high", { type: "enabled" }]
      )
      // the default agent keeps the model's own settings
      yield* Stream.runDrain(factory.run({ threadId: "a3", prompt: "third" }))
      const plain = server.requests.at(-1) as any
      assert.deepStrictEqual([plain.temperature, plain.max_tokens, plain.thinking], [1, 1000, { type: "enabled" }])
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
