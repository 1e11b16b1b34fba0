/**
 * Antler as a library with `authorization.enabled`: when a `LeadAgent` run's role may not use the model the run
 * names, the substitute takes the run's thinking settings as its own configuration allows them, as the factory
 * (and DeerFlow's lead agent) does: thinking asked for a model that supports it is off on one that does not (its
 * `when_thinking_disabled` sent), and a `reasoning_effort` goes only to a model that `supports_reasoning_effort`.
 * Before, the substitute kept the settings meant for the other model: thinking on, so nothing of its own switch-off
 * was sent. Real parts: the real `openai` client against the scripted Chat Completions server on loopback.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import { tempDir } from "../support/fixtures.js"

const authorization = {
  enabled: true,
  provider: {
    use: "deerflow.authz.rbac:RbacAuthorizationProvider",
    config: { roles: { user: {}, guest: { models: { allow: ["small", "effort"] } } } }
  }
}

/** A library agent over "deep" (thinks), "small" (does not) and "effort" (thinks, takes a reasoning effort). */
const agentFor = (role: string, models: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(() => "Hello from the model.")
    const base = (name: string) => ({ name, model: `model-${name}`, base_url: server.url, api_key: "sk-test-lib-0000" })
    const all: Record<string, Record<string, unknown>> = {
      deep: {
        ...base("deep"),
        supports_thinking: true,
        supports_reasoning_effort: true,
        when_thinking_enabled: { extra_body: { thinking: { type: "enabled" } } }
      },
      small: {
        ...base("small"),
        supports_thinking: false,
        when_thinking_disabled: { extra_body: { thinking: { type: "disabled" } } }
      },
      effort: {
        ...base("effort"),
        supports_thinking: true,
        supports_reasoning_effort: false,
        when_thinking_enabled: { extra_body: { thinking: { type: "enabled" } } }
      }
    }
    const config = {
      models: models.map((name) => all[name]),
      title: { enabled: false },
      memory: { enabled: false },
      authorization
    }
    const layer = LeadAgent.layer({ sandboxTools: false, systemPrompt: "You are a test agent.", role }).pipe(
      Layer.provideMerge(OpenAiModel.layerFromAppConfig()),
      Layer.provideMerge(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
      Layer.provideMerge(ConfigFile.layerFromObject(config, { home: tempDir("antler-library-thinking-") }))
    )
    const agent = Context.get(yield* Layer.build(layer), LeadAgent.LeadAgent)
    /** One turn: the bodies of its model requests. */
    const turn = (input: LeadAgent.TurnInput) =>
      Effect.gen(function*() {
        const before = server.requests.length
        const end = yield* agent.turn(input)
        assert.strictEqual(end.status, "success")
        return server.requests.slice(before) as ReadonlyArray<Record<string, any>>
      })
    return { turn }
  })

describe("a library run's thinking settings on the model its role substitutes", () => {
  it.scopedLive("thinking asked for 'deep' is off on 'small', which does not think: its switch-off is sent", () =>
    Effect.gen(function*() {
      const { turn } = yield* agentFor("guest", ["deep", "small"])
      const sent = yield* turn({ prompt: "hi", options: { modelName: "deep", thinkingEnabled: true } })
      assert.isAbove(sent.length, 0)
      for (const body of sent) {
        assert.strictEqual(body.model, "model-small")
        assert.deepStrictEqual(body.thinking, { type: "disabled" })
        assert.isUndefined(body.reasoning_effort)
      }
      // (the user's role, which may use "deep": its thinking as asked)
      const own = yield* turn({
        prompt: "hi",
        options: { modelName: "deep", thinkingEnabled: true, reasoningEffort: "high", extra: { user_role: "user" } }
      })
      assert.strictEqual(own[0]!.model, "model-deep")
      assert.deepStrictEqual(own[0]!.thinking, { type: "enabled" })
      assert.strictEqual(own[0]!.reasoning_effort, "high")
    }))

  it.scopedLive("a substitute that thinks keeps thinking on, without a reasoning effort it does not take", () =>
    Effect.gen(function*() {
      const { turn } = yield* agentFor("guest", ["deep", "effort"])
      const sent = yield* turn({
        prompt: "hi",
        options: { modelName: "deep", thinkingEnabled: true, reasoningEffort: "high" }
      })
      assert.strictEqual(sent[0]!.model, "model-effort")
      assert.deepStrictEqual(sent[0]!.thinking, { type: "enabled" })
      assert.isUndefined(sent[0]!.reasoning_effort)
    }))
})
