/**
 * DeerFlow's test_checkpoint_patches guards a LangGraph channel patch (#4380): a replace-style first write into a
 * key the thread never had (a branch's seeded state, a state update) was stored wrapped, and the next run crashed
 * reading it. The channel cases are LangGraph machinery Antler does not have (its checkpoints are Schema-checked
 * state updates folded by reducers); what a user saw is ported: such a thread's next run ends well and reads the
 * value as written (`test_first_write_overwrite_unwraps_into_empty_channel`,
 * `test_overwrite_into_populated_channel_still_replaces`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "ada-token-checkpoint-patches"

let gateway: TestGateway
const ada = Requests.as(() => gateway, TOKEN)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Noted.",
    config: { gateway: { auth: { tokens: [{ token: TOKEN, user: "ada" }] } } }
  })
})
afterAll(() => gateway?.stop())

const todo = (content: string) => ({ content, status: "pending" })

const run = async (threadId: string) => {
  const ran = await ada("POST", `/api/threads/${threadId}/runs/wait`, { input: Support.userInput("go on") })
  assert.strictEqual(ran.status, 200, ran.text)
  const runs = (await ada("GET", `/api/threads/${threadId}/runs`)).json()
  assert.strictEqual(runs[0].status, "success")
}

describe("test_checkpoint_patches", () => {
  it("a state written into a fresh thread's never-written keys is read as written by its next run", async () => {
    assert.strictEqual((await ada("POST", "/api/threads", { thread_id: "fresh" })).status, 200)
    const written = await ada("POST", "/api/threads/fresh/state", { values: { todos: [todo("first")], title: "T" } })
    assert.strictEqual(written.status, 200, written.text)
    await run("fresh")
    const state = (await ada("GET", "/api/threads/fresh/state")).json().values
    assert.deepStrictEqual(state.todos, [todo("first")])
    assert.strictEqual(state.title, "T")
    // a second write replaces the first
    const replaced = await ada("POST", "/api/threads/fresh/state", { values: { todos: [todo("second")] } })
    assert.strictEqual(replaced.status, 200, replaced.text)
    await run("fresh")
    assert.deepStrictEqual((await ada("GET", "/api/threads/fresh/state")).json().values.todos, [todo("second")])
  })
})
