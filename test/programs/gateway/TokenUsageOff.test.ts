/**
 * `token_usage.enabled: false` through HTTP: DeerFlow builds no TokenUsageMiddleware then (no step attribution on
 * the messages), but its run journal still records every call's usage (`run_events.track_token_usage`, on by
 * default), so the stored run and the thread's `token-usage` count the lead's calls and its tasks.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = as(() => gateway)

const task = { name: "task", arguments: { description: "look", prompt: "look", subagent_type: "general-purpose" } }
const lead = { prompt_tokens: 10, completion_tokens: 5 }

const script = (body: ChatRequestBody): Turn => {
  if (JSON.stringify(body.messages).includes("general-purpose subagent")) {
    return { content: "looked", usage: { prompt_tokens: 100, completion_tokens: 20 } }
  }
  return body.messages.at(-1)?.role === "tool" ? { content: "done", usage: lead } : { toolCalls: [task], usage: lead }
}

beforeAll(async () => {
  gateway = await Support.start({ script, config: { token_usage: { enabled: false } } })
})
afterAll(() => gateway?.stop())

describe("token_usage.enabled: false", () => {
  it("the run's calls and its task are still counted in its stored run and the thread's token usage", async () => {
    assert.strictEqual((await api("POST", "/api/threads", { thread_id: "off" })).status, 200)
    const started = await api("POST", "/api/threads/off/runs", {
      input: { messages: [{ type: "human", content: "go" }] },
      context: { subagent_enabled: true }
    })
    assert.strictEqual(started.status, 200, started.text)
    const runId = started.json().run_id
    await api("GET", `/api/threads/off/runs/${runId}/join`)
    const run = (await api("GET", `/api/threads/off/runs/${runId}`)).json()
    assert.strictEqual(run.status, "success")
    assert.deepInclude(run, {
      total_input_tokens: 120,
      total_output_tokens: 30,
      total_tokens: 150,
      llm_call_count: 2,
      lead_agent_tokens: 30,
      subagent_tokens: 120,
      middleware_tokens: 0
    })
    const usage = (await api("GET", "/api/threads/off/token-usage")).json()
    assert.strictEqual(usage.total_tokens, 150)
    assert.deepStrictEqual(usage.by_caller, { lead_agent: 30, subagent: 120, middleware: 0 })
    assert.deepStrictEqual(usage.by_model, { scripted: { tokens: 150, runs: 1 } })
    // no TokenUsageMiddleware: the answers carry no step attribution
    const state = (await api("GET", "/api/threads/off/state")).json()
    const answers = state.values.messages.filter((m: any) => m.type === "ai")
    assert.lengthOf(answers, 2)
    for (const answer of answers) assert.notProperty(answer.additional_kwargs ?? {}, "token_usage_attribution")
  }, 20_000)
})
