/**
 * DeerFlow's endpoints about a thread's turns, as its app reads them: reloading a chat read
 * `GET /api/threads/{id}/messages/page` (a 404: "Failed to load thread history"), and the token usage, run events,
 * workspace changes, feedback (thumbs on an answer) and goal (`/goal`) were 404s too. Each is now served, per
 * user: another user's thread or run is a 404.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { until } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-turns-000000000"
const BOB = "bob-token-turns-00000000000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const runIds: Array<string> = []

beforeAll(async () => {
  gateway = await Support.start({
    // ("save a note": a tool call first, so that the run has two answers)
    script: (body: ChatRequestBody): Turn => {
      const last = body.messages.at(-1)
      if (last?.role === "tool") return "Saved it."
      if (JSON.stringify(last?.content ?? "").includes("which city")) {
        const args = { question: "Which city?", clarification_type: "approach_choice", options: ["Paris", "Rome"] }
        return { toolCalls: [{ name: "ask_clarification", arguments: args }] }
      }
      // (a run that holds its thread until it is cancelled)
      if (JSON.stringify(last?.content ?? "").includes("hang on")) return { content: "working", stall: true }
      if (JSON.stringify(last?.content ?? "").includes("save a note")) {
        // (in the workspace: a note in outputs would have to be presented, or the run fails its delivery)
        const args = { description: "note", path: "/mnt/user-data/workspace/note.md", content: "note\n" }
        return { toolCalls: [{ name: "write_file", arguments: args }] }
      }
      return "Here you go."
    },
    config: (url) => ({
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } },
      models: [{ name: "scripted", model: "scripted", base_url: url, api_key: "sk-test-scripted-key-000000",
        context_window: 100_000 }]
    })
  })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "chat" })).status, 200)
  for (const text of ["first question", "second question"]) {
    const input = { messages: [{ type: "human", content: text }] }
    const run = await alice("POST", "/api/threads/chat/runs", { input })
    assert.strictEqual(run.status, 200, run.text)
    runIds.push(run.json().run_id)
    await alice("GET", `/api/threads/chat/runs/${run.json().run_id}/join`)
  }
})
afterAll(() => gateway?.stop())

describe("the thread's messages, page by page", () => {
  it("a reload reads every message with its run and a unique positive seq, oldest first", async () => {
    const page = await alice("GET", "/api/threads/chat/messages/page")
    assert.strictEqual(page.status, 200, page.text)
    const body = page.json()
    assert.deepStrictEqual(body.data.map((row: any) => row.content.type), ["human", "ai", "human", "ai"])
    assert.deepStrictEqual(body.data.map((row: any) => row.run_id), [runIds[0], runIds[0], runIds[1], runIds[1]])
    const seqs = body.data.map((row: any) => row.seq)
    assert.isTrue(seqs.every((s: number, i: number) => Number.isInteger(s) && s > 0 && (i === 0 || s > seqs[i - 1])))
    assert.strictEqual(body.data[1].content.content, "Here you go.")
    assert.strictEqual(body.data[0].metadata.caller, "lead_agent")
    assert.isString(body.data[0].created_at)
    assert.isFalse(body.has_more)
    assert.isNull(body.next_before_seq)
  })

  it("pages go backwards by next_before_seq", async () => {
    const newest = (await alice("GET", "/api/threads/chat/messages/page?limit=2")).json()
    assert.deepStrictEqual(newest.data.map((row: any) => row.run_id), [runIds[1], runIds[1]])
    assert.isTrue(newest.has_more)
    assert.strictEqual(newest.next_before_seq, newest.data[0].seq)
    const older = (await alice("GET", `/api/threads/chat/messages/page?limit=2&before_seq=${newest.next_before_seq}`))
      .json()
    assert.deepStrictEqual(older.data.map((row: any) => row.run_id), [runIds[0], runIds[0]])
    assert.isFalse(older.has_more)
    assert.strictEqual((await alice("GET", "/api/threads/chat/messages/page?limit=0")).status, 422)
    assert.strictEqual((await alice("GET", "/api/threads/chat/messages/page?after_seq=1")).status, 422)
  })

  it("another user's thread reads as a new chat's: no messages (as DeerFlow answers an unseen id)", async () => {
    const theirs = await bob("GET", "/api/threads/chat/messages/page")
    assert.strictEqual(theirs.status, 200)
    assert.deepStrictEqual(theirs.json(), { data: [], has_more: false, next_before_seq: null })
  })
})

describe("token usage", () => {
  it("sums the thread's model calls, by model and by caller", async () => {
    const answer = await alice("GET", "/api/threads/chat/token-usage")
    assert.strictEqual(answer.status, 200, answer.text)
    const usage = answer.json()
    assert.strictEqual(usage.thread_id, "chat")
    assert.isAbove(usage.total_tokens, 0)
    assert.strictEqual(usage.total_tokens, usage.total_input_tokens + usage.total_output_tokens)
    assert.strictEqual(usage.total_runs, 2)
    assert.deepStrictEqual(usage.by_model.scripted, { tokens: usage.total_tokens, runs: 2 })
    assert.strictEqual(usage.by_caller.lead_agent, usage.total_tokens)
    // the context gauge of DeerFlow's app: the model's window and the share of it the context takes
    const { token_count, max_context_tokens, percentage } = usage.context_usage
    assert.isAbove(token_count, 0)
    assert.strictEqual(max_context_tokens, 100_000)
    assert.strictEqual(percentage, Math.round(token_count / 100) / 10)
    assert.deepStrictEqual((await alice("GET", "/api/threads/chat/token-usage?include_active=true")).json(), usage)
    // bob has no thread "chat": for him it is a new chat's, with no tokens used
    const theirs = (await bob("GET", "/api/threads/chat/token-usage")).json()
    assert.deepStrictEqual([theirs.total_tokens, theirs.total_runs, theirs.by_model], [0, 0, {}])
  })

  it("leaves a running run out unless include_active=true, as DeerFlow's view does", async () => {
    const [record] = await Effect.runPromise(gateway.store.runs({ runId: runIds[1]! }))
    const whole = (await alice("GET", "/api/threads/chat/token-usage")).json()
    await Effect.runPromise(gateway.store.saveRun({ ...record!, status: "running", ended_at: null }))
    try {
      const ended = (await alice("GET", "/api/threads/chat/token-usage")).json()
      assert.strictEqual(ended.total_runs, 1)
      assert.deepStrictEqual(ended.by_model.scripted, { tokens: ended.total_tokens, runs: 1 })
      assert.isBelow(ended.total_tokens, whole.total_tokens)
      const active = (await alice("GET", "/api/threads/chat/token-usage?include_active=true")).json()
      assert.deepStrictEqual(active, whole)
      // the flag read as DeerFlow's gateway (FastAPI) reads a boolean: `1` and `yes` too; a word that is none a 422
      for (const word of ["1", "yes", "True", "on"]) {
        const read = await alice("GET", `/api/threads/chat/token-usage?include_active=${word}`)
        assert.deepStrictEqual(read.json(), whole, word)
      }
      for (const word of ["0", "no", "false"]) {
        const read = await alice("GET", `/api/threads/chat/token-usage?include_active=${word}`)
        assert.deepStrictEqual(read.json(), ended, word)
      }
      const wrong = await alice("GET", "/api/threads/chat/token-usage?include_active=maybe")
      assert.strictEqual(wrong.status, 422, wrong.text)
      assert.include(wrong.json().detail, "include_active")
    } finally {
      await Effect.runPromise(gateway.store.saveRun(record!))
    }
  })
})

describe("a run's own counts (DeerFlow's RunResponse)", () => {
  it("each run says its tokens, model calls and messages; together they are the thread's token usage", async () => {
    const usage = (await alice("GET", "/api/threads/chat/token-usage")).json()
    const listed = await alice("GET", "/api/threads/chat/runs")
    assert.strictEqual(listed.status, 200, listed.text)
    const runs = listed.json()
    assert.deepStrictEqual(runs.map((run: any) => run.run_id), [runIds[1], runIds[0]])
    for (const run of runs) {
      assert.isAbove(run.total_tokens, 0)
      assert.strictEqual(run.total_tokens, run.total_input_tokens + run.total_output_tokens)
      assert.strictEqual(run.lead_agent_tokens, run.total_tokens)
      assert.strictEqual(run.subagent_tokens, 0)
      assert.strictEqual(run.middleware_tokens, 0)
      assert.strictEqual(run.llm_call_count, 1)
      // the question and its answer
      assert.strictEqual(run.message_count, 2)
      const one = await alice("GET", `/api/threads/chat/runs/${run.run_id}`)
      assert.deepStrictEqual(one.json(), run)
    }
    assert.strictEqual(runs[0].total_tokens + runs[1].total_tokens, usage.total_tokens)
    const selected = (await alice("GET", "/api/threads/chat/runs?select=run_id&select=total_tokens")).json()
    assert.deepStrictEqual(selected[0], { run_id: runIds[1], total_tokens: runs[0].total_tokens })
  })
})

describe("run events and workspace changes", () => {
  it("a run without subagent steps nor file changes has none of them, 404 for another user", async () => {
    const events = await alice("GET", `/api/threads/chat/runs/${runIds[0]}/events?event_types=subagent.step`)
    assert.strictEqual(events.status, 200)
    assert.deepStrictEqual(events.json(), [])
    const changes = await alice("GET", `/api/threads/chat/runs/${runIds[0]}/workspace-changes`)
    assert.strictEqual(changes.status, 200)
    assert.strictEqual(changes.json().available, false)
    assert.deepStrictEqual(changes.json().files, [])
    assert.strictEqual((await bob("GET", `/api/threads/chat/runs/${runIds[0]}/events`)).status, 404)
    assert.strictEqual((await bob("GET", `/api/threads/chat/runs/${runIds[0]}/workspace-changes`)).status, 404)
    assert.strictEqual((await alice("GET", "/api/threads/chat/runs/nope/events")).status, 404)
  })
})

describe("feedback on an answer", () => {
  it("is set, read (also on the run's last answer in the page), replaced and removed", async () => {
    const run = runIds[1]!
    const put = await alice("PUT", `/api/threads/chat/runs/${run}/feedback`, { rating: 1, comment: "Good" })
    assert.strictEqual(put.status, 200, put.text)
    const feedback = put.json()
    assert.isString(feedback.feedback_id)
    assert.strictEqual(feedback.rating, 1)
    assert.strictEqual(feedback.comment, "Good")
    const again = (await alice("PUT", `/api/threads/chat/runs/${run}/feedback`, { rating: -1 })).json()
    assert.strictEqual(again.feedback_id, feedback.feedback_id)
    assert.strictEqual(again.rating, -1)
    const listed = (await alice("GET", `/api/threads/chat/runs/${run}/feedback`)).json()
    assert.deepStrictEqual(listed.map((f: any) => f.rating), [-1])
    const page = (await alice("GET", "/api/threads/chat/messages/page")).json()
    assert.deepStrictEqual(page.data.map((row: any) => row.feedback?.rating ?? null), [null, null, null, -1])
    assert.strictEqual((await alice("PUT", `/api/threads/chat/runs/${run}/feedback`, { rating: 3 })).status, 400)
    assert.strictEqual((await bob("PUT", `/api/threads/chat/runs/${run}/feedback`, { rating: 1 })).status, 404)
    assert.strictEqual((await bob("DELETE", `/api/threads/chat/runs/${run}/feedback`)).status, 404)
    const deleted = await alice("DELETE", `/api/threads/chat/runs/${run}/feedback`)
    assert.strictEqual(deleted.status, 200)
    assert.deepStrictEqual(deleted.json(), { success: true })
    assert.deepStrictEqual((await alice("GET", `/api/threads/chat/runs/${run}/feedback`)).json(), [])
    assert.strictEqual((await alice("DELETE", `/api/threads/chat/runs/${run}/feedback`)).status, 404)
  })
})

describe("a clarification on the page", () => {
  // DeerFlow's journal keeps a hidden answer to an `ask_clarification` question (test_run_journal's
  // test_hidden_human_input_response_is_captured), so that a reload shows the question's card answered
  it("shows the question and its hidden answer; other hidden messages stay off", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "asked" })).status, 200)
    const input = { messages: [{ type: "human", content: "plan a trip, which city?" }] }
    assert.strictEqual((await alice("POST", "/api/threads/asked/runs/wait", { input })).status, 200)
    const answered = await alice("POST", "/api/threads/asked/runs/wait", { command: { resume: "2" } })
    assert.strictEqual(answered.status, 200, answered.text)
    const rows = (await alice("GET", "/api/threads/asked/messages/page")).json().data
    assert.deepStrictEqual(rows.map((row: any) => row.content.type), ["human", "ai", "tool", "human", "ai"])
    assert.strictEqual(rows[2].content.name, "ask_clarification")
    const answer = rows[3].content
    assert.strictEqual(answer.content, "Rome")
    assert.strictEqual(answer.additional_kwargs.human_input_response.source, "ask_clarification")
    assert.strictEqual(answer.additional_kwargs.human_input_response.request_id,
      rows[2].content.artifact.human_input.request_id)
    // (the thread holds hidden messages the page leaves off: the date reminder)
    const state = (await alice("GET", "/api/threads/asked/state")).json()
    const hiddenOthers = state.values.messages.filter((m: any) =>
      m.additional_kwargs?.hide_from_ui === true && m.additional_kwargs?.human_input_response === undefined
    )
    assert.isAbove(hiddenOthers.length, 0)
    assert.strictEqual(rows.length, state.values.messages.length - hiddenOthers.length)
  })
})

describe("a run's duration and rating on the page", () => {
  // DeerFlow's test_thread_messages_page: `additional_kwargs.turn_duration` (the run's seconds, which its app shows
  // under the run) on the run's last answer of the page only; the rating on the run's last answer in the thread,
  // so that an older page does not show it on an earlier answer of the run
  it("stamps turn_duration on each run's last answer, and keeps the rating off a page without it", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "steps" })).status, 200)
    const input = { messages: [{ type: "human", content: "save a note" }] }
    const run = (await alice("POST", "/api/threads/steps/runs/wait", { input }))
    assert.strictEqual(run.status, 200, run.text)
    const [record] = (await alice("GET", "/api/threads/steps/runs")).json()
    assert.strictEqual(record.status, "success")
    const whole = (await alice("GET", "/api/threads/steps/messages/page")).json()
    assert.deepStrictEqual(whole.data.map((row: any) => row.content.type), ["human", "ai", "tool", "ai"])
    const durations = whole.data.map((row: any) => row.content.additional_kwargs?.turn_duration)
    assert.deepStrictEqual(durations.slice(0, 3), [undefined, undefined, undefined])
    assert.isTrue(Number.isInteger(durations[3]) && durations[3] >= 0, JSON.stringify(durations))
    assert.strictEqual(whole.data[3].content.content, "Saved it.")

    assert.strictEqual((await alice("PUT", `/api/threads/steps/runs/${record.run_id}/feedback`, { rating: 1 })).status,
      200)
    const ratings = (await alice("GET", "/api/threads/steps/messages/page")).json()
    assert.deepStrictEqual(ratings.data.map((row: any) => row.feedback?.rating ?? null), [null, null, null, 1])
    // the page before the last answer: the tool-calling answer is the run's last on it, not in the thread
    const older = (await alice("GET", `/api/threads/steps/messages/page?before_seq=${whole.data[3].seq}`)).json()
    assert.deepStrictEqual(older.data.map((row: any) => row.feedback), [null, null, null])
    assert.isNumber(older.data[1].content.additional_kwargs?.turn_duration)
  })
})

describe("a run's duration in the thread's history", () => {
  // DeerFlow's test_threads_router (test_get_thread_history_associates_tool_messages_from_checkpoint_turn, the
  // durations test_run_duration_checkpoint keeps): the newest state of `/history` gives each answer and tool result
  // its `run_id`, and the run's last answer (only) its `turn_duration`, which the app shows under the run
  it("stamps the newest state's answers with their run and the run's last answer with its turn_duration", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "timed" })).status, 200)
    const input = { messages: [{ type: "human", content: "save a note" }] }
    assert.strictEqual((await alice("POST", "/api/threads/timed/runs/wait", { input })).status, 200)
    const [record] = (await alice("GET", "/api/threads/timed/runs")).json()
    for (const history of [
      await alice("POST", "/api/threads/timed/history", { limit: 10 }),
      await alice("GET", "/api/threads/timed/history?limit=10")
    ]) {
      assert.strictEqual(history.status, 200, history.text)
      const [newest, older] = history.json()
      const messages = Support.visible(newest.values.messages)
      assert.deepStrictEqual(messages.map((m: any) => m.type), ["human", "ai", "tool", "ai"])
      assert.deepStrictEqual(messages.map((m: any) => m.run_id ?? null), [null, ...Array(3).fill(record.run_id)])
      const durations = messages.map((m: any) => m.additional_kwargs?.turn_duration)
      assert.deepStrictEqual(durations.slice(0, 3), [undefined, undefined, undefined])
      assert.isTrue(Number.isInteger(durations[3]) && durations[3] >= 0, JSON.stringify(durations))
      // (an older state's answers are not stamped: its last answer is not the run's)
      assert.isTrue(older.values.messages.every((m: any) => m.additional_kwargs?.turn_duration === undefined))
    }
    // the state is the checkpoint's as stored, as DeerFlow's
    const state = (await alice("GET", "/api/threads/timed/state")).json()
    assert.isUndefined(state.values.messages.at(-1).additional_kwargs?.turn_duration)
  })
})

describe("the thread's goal", () => {
  it("is set, read in the state's values.goal, and cleared; a new chat's goal makes its thread", async () => {
    assert.deepStrictEqual((await alice("GET", "/api/threads/chat/goal")).json(), { goal: null })
    const put = await alice("PUT", "/api/threads/chat/goal", { objective: "Ship the report" })
    assert.strictEqual(put.status, 200, put.text)
    assert.strictEqual(put.json().goal.objective, "Ship the report")
    assert.strictEqual(put.json().goal.status, "active")
    assert.strictEqual((await alice("GET", "/api/threads/chat/goal")).json().goal.objective, "Ship the report")
    assert.strictEqual((await alice("GET", "/api/threads/chat/state")).json().values.goal.objective, "Ship the report")
    // bob has no thread "chat": for him it is a new chat's, with no goal, whatever alice's holds
    assert.deepStrictEqual((await bob("GET", "/api/threads/chat/goal")).json(), { goal: null })
    assert.deepStrictEqual((await bob("DELETE", "/api/threads/chat/goal")).json(), { goal: null })
    assert.strictEqual((await alice("GET", "/api/threads/chat/goal")).json().goal.objective, "Ship the report")
    assert.strictEqual((await alice("PUT", "/api/threads/chat/goal", { objective: "" })).status, 422)
    // DeerFlow's normalize_goal_objective: the objective is kept as one line of words, and blank is none
    const blank = await alice("PUT", "/api/threads/chat/goal", { objective: " \n\t " })
    assert.strictEqual(blank.status, 422, blank.text)
    assert.include(blank.json().detail, "must not be empty")
    assert.strictEqual((await alice("GET", "/api/threads/chat/goal")).json().goal.objective, "Ship the report")
    const spaced = await alice("PUT", "/api/threads/chat/goal", { objective: "  Ship the\n  report \t" })
    assert.strictEqual(spaced.json().goal.objective, "Ship the report")
    assert.strictEqual((await alice("GET", "/api/threads/chat/state")).json().values.goal.objective, "Ship the report")
    // DeerFlow's test_goal_status_and_clear_round_trip, but for its `"goal" not in values`: Antler's values are whole,
    // an unset field is null (docs/deerflow.md, test_threads_router.py's line)
    const cleared = await alice("DELETE", "/api/threads/chat/goal")
    assert.deepStrictEqual(cleared.json(), { goal: null })
    assert.isNull((await alice("GET", "/api/threads/chat/state")).json().values.goal)
    const fresh = await alice("PUT", "/api/threads/new-chat/goal", { objective: "Plan a trip" })
    assert.strictEqual(fresh.status, 200, fresh.text)
    assert.strictEqual((await alice("GET", "/api/threads/new-chat/goal")).json().goal.objective, "Plan a trip")
    assert.deepStrictEqual((await bob("GET", "/api/threads/new-chat/goal")).json(), { goal: null })
  })

  // DeerFlow's get_thread_goal and clear_thread_goal: the app's new chat holds its thread id before its first run,
  // and `/goal` (status) or `/goal clear` there answers no goal (it showed "Thread ... not found")
  it("of a new chat (no thread yet) is none, and clearing it is no error; neither makes the thread", async () => {
    const read = await alice("GET", "/api/threads/not-yet/goal")
    assert.strictEqual(read.status, 200, read.text)
    assert.deepStrictEqual(read.json(), { goal: null })
    const cleared = await alice("DELETE", "/api/threads/not-yet/goal")
    assert.strictEqual(cleared.status, 200, cleared.text)
    assert.deepStrictEqual(cleared.json(), { goal: null })
    assert.strictEqual((await alice("GET", "/api/threads/not-yet")).status, 404)
    // an id no thread can have names none
    assert.strictEqual((await alice("GET", "/api/threads/has%20space/goal")).status, 404)
    assert.strictEqual((await alice("DELETE", "/api/threads/has%20space/goal")).status, 404)
  })

  // DeerFlow's set_thread_goal builds a fresh goal (build_goal_state): a replaced goal is a new one, its
  // created_at the time it was set (what tells DeerFlow's worker that the goal it evaluated was replaced)
  it("set again is a new goal: its created_at is when it was set, not the earlier goal's", async () => {
    const earlier = {
      objective: "Old aim",
      status: "active",
      created_at: "2020-01-01T00:00:00.000Z",
      updated_at: "2020-01-01T00:00:00.000Z",
      continuation_count: 3,
      max_continuations: 8,
      no_progress_count: 1,
      max_no_progress_continuations: 2
    }
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "replaced" })).status, 200)
    const seeded = await alice("POST", "/api/threads/replaced/state", { values: { goal: earlier } })
    assert.strictEqual(seeded.status, 200, seeded.text)
    assert.strictEqual((await alice("GET", "/api/threads/replaced/goal")).json().goal.created_at, earlier.created_at)
    const put = await alice("PUT", "/api/threads/replaced/goal", { objective: "New aim" })
    assert.strictEqual(put.status, 200, put.text)
    const goal = put.json().goal
    assert.strictEqual(goal.created_at, goal.updated_at)
    assert.notStrictEqual(goal.created_at, earlier.created_at)
    assert.strictEqual(goal.continuation_count, 0)
    assert.deepStrictEqual((await alice("GET", "/api/threads/replaced/goal")).json().goal, goal)
  })

  // DeerFlow's set_thread_goal and clear_thread_goal refuse a thread a run holds, saying what to do
  it("is not set or cleared while a run holds the thread (409, DeerFlow's words)", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "held" })).status, 200)
    assert.strictEqual((await alice("PUT", "/api/threads/held/goal", { objective: "Keep going" })).status, 200)
    const input = { messages: [{ type: "human", content: "hang on" }] }
    const run = (await alice("POST", "/api/threads/held/runs", { input })).json()
    await until(async () => (await alice("GET", `/api/threads/held/runs/${run.run_id}`)).json().status === "running",
      "the run running")
    const set = await alice("PUT", "/api/threads/held/goal", { objective: "Another aim" })
    assert.strictEqual(set.status, 409, set.text)
    assert.strictEqual(set.json().detail, "Thread has a run in flight. Set the goal after the run finishes.")
    const clear = await alice("DELETE", "/api/threads/held/goal")
    assert.strictEqual(clear.status, 409, clear.text)
    assert.strictEqual(clear.json().detail, "Thread has a run in flight. Clear the goal after the run finishes.")
    const cancelled = await alice("POST", `/api/threads/held/runs/${run.run_id}/cancel?wait=true`)
    assert.strictEqual(cancelled.status < 300, true, cancelled.text)
    assert.strictEqual((await alice("GET", "/api/threads/held/goal")).json().goal.objective, "Keep going")
  })

  // DeerFlow's clear_thread_goal reserves the thread before it reads the goal: no goal is no way past a run
  it("with none set is not cleared while a run holds the thread either (409, DeerFlow's words)", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "held-bare" })).status, 200)
    const input = { messages: [{ type: "human", content: "hang on" }] }
    const run = (await alice("POST", "/api/threads/held-bare/runs", { input })).json()
    const status = async () => (await alice("GET", `/api/threads/held-bare/runs/${run.run_id}`)).json().status
    await until(async () => (await status()) === "running", "the run running")
    const clear = await alice("DELETE", "/api/threads/held-bare/goal")
    assert.strictEqual(clear.status, 409, clear.text)
    assert.strictEqual(clear.json().detail, "Thread has a run in flight. Clear the goal after the run finishes.")
    const cancelled = await alice("POST", `/api/threads/held-bare/runs/${run.run_id}/cancel?wait=true`)
    assert.strictEqual(cancelled.status < 300, true, cancelled.text)
    const after = await alice("DELETE", "/api/threads/held-bare/goal")
    assert.strictEqual(after.status, 200, after.text)
    assert.deepStrictEqual(after.json(), { goal: null })
  })
})
