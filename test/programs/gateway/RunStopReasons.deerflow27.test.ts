/**
 * DeerFlow's test_loop_detection_stop_reason.py, through HTTP: a run a guard capped still succeeds, and the stored
 * run a client reads (`GET /api/threads/{id}/runs/{run_id}`) keeps the guard's stop reason, as DeerFlow's worker
 * persists what the middleware wrote into the run's context. Each thread's message names the guard its model runs
 * into (`guard:loop`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = as(() => gateway)

const ls = { name: "ls", arguments: { description: "list", path: "/mnt/user-data" } }
const task = { name: "task", arguments: { description: "look", prompt: "look", subagent_type: "general-purpose" } }

// (little usage on every answer but the token thread's, so the budget stops that thread alone)
const few = { prompt_tokens: 10, completion_tokens: 5 }

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  if (text.includes("general-purpose subagent")) return { content: "looked", usage: few }
  const guard = /guard:([a-z]+)/.exec(text)?.[1]
  switch (guard) {
    case "loop":
      return { toolCalls: [ls], usage: few }
    case "token":
      return { content: "A long draft.", usage: { prompt_tokens: 5000, completion_tokens: 10 } }
    case "safety":
      return { content: "I can't do that.", finishReason: "content_filter", toolCalls: [ls], usage: few }
    case "length":
      return { content: "# partial", finishReason: "length", usage: few }
    case "subagent":
      return { toolCalls: [task], usage: few }
    default:
      return { content: "ok", usage: few }
  }
}

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: {
      loop_detection: { warn_threshold: 1, hard_limit: 3, window_size: 5 },
      token_budget: { enabled: true, max_tokens: 1000 },
      subagents: { max_total_per_run: 1 }
    }
  })
})
afterAll(() => gateway?.stop())

const storedRun = async (guard: string) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: guard })).status, 200)
  const run = await api("POST", `/api/threads/${guard}/runs`, {
    input: { messages: [{ type: "human", content: `guard:${guard} go` }] },
    context: { subagent_enabled: true }
  })
  assert.strictEqual(run.status, 200, run.text)
  const runId = run.json().run_id
  await api("GET", `/api/threads/${guard}/runs/${runId}/join`)
  const stored = (await api("GET", `/api/threads/${guard}/runs/${runId}`)).json()
  return [stored.status, stored.stop_reason]
}

describe("test_loop_detection_stop_reason.py: the stored run keeps the guard's stop reason", () => {
  // test_worker_surfaces_stop_reason_from_loop_detection
  it("loop detection: success, loop_capped", async () => {
    assert.deepStrictEqual(await storedRun("loop"), ["success", "loop_capped"])
  })

  // test_worker_surfaces_stop_reason_from_token_budget
  it("token budget: success, token_capped", async () => {
    assert.deepStrictEqual(await storedRun("token"), ["success", "token_capped"])
  })

  // test_worker_surfaces_stop_reason_from_safety_finish_reason
  it("safety finish reason: success, safety_capped", async () => {
    assert.deepStrictEqual(await storedRun("safety"), ["success", "safety_capped"])
  })

  // test_worker_surfaces_stop_reason_from_model_length_finish_reason
  it("model length finish reason: success, model_length_capped", async () => {
    assert.deepStrictEqual(await storedRun("length"), ["success", "model_length_capped"])
  })

  // test_worker_surfaces_stop_reason_from_subagent_limit
  it("subagent limit: success, subagent_limit_capped", async () => {
    assert.deepStrictEqual(await storedRun("subagent"), ["success", "subagent_limit_capped"])
  })
})
