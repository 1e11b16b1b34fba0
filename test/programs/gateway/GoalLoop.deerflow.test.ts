/**
 * DeerFlow's goal loop through the gateway (its worker's `_prepare_goal_continuation_input`, test_goal_worker.py):
 * after a run's turn on a thread whose goal is active, the model is asked (a strict evaluator prompt, a JSON verdict)
 * whether the goal is met; met clears it, not met yet goes on in the same run with a hidden `<goal_continuation>`
 * turn streamed to the same client, up to the goal's caps, and anything else stands down with the reason recorded on
 * the goal. A verdict that is not one, or an evaluator that fails, leaves the run as its turn ended it; stopping the
 * run stops the loop. A thread without a goal asks no evaluator; a cap the user's turn hit stays the run's stop reason.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { continuations, isEvaluator, verdict } from "../../support/goalScript.js"
import { captureLogs } from "../../support/logs.js"
import { messageText } from "../../support/modelRequests.js"
import { until } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import type { SseEvent, TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = as(() => gateway)
const logs = captureLogs("Warning")


// the scenario a request is about: the `[key]` its thread's question (or goal) names
const keyOf = (body: ChatRequestBody) =>
  /\[([a-z-]+)\]/.exec(JSON.stringify(body.messages.filter((m) => m.role !== "system")))?.[1] ?? ""
const judged = new Map<string, number>()

const evaluatorTurn = (key: string, call: number): Turn => {
  switch (key) {
    case "met":
      // (a reasoning model's think block and a fenced answer, read as DeerFlow reads them)
      return call === 1
        ? verdict(false, "goal_not_met_yet")
        : "<think>the report is written</think>\n```json\n" + verdict(true, "none", "Done.") + "\n```"
    case "blocked":
      return verdict(false, "needs_user_input", "Waiting for the user to pick a city.")
    case "malformed":
      return "Looks good to me!"
    case "failing":
      return { status: 400, body: { error: { message: "bad request", type: "invalid_request_error" } } }
    case "hang-eval":
      return { hang: true }
    default:
      return verdict(false, "goal_not_met_yet")
  }
}

beforeAll(async () => {
  gateway = await Support.start({
    logger: logs.capture,
    script: (body): Turn => {
      const key = keyOf(body)
      if (isEvaluator(body)) {
        const call = (judged.get(key) ?? 0) + 1
        judged.set(key, call)
        return evaluatorTurn(key, call)
      }
      const n = continuations(body)
      if (key === "stuck") return "Still looking into it."
      if (key === "silent") return ""
      if (key === "cancel" && n > 0) return { content: "working on the next step", stall: true }
      return `Step ${n + 1} of ${key} done.`
    }
  })
})
afterAll(() => gateway?.stop())

const setGoal = async (threadId: string, objective: string, max?: number) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: threadId })).status, 200)
  const put = await api("PUT", `/api/threads/${threadId}/goal`, {
    objective,
    ...(max === undefined ? {} : { max_continuations: max })
  })
  assert.strictEqual(put.status, 200, put.text)
}

/** A streamed run of `question` on `threadId` (values, messages, updates), read to its end; `onEvent` sees each. */
const streamRun = async (threadId: string, question: string, onEvent?: (event: SseEvent, runId: string) => void) => {
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      input: { messages: [{ type: "human", content: question }] },
      stream_mode: ["values", "messages-tuple", "updates"]
    })
  })
  assert.strictEqual(response.status, 200)
  let runId = ""
  const { events } = await Support.readSse(response, (event) => {
    if (event.event === "metadata") runId = (event.data as any).run_id
    onEvent?.(event, runId)
    return false
  })
  return { runId, events }
}

const agentCalls = (key: string) => gateway.scripted.requests.filter((r) => !isEvaluator(r) && keyOf(r) === key)
const evaluatorCalls = (key: string) => gateway.scripted.requests.filter((r) => isEvaluator(r) && keyOf(r) === key)
const goalOf = async (threadId: string) => (await api("GET", `/api/threads/${threadId}/goal`)).json().goal
const runOf = async (threadId: string, runId: string) =>
  (await api("GET", `/api/threads/${threadId}/runs/${runId}`)).json()

describe("a run on a thread with a goal", () => {
  it("goes on with a hidden continuation turn until the evaluator finds the goal met, then clears it", async () => {
    await setGoal("goal-met", "Write the [met] report")
    const { runId, events } = await streamRun("goal-met", "Please start the [met] report")
    // one run: one metadata, one end, no error; two turns of the agent and two verdicts
    assert.deepStrictEqual(events.filter((e) => e.event === "metadata").length, 1)
    assert.strictEqual(events.at(-1)?.event, "end")
    assert.isFalse(events.some((e) => e.event === "error"))
    assert.strictEqual(agentCalls("met").length, 2)
    assert.strictEqual(evaluatorCalls("met").length, 2)

    // the evaluator read the goal and the visible conversation, as DeerFlow asks it
    const asked = messageText(evaluatorCalls("met")[0]!.messages[1]!)
    assert.include(asked, "Active goal:\nWrite the [met] report")
    assert.include(asked, "User: Please start the [met] report\n\nAssistant: Step 1 of met done.")
    // the continuation the agent got: hidden from the user, the evaluator's reason in it
    const second = agentCalls("met")[1]!
    const continuation = messageText(second.messages.at(-1)!)
    assert.include(continuation, "<goal_continuation>\nActive goal: Write the [met] report\n")
    assert.include(continuation, "Blocker: goal_not_met_yet. Reason: Not there yet.")

    // the stream's values: the goal with one continuation, then none (met)
    const goals = events.filter((e) => e.event === "values").map((e) => (e.data as any).goal)
    assert.isTrue(goals.some((g) => g?.continuation_count === 1 && g.last_evaluation?.blocker === "goal_not_met_yet"))
    assert.isNull(goals.at(-1))
    // and its updates: the evaluator's, as DeerFlow names them (the met goal none)
    const updates = events.filter((e) => e.event === "updates").map((e) => e.data as any)
    assert.strictEqual(updates.filter((u) => "goal_evaluator" in u).at(-1).goal_evaluator.goal, null)
    const goalUpdates = updates.flatMap((u) => Object.values(u)).filter((u: any) => u?.goal !== undefined)
    assert.strictEqual((goalUpdates[0] as any).goal.continuation_count, 1)
    const answers = Support.visible((events.filter((e) => e.event === "values").at(-1)!.data as any).messages)
    assert.deepStrictEqual(answers.map((m: any) => m.content), [
      "Please start the [met] report",
      "Step 1 of met done.",
      "Step 2 of met done."
    ])

    assert.isNull(await goalOf("goal-met"))
    const state = (await api("GET", "/api/threads/goal-met/state")).json()
    const hidden = state.values.messages.filter((m: any) => m.additional_kwargs?.deerflow_goal_continuation === true)
    assert.strictEqual(hidden.length, 1)
    assert.strictEqual(hidden[0].additional_kwargs.hide_from_ui, true)
    // the page the app reloads leaves it out
    const page = (await api("GET", "/api/threads/goal-met/messages/page")).json()
    assert.deepStrictEqual(page.data.map((row: any) => row.content.content), [
      "Please start the [met] report",
      "Step 1 of met done.",
      "Step 2 of met done."
    ])
    const run = await runOf("goal-met", runId)
    assert.strictEqual(run.status, "success")
    // the run's journal: one start, one end
    const journal = (await api("GET", `/api/threads/goal-met/runs/${runId}/events`)).json()
    assert.strictEqual(journal.filter((e: any) => e.event_type === "run.start").length, 1)
    assert.strictEqual(journal.filter((e: any) => e.event_type === "run.end").length, 1)
  })

  it("stops at the goal's max_continuations, recording why", async () => {
    await setGoal("goal-never", "Finish the [never] migration", 2)
    const { runId } = await streamRun("goal-never", "Migrate it [never]")
    assert.strictEqual(agentCalls("never").length, 3)
    assert.strictEqual(evaluatorCalls("never").length, 3)
    const goal = await goalOf("goal-never")
    assert.strictEqual(goal.continuation_count, 2)
    assert.strictEqual(goal.last_evaluation.stand_down_reason, "max_continuations_reached")
    assert.strictEqual(goal.last_evaluation.run_id, runId)
    assert.strictEqual((await runOf("goal-never", runId)).status, "success")
  })

  it("stands down when the answers stop changing (no progress twice)", async () => {
    await setGoal("goal-stuck", "Find the [stuck] bug")
    await streamRun("goal-stuck", "Find it [stuck]")
    // the same answer three times: the second and third make no progress, and the third stands down
    assert.strictEqual(agentCalls("stuck").length, 3)
    const goal = await goalOf("goal-stuck")
    assert.strictEqual(goal.continuation_count, 2)
    assert.strictEqual(goal.no_progress_count, 2)
    assert.strictEqual(goal.last_evaluation.stand_down_reason, "no_progress_detected")
  })

  it("stands down when the evaluator says it is blocked", async () => {
    await setGoal("goal-blocked", "Book the [blocked] trip")
    const { runId } = await streamRun("goal-blocked", "Book it [blocked]")
    assert.strictEqual(agentCalls("blocked").length, 1)
    const goal = await goalOf("goal-blocked")
    assert.strictEqual(goal.continuation_count, 0)
    assert.deepInclude(goal.last_evaluation, {
      satisfied: false,
      blocker: "needs_user_input",
      reason: "Waiting for the user to pick a city.",
      stand_down_reason: "blocked:needs_user_input"
    })
    assert.strictEqual((await runOf("goal-blocked", runId)).status, "success")
  })

  it("does not judge a turn that failed (the model answered nothing): it ends failed, the goal as it was", async () => {
    await setGoal("goal-silent", "Summarise the [silent] notes")
    const before = await goalOf("goal-silent")
    const { runId, events } = await streamRun("goal-silent", "Summarise them [silent]")
    assert.isTrue(events.some((e) => e.event === "error"))
    assert.strictEqual(events.at(-1)?.event, "end")
    assert.isAbove(agentCalls("silent").length, 0)
    assert.strictEqual(evaluatorCalls("silent").length, 0)
    assert.deepStrictEqual(await goalOf("goal-silent"), before)
    assert.strictEqual((await runOf("goal-silent", runId)).status, "error")
  })

  it("keeps the run and the goal as they were when the verdict is not one, or the evaluator fails", async () => {
    for (const key of ["malformed", "failing"]) {
      const threadId = `goal-${key}`
      await setGoal(threadId, `Check the [${key}] numbers`)
      const before = await goalOf(threadId)
      const { runId, events } = await streamRun(threadId, `Check them [${key}]`)
      assert.isFalse(events.some((e) => e.event === "error"), key)
      assert.strictEqual(events.at(-1)?.event, "end")
      assert.strictEqual(agentCalls(key).length, 1, key)
      assert.strictEqual(evaluatorCalls(key).length, 1, key)
      assert.deepStrictEqual(await goalOf(threadId), before, key)
      const run = await runOf(threadId, runId)
      assert.strictEqual(run.status, "success", key)
    }
    assert.isTrue(logs.logged.some((line) => line.includes("did not contain a JSON object")))
  })

  it("stops when the run is cancelled during a continuation turn", async () => {
    await setGoal("goal-cancel", "Ship the [cancel] release")
    let asked = false
    const { runId, events } = await streamRun("goal-cancel", "Ship it [cancel]", (event, id) => {
      const chunk = event.event === "messages" ? (event.data as any)[0] : undefined
      if (!asked && chunk?.type === "AIMessageChunk" && String(chunk.content).includes("working")) {
        asked = true
        void fetch(`${gateway.url}/api/threads/goal-cancel/runs/${id}/cancel?action=interrupt`, { method: "POST" })
      }
    })
    assert.isTrue(asked)
    assert.strictEqual(events.at(-1)?.event, "end")
    assert.strictEqual((await runOf("goal-cancel", runId)).status, "interrupted")
    // no evaluation after the stop; the continuation counted, the thread readable
    assert.strictEqual(evaluatorCalls("cancel").length, 1)
    assert.strictEqual((await goalOf("goal-cancel")).continuation_count, 1)
    const state = await api("GET", "/api/threads/goal-cancel/state")
    assert.strictEqual(state.status, 200)
  })

  it("ends cancelled when stopped while the evaluator judges", async () => {
    await setGoal("goal-hang", "Tidy the [hang-eval] docs")
    let runId = ""
    const started = streamRun("goal-hang", "Tidy them [hang-eval]", (_event, id) => {
      runId = id
    })
    await until(() => evaluatorCalls("hang-eval").length === 1, "the evaluator asked")
    assert.strictEqual((await runOf("goal-hang", runId)).status, "running")
    const cancel = await api("POST", `/api/threads/goal-hang/runs/${runId}/cancel?action=interrupt&wait=true`)
    assert.oneOf(cancel.status, [200, 202, 204], cancel.text)
    const { events } = await started
    assert.strictEqual(events.at(-1)?.event, "end")
    assert.strictEqual((await runOf("goal-hang", runId)).status, "interrupted")
    assert.strictEqual(agentCalls("hang-eval").length, 1)
    assert.isNull((await goalOf("goal-hang")).last_evaluation ?? null)
  })
})

describe("a run on a thread without a goal", () => {
  it("asks no evaluator", async () => {
    assert.strictEqual((await api("POST", "/api/threads", { thread_id: "no-goal" })).status, 200)
    const before = gateway.scripted.requests.length
    const { events } = await streamRun("no-goal", "Say hi [plain]")
    assert.strictEqual(events.at(-1)?.event, "end")
    const made = gateway.scripted.requests.slice(before)
    assert.strictEqual(made.length, 1)
    assert.isFalse(made.some(isEvaluator))
  })
})

describe("a run whose user turn hit a cap", () => {
  it("keeps the cap as its stop reason after a continuation that completed, as DeerFlow keeps it", async () => {
    let evaluated = 0
    const capped = await Support.start({
      script: (body): Turn => {
        if (isEvaluator(body)) return verdict(++evaluated === 2, evaluated === 2 ? "none" : "goal_not_met_yet", "Not there yet.")
        // the user's turn spends past the token budget; the continuation spends little
        return continuations(body) === 0
          ? { content: "A first draft.", usage: { prompt_tokens: 5000, completion_tokens: 10 } }
          : { content: "The final draft.", usage: { prompt_tokens: 10, completion_tokens: 10 } }
      },
      config: { token_budget: { enabled: true, max_tokens: 1000 } }
    })
    try {
      const call = as(() => capped)
      assert.strictEqual((await call("POST", "/api/threads", { thread_id: "capped" })).status, 200)
      assert.strictEqual((await call("PUT", "/api/threads/capped/goal", { objective: "Draft it" })).status, 200)
      const run = await call("POST", "/api/threads/capped/runs", {
        input: { messages: [{ type: "human", content: "Draft it" }] }
      })
      assert.strictEqual(run.status, 200, run.text)
      const runId = run.json().run_id
      await call("GET", `/api/threads/capped/runs/${runId}/join`)
      assert.strictEqual(evaluated, 2)
      const stored = (await call("GET", `/api/threads/capped/runs/${runId}`)).json()
      assert.strictEqual(stored.status, "success")
      assert.strictEqual(stored.stop_reason, "token_capped")
      assert.isNull((await call("GET", "/api/threads/capped/goal")).json().goal)
    } finally {
      await capped.stop()
    }
  })
})
