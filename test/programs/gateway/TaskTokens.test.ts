/**
 * A task's tokens through HTTP: the stored run a client reads (`GET /api/threads/{id}/runs/{run_id}`) and the
 * thread's `token-usage` count the tasks of the run's last step, whether the run ends before its next model call
 * (stopped at its recursion limit, cancelled) or goes on (then counted once), as DeerFlow's task tool reports each
 * task's usage to the run's journal when the task ends. Every call is booked under the model the provider named.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = as(() => gateway)

const PROVIDER_MODEL = "doubao-seed-1-6-250615"
const task = { name: "task", arguments: { description: "look", prompt: "look", subagent_type: "general-purpose" } }
const lead = { prompt_tokens: 10, completion_tokens: 5 }
const sub = { prompt_tokens: 100, completion_tokens: 20 }

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  if (text.includes("general-purpose subagent")) return { content: "looked", usage: sub }
  if (body.messages.at(-1)?.role !== "tool") return { toolCalls: [task], usage: lead }
  // the lead after its task: a thread that is cancelled never hears back
  return text.includes("hang") ? { hang: true } : { content: "done", usage: lead }
}

beforeAll(async () => {
  gateway = await Support.start({ script, server: { model: PROVIDER_MODEL } })
})
afterAll(() => gateway?.stop())

const start = async (thread: string, config: Record<string, unknown> = {}) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: thread })).status, 200)
  const run = await api("POST", `/api/threads/${thread}/runs`, {
    input: { messages: [{ type: "human", content: `${thread} go` }] },
    context: { subagent_enabled: true },
    config
  })
  assert.strictEqual(run.status, 200, run.text)
  return run.json().run_id as string
}

const stored = async (thread: string, runId: string) => (await api("GET", `/api/threads/${thread}/runs/${runId}`)).json()

const counts = (run: any) => ({
  total_tokens: run.total_tokens,
  lead_agent_tokens: run.lead_agent_tokens,
  subagent_tokens: run.subagent_tokens,
  middleware_tokens: run.middleware_tokens
})

describe("a task's tokens in its run's stored counts", () => {
  it("a run stopped at its recursion limit after its task's step counts the task", async () => {
    const runId = await start("limit", { recursion_limit: 1 })
    await api("GET", `/api/threads/limit/runs/${runId}/join`)
    const run = await stored("limit", runId)
    assert.strictEqual(run.stop_reason, "recursion_limit")
    assert.deepStrictEqual(counts(run), { total_tokens: 135, lead_agent_tokens: 15, subagent_tokens: 120, middleware_tokens: 0 })
    const usage = (await api("GET", "/api/threads/limit/token-usage")).json()
    assert.strictEqual(usage.total_tokens, 135)
    assert.strictEqual(usage.by_caller.subagent, 120)
    assert.deepStrictEqual(usage.by_model, { [PROVIDER_MODEL]: { tokens: 135, runs: 1 } })
  }, 20_000)

  it("a run cancelled while its model answers after the task counts the task", async () => {
    const runId = await start("hang")
    let events: Array<any> = []
    for (let i = 0; i < 100 && !events.some((e) => e.event_type === "subagent.end"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      events = (await api("GET", `/api/threads/hang/runs/${runId}/events?event_types=subagent.end`)).json()
    }
    assert.include(events.map((e) => e.event_type), "subagent.end")
    await api("POST", `/api/threads/hang/runs/${runId}/cancel?action=interrupt&wait=1`)
    const run = await stored("hang", runId)
    assert.strictEqual(run.status, "interrupted")
    assert.deepStrictEqual(counts(run), { total_tokens: 135, lead_agent_tokens: 15, subagent_tokens: 120, middleware_tokens: 0 })
  }, 20_000)

  it("a run that goes on to its next model call counts the task once", async () => {
    const runId = await start("onward")
    await api("GET", `/api/threads/onward/runs/${runId}/join`)
    const run = await stored("onward", runId)
    assert.strictEqual(run.status, "success")
    assert.deepStrictEqual(counts(run), { total_tokens: 150, lead_agent_tokens: 30, subagent_tokens: 120, middleware_tokens: 0 })
    const usage = (await api("GET", "/api/threads/onward/token-usage")).json()
    assert.deepStrictEqual(usage.by_caller, { lead_agent: 30, subagent: 120, middleware: 0 })
    assert.deepStrictEqual(usage.by_model, { [PROVIDER_MODEL]: { tokens: 150, runs: 1 } })
  }, 20_000)
})
