/**
 * What a goal's run streams and counts, as DeerFlow's worker does (runs/worker.py `_persist_goal_evaluation`,
 * `_stream_once`; runtime/goal.py `evaluate_goal_completion`): each change the evaluator makes to the goal is a step
 * of its own (a `values` snapshot with the goal, and an `updates` entry under `goal_evaluator` holding the goal
 * only), and the continuation turn after it starts a step of its own, as a turn's input does; the evaluator's model
 * call is outside the run's graph (no callback of the run's journal sees it), so its tokens are none of the run's or
 * the thread's usage.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Projection from "../../../src/programs/gateway/Projection.js"
import type { RunEvent } from "../../../src/services/RunEvents.js"
import * as M from "../../../src/state/Message.js"
import * as TS from "../../../src/state/ThreadState.js"
import { continuations, isEvaluator, verdict } from "../../support/goalScript.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"


// each agent call spends 15 tokens; each evaluator call far more, so that counting it would show
const AGENT_USAGE = { prompt_tokens: 10, completion_tokens: 5 }
const EVALUATOR_USAGE = { prompt_tokens: 1000, completion_tokens: 100 }

let gateway: TestGateway
let evaluated = 0
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body): Turn =>
      isEvaluator(body)
        // not met after the user's turn, met after the continuation
        ? { content: verdict(++evaluated >= 2), usage: EVALUATOR_USAGE }
        : { content: `Step ${continuations(body) + 1} done.`, usage: AGENT_USAGE }
  })
})
afterAll(() => gateway?.stop())

const isContinuation = (m: any) => m?.additional_kwargs?.deerflow_goal_continuation === true

describe("a goal's run", () => {
  let events: ReadonlyArray<{ event: string; data: any }> = []
  let runId = ""

  beforeAll(async () => {
    assert.strictEqual((await api("POST", "/api/threads", { thread_id: "goal-steps" })).status, 200)
    assert.strictEqual((await api("PUT", "/api/threads/goal-steps/goal", { objective: "Finish it" })).status, 200)
    const response = await fetch(`${gateway.url}/api/threads/goal-steps/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input: { messages: [{ type: "human", content: "Start it" }] },
        stream_mode: ["values", "updates"]
      })
    })
    assert.strictEqual(response.status, 200)
    const read = await Support.readSse(response, (event) => {
      if (event.event === "metadata") runId = (event.data as any).run_id
      return false
    })
    events = read.events as ReadonlyArray<{ event: string; data: any }>
    assert.strictEqual(evaluated, 2)
    assert.strictEqual(events.at(-1)?.event, "end")
  })

  it("streams each change of the goal as a step of its own, apart from the continuation turn", () => {
    const updates = events.filter((e) => e.event === "updates").map((e) => e.data)
    // the evaluator's entries hold the goal only: the continuation counted, then the goal met (none)
    const judged = updates.filter((u) => "goal_evaluator" in u).map((u) => u.goal_evaluator)
    assert.deepStrictEqual(judged.map((u) => Object.keys(u)), [["goal"], ["goal"]])
    assert.strictEqual(judged[0].goal.continuation_count, 1)
    assert.isNull(judged[1].goal)
    // no entry of a turn carries the goal; the continuation message is in an entry of its own turn
    const others = updates.flatMap((u) => Object.entries(u)).filter(([node]) => node !== "goal_evaluator")
    assert.isFalse(others.some(([, value]: [string, any]) => value?.goal !== undefined), JSON.stringify(updates))
    assert.isTrue(others.some(([, value]: [string, any]) => (value?.messages ?? []).some(isContinuation)))

    // the values: the goal with its continuation counted, before the continuation turn's first step
    const values = events.filter((e) => e.event === "values").map((e) => e.data)
    const counted = values.findIndex((v) => v.goal?.continuation_count === 1)
    assert.isAtLeast(counted, 0)
    assert.isFalse(values[counted].messages.some(isContinuation))
    assert.isTrue(values.slice(counted + 1).some((v) => v.messages.some(isContinuation)))
  })

  it("counts the agent's tokens, not the evaluator's, in the run's and the thread's usage", async () => {
    const usage = (await api("GET", "/api/threads/goal-steps/token-usage")).json()
    // two agent calls (the user's turn, the continuation) of 15 tokens each; the two evaluations not counted
    assert.strictEqual(usage.total_tokens, 30)
    assert.deepStrictEqual(usage.by_caller, { lead_agent: 30, subagent: 0, middleware: 0 })
    const run = (await api("GET", `/api/threads/goal-steps/runs/${runId}`)).json()
    assert.strictEqual(run.total_tokens, 30)
    assert.strictEqual(run.llm_call_count, 2)
  })
})

describe("the projection of a goal's change", () => {
  it("is a step of its own even when the turns' events around it arrive with it", () => {
    // what a run's listener may hand the projector at once: the turn's answer, the evaluator's write (the evaluator
    // judged without a model call, or the runtime did not yield) and the continuation turn's input
    const goal: TS.GoalState = {
      objective: "Finish it",
      status: "active",
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-01-01T00:00:00.000Z",
      continuation_count: 1,
      max_continuations: 8,
      no_progress_count: 0,
      max_no_progress_continuations: 2
    }
    const continuation = M.human("<goal_continuation>\nActive goal: Finish it\n</goal_continuation>", {
      id: "cont",
      additional_kwargs: { hide_from_ui: true, deerflow_goal_continuation: true }
    })
    const batch: ReadonlyArray<RunEvent> = [
      { type: "message", message: M.ai("Step 1 done.", { id: "a1" }) },
      { type: "state", update: { goal } },
      { type: "message", message: continuation }
    ]
    const projector = Projection.makeProjector({
      runId: "r",
      threadId: "t",
      modes: ["values", "updates"],
      initial: TS.empty
    })
    const out = projector.push(batch).map((o) => ({ event: o.event, data: JSON.parse(JSON.stringify(o.data)) }))
    const updates = out.filter((o) => o.event === "updates").map((o) => o.data)
    assert.deepStrictEqual(updates.map((u) => Object.keys(u)[0]), ["model", "goal_evaluator", "agent"])
    assert.deepStrictEqual(updates[1], { goal_evaluator: { goal } })
    assert.deepStrictEqual(Object.keys(updates[2].agent), ["messages"])
    // three snapshots: the answer's, the goal's (the continuation not in it yet), the continuation's
    const values = out.filter((o) => o.event === "values").map((o) => o.data)
    assert.strictEqual(values.length, 3)
    assert.deepStrictEqual(values[1].goal, goal)
    assert.deepStrictEqual(values[1].messages.map((m: any) => m.id), ["a1"])
    assert.deepStrictEqual(values[2].messages.map((m: any) => m.id), ["a1", "cont"])
  })
})
