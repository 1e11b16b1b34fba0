/**
 * DeerFlow's run journal (`test_run_journal.py`) counts a model call's usage when the call ends (`on_llm_end`): a
 * run cancelled while its model answers keeps, in its stored run, the tokens of the calls that ended, and the call
 * it cut counts nothing (LangChain reports no usage for it; an OpenAI-compatible stream says its usage in its last
 * chunk). Through HTTP, with a scripted model whose second answer never finishes.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { until } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = as(() => gateway)

const look = { name: "ls", arguments: { description: "look", path: "/mnt/user-data/workspace" } }

const script = (body: ChatRequestBody): Turn =>
  body.messages.at(-1)?.role === "tool"
    ? { content: "Still working on the answer", stall: true, usage: { prompt_tokens: 40, completion_tokens: 7 } }
    : { toolCalls: [look], usage: { prompt_tokens: 10, completion_tokens: 5 } }

beforeAll(async () => {
  gateway = await Support.start({ script })
})
afterAll(() => gateway?.stop())

describe("DeerFlow test_run_journal: a call's usage counts when the call ends", () => {
  it("a run cancelled mid-answer keeps the tokens of its ended call; the call it cut counts nothing", async () => {
    assert.strictEqual((await api("POST", "/api/threads", { thread_id: "cut" })).status, 200)
    const input = { messages: [{ type: "human", content: "go" }] }
    const started = await api("POST", "/api/threads/cut/runs", { input })
    assert.strictEqual(started.status, 200, started.text)
    const runId = started.json().run_id
    await until(async () => gateway.scripted.requests.length >= 2, "the second model call under way")
    const cancelled = await api("POST", `/api/threads/cut/runs/${runId}/cancel?wait=true`)
    assert.isBelow(cancelled.status, 300, cancelled.text)
    const run = (await api("GET", `/api/threads/cut/runs/${runId}`)).json()
    assert.notStrictEqual(run.status, "success")
    assert.deepInclude(run, {
      total_input_tokens: 10,
      total_output_tokens: 5,
      total_tokens: 15,
      llm_call_count: 1,
      lead_agent_tokens: 15
    })
    const usage = (await api("GET", "/api/threads/cut/token-usage")).json()
    assert.deepInclude(usage, { total_tokens: 15, total_runs: 1 })
    // only the ended call's answer carries usage (a kept partial answer has none)
    const state = (await api("GET", "/api/threads/cut/state")).json()
    const spent = state.values.messages.filter((m: any) => m.type === "ai" && m.usage_metadata != null)
    assert.deepStrictEqual(spent.map((m: any) => m.usage_metadata.total_tokens), [15])
  }, 20_000)
})
