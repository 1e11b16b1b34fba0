/**
 * DeerFlow's test_threads_router, swept case by case (twenty-seventh pass): what its threads router answers that
 * Antler answered otherwise under DeerFlow's own routes. A state update (`POST /api/threads/{id}/state`) answers
 * the thread's state after it (values, `checkpoint_id`, `next`), as DeerFlow's `ThreadStateResponse`, where
 * LangGraph's routes keep LangGraph's `{checkpoint}`; a search naming no limit answers up to DeerFlow's 100 threads
 * (its `ThreadSearchRequest.limit` default), where LangGraph's routes keep LangGraph's 10.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const local = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang })
})
afterAll(() => gateway?.stop())

const made = async (threadId: string) =>
  assert.strictEqual((await local("POST", "/api/threads", { thread_id: threadId })).status, 200)

const checkpointIds = async (threadId: string): Promise<Array<string>> =>
  (await local("POST", `/api/threads/${threadId}/history`, { limit: 50 })).json().map((s: any) => s.checkpoint_id)

describe("DeerFlow's threads router: a state update's answer", () => {
  // DeerFlow: test_update_thread_state_real_mutation_graph_finishes_without_scheduling
  it("DeerFlow's route answers the state the update made: its values, and nothing left to run", async () => {
    await made("state-real-mutation")
    const answer = await local("POST", "/api/threads/state-real-mutation/state", {
      values: { messages: [{ type: "human", id: "h1", content: "Question" }], title: "Renamed" }
    })
    assert.strictEqual(answer.status, 200, answer.text)
    const body = answer.json()
    assert.deepStrictEqual(body.values.messages.map((m: any) => m.id), ["h1"])
    assert.strictEqual(body.values.title, "Renamed")
    assert.deepStrictEqual(body.next, [])
    // (the state it answers is the thread's state now)
    const state = (await local("GET", "/api/threads/state-real-mutation/state")).json()
    assert.strictEqual(body.checkpoint_id, state.checkpoint_id)
    assert.deepStrictEqual(body.values, state.values)
  })

  // DeerFlow: test_update_thread_state_inserts_new_checkpoint_each_call
  it("each update is a new checkpoint, whose id DeerFlow's route answers", async () => {
    await made("state-each-call")
    const first = await local("POST", "/api/threads/state-each-call/state", { values: { title: "First" } })
    const second = await local("POST", "/api/threads/state-each-call/state", { values: { title: "Second" } })
    assert.strictEqual(first.status, 200, first.text)
    assert.strictEqual(second.status, 200, second.text)
    const answered = [first.json().checkpoint_id, second.json().checkpoint_id]
    assert.isTrue(answered.every((id) => typeof id === "string"), JSON.stringify(answered))
    assert.notStrictEqual(answered[0], answered[1])
    const stored = await checkpointIds("state-each-call")
    assert.isTrue(answered.every((id) => stored.includes(id)), JSON.stringify({ answered, stored }))
    // newest first, the second update's on top
    assert.strictEqual(stored[0], answered[1])
    assert.strictEqual(second.json().parent_checkpoint_id, answered[0])
  })

  it("LangGraph's routes answer LangGraph's `{checkpoint}` only", async () => {
    await made("state-langgraph")
    for (const prefix of ["", "/api/langgraph"]) {
      const answer = await local("POST", `${prefix}/threads/state-langgraph/state`, { values: { title: prefix } })
      assert.strictEqual(answer.status, 200, answer.text)
      const body = answer.json()
      assert.deepStrictEqual(Object.keys(body), ["checkpoint"])
      assert.strictEqual(body.checkpoint.thread_id, "state-langgraph")
      assert.strictEqual(body.checkpoint.checkpoint_id, (await checkpointIds("state-langgraph"))[0])
    }
  })
})

describe("DeerFlow's threads router: a search naming no limit", () => {
  // DeerFlow's ThreadSearchRequest (`limit` defaults to 100), which every search of test_threads_router goes through
  it("DeerFlow's route answers up to 100 threads, LangGraph's routes 10", async () => {
    for (let i = 0; i < 12; i++) await made(`listed-${i}`)
    const deerflow = await local("POST", "/api/threads/search", {})
    assert.strictEqual(deerflow.status, 200, deerflow.text)
    assert.isAtLeast(deerflow.json().length, 12)
    for (const prefix of ["", "/api/langgraph"]) {
      const langgraph = await local("POST", `${prefix}/threads/search`, {})
      assert.strictEqual(langgraph.status, 200, langgraph.text)
      assert.strictEqual(langgraph.json().length, 10)
    }
    // a limit given is the limit on every route
    assert.strictEqual((await local("POST", "/api/threads/search", { limit: 3 })).json().length, 3)
  })
})

describe("DeerFlow's threads router: what a branch copies", () => {
  // DeerFlow: test_branch_copies_union_typed_reducer_channels_as_plain_values and
  // test_branch_does_not_inherit_thread_scoped_channels (DeerFlow's branch copies the newest checkpoint that holds
  // the answer, so a goal or todos set after the run go with it)
  it("a branch of the latest answer has the goal and todos the thread has now, not its sandbox", async () => {
    await made("union-branch-source")
    const ran = await local("POST", "/api/threads/union-branch-source/runs/wait", {
      input: Support.userInput("question")
    })
    assert.strictEqual(ran.status, 200, ran.text)
    const todos = [{ content: "write tests", status: "pending" }]
    const goal = await local("PUT", "/api/threads/union-branch-source/goal", { objective: "ship the fix" })
    assert.strictEqual(goal.status, 200, goal.text)
    const set = await local("POST", "/api/threads/union-branch-source/state", { values: { todos } })
    assert.strictEqual(set.status, 200, set.text)
    const source = (await local("GET", "/api/threads/union-branch-source/state")).json()
    const answer = source.values.messages.findLast((m: any) => m.type === "ai")
    const branched = await local("POST", "/api/threads/union-branch-source/branches", {
      message_id: answer.id,
      message_ids: [answer.id]
    })
    assert.strictEqual(branched.status, 200, branched.text)
    const branch = (await local("GET", `/api/threads/${branched.json().thread_id}/state`)).json()
    assert.strictEqual(branch.values.goal?.objective, "ship the fix")
    assert.deepStrictEqual(branch.values.todos, todos)
    assert.deepStrictEqual(branch.values.messages.map((m: any) => m.id), source.values.messages.map((m: any) => m.id))
    assert.isNull(branch.values.sandbox ?? null)
    assert.isNull(branch.values.thread_data ?? null)
  })
})
