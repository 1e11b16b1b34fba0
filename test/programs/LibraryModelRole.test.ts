/**
 * Antler as a library with `authorization.enabled`: a `LeadAgent` used directly (not through the `Factory`) chooses
 * a run's model as the factory does (`AgentAuthorization.allowedModel`): the model a run names (`modelName`, or the
 * first configured one when it names none) when the run's role may use it, else the first configured model the role
 * may use, with a warning saying so; a role that may use none is refused, a `run_end` with status `error` naming
 * `No models are authorized for the current role.`, before any model call, the thread left as it was. The role is
 * the run's own (`extra.user_role`), else the one the agent is built for (`LeadAgent.Options.role`).
 * Before, only the factory checked: a library's agent for a `guest` ran on whatever model the run named.
 * Real parts: the real `openai` client against the scripted Chat Completions server on loopback.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import type { ChatRequestBody } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as AgentAuthorization from "../../src/programs/AgentAuthorization.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import { tempDir } from "../support/fixtures.js"
import { rbac } from "../support/rbac.js"

const authorization = rbac({ user: {}, guest: { models: { allow: ["small"] } }, mute: { models: { allow: false } } })

/** A library agent (built for `role`) over two models, "deep" (the first) and "small", of one scripted server. */
const agentFor = (role: string | undefined) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(() => "Hello from the model.")
    const model = (name: string) => ({
      name,
      model: `model-${name}`,
      base_url: server.url,
      api_key: "sk-test-library-000000"
    })
    const config = {
      models: [model("deep"), model("small")],
      title: { enabled: false },
      memory: { enabled: false },
      authorization
    }
    const layer = LeadAgent.layer({
      sandboxTools: false,
      systemPrompt: "You are a test agent.",
      ...(role !== undefined ? { role } : {})
    }).pipe(
      Layer.provideMerge(OpenAiModel.layerFromAppConfig()),
      Layer.provideMerge(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
      Layer.provideMerge(ConfigFile.layerFromObject(config, { home: tempDir("antler-library-model-") }))
    )
    const context = yield* Layer.build(layer)
    const agent = Context.get(context, LeadAgent.LeadAgent)
    const store = Context.get(context, ThreadStore)
    /** One turn: its events, and the models its requests went to. */
    const turn = (input: LeadAgent.TurnInput) =>
      Effect.gen(function*() {
        const before = server.requests.length
        const events: Array<RunEvent> = []
        const end = yield* agent.turn(input, (event) => events.push(event))
        const models = server.requests.slice(before).map((r: ChatRequestBody) => r.model)
        return { end, events, models }
      })
    return { agent, store, turn }
  })

const warnings = (events: ReadonlyArray<RunEvent>) =>
  events.flatMap((e) => e.type === "custom" && e.name === "warning" ? [(e.data as { message: string }).message] : [])

describe("a library's lead agent choosing a run's model for a role", () => {
  it.scopedLive("a model the agent's role may not use: the first it may, with a warning; one it may: as named", () =>
    Effect.gen(function*() {
      const { turn } = yield* agentFor("guest")
      const denied = yield* turn({ prompt: "hi", options: { modelName: "deep" } })
      assert.strictEqual(denied.end.status, "success")
      assert.deepStrictEqual(denied.models, ["model-small"])
      assert.deepStrictEqual(warnings(denied.events), [
        `The model "deep" is not available for your role; using "small".`
      ])
      assert.strictEqual(denied.events[0]!.type, "run_start")
      // no model named: the first configured ("deep"), which the role may not use either
      const unnamed = yield* turn({ prompt: "hi" })
      assert.deepStrictEqual(unnamed.models, ["model-small"])
      assert.strictEqual(warnings(unnamed.events).length, 1)
      const allowed = yield* turn({ prompt: "hi", options: { modelName: "small" } })
      assert.deepStrictEqual(allowed.models, ["model-small"])
      assert.deepStrictEqual(warnings(allowed.events), [])
    }))

  it.scopedLive("the run's own role (extra.user_role) decides over the agent's", () =>
    Effect.gen(function*() {
      const { turn } = yield* agentFor(undefined)
      const user = yield* turn({ prompt: "hi", options: { modelName: "deep", extra: { user_role: "user" } } })
      assert.deepStrictEqual(user.models, ["model-deep"])
      assert.deepStrictEqual(warnings(user.events), [])
      const guest = yield* turn({ prompt: "hi", options: { modelName: "deep", extra: { user_role: "guest" } } })
      assert.deepStrictEqual(guest.models, ["model-small"])
    }))

  it.scopedLive("a role that may use no model: refused before any model call, naming why; the thread as it was", () =>
    Effect.gen(function*() {
      const { store, turn } = yield* agentFor(undefined)
      const first = yield* turn({ prompt: "remember this", options: { extra: { user_role: "user" } } })
      assert.strictEqual(first.end.status, "success")
      const threadId = (first.events[0] as { thread_id: string }).thread_id
      const before = Option.getOrThrow(yield* store.load(threadId)).state.messages

      const refused = yield* turn({ threadId, prompt: "and this", options: { extra: { user_role: "mute" } } })
      assert.deepStrictEqual(refused.models, [])
      assert.strictEqual(refused.end.status, "error")
      assert.strictEqual(refused.end.error?.message, AgentAuthorization.NO_MODEL)
      assert.deepStrictEqual(refused.events.map((e) => e.type), ["run_start", "run_end"])
      assert.strictEqual((refused.events[0] as { thread_id: string }).thread_id, threadId)
      // the thread is readable and unchanged; it goes on for a role that may
      const after = Option.getOrThrow(yield* store.load(threadId)).state.messages
      assert.deepStrictEqual(after, before)
      const again = yield* turn({ threadId, prompt: "and this", options: { extra: { user_role: "user" } } })
      assert.strictEqual(again.end.status, "success")
    }))
})
