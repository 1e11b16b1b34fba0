/**
 * DeerFlow's `test_run_worker_delta_resume.py`, its one case a user sees, through a real gateway:
 * `test_regenerating_in_a_branched_thread_does_not_resurrect_the_old_answer`. A branch from the latest answer holds
 * the whole conversation; regenerating that inherited answer in the branch leaves the question and the new answer,
 * never the old answer beside it, and the thread it was branched from keeps its own. Its other cases are its
 * delta-channel checkpoint linearising, which Antler's checkpoints (whole messages, folded) do not need.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
let calls = 0
beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => `Answer ${++calls} to ${Support.lastUserText(body).match(/q\d/)?.[0]}`,
    config: { gateway: Support.twoUsers }
  })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)

const textOf = (m: any) => (typeof m.content === "string" ? m.content : m.content.map((c: any) => c.text).join(""))
const visible = async (threadId: string) =>
  Support.visible((await alice("GET", `/api/threads/${threadId}/state`)).json().values.messages)

const ask = async (threadId: string, question: string) => {
  const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, { input: Support.userInput(question) })
  assert.strictEqual(run.status, 200, run.text)
}

describe("test_run_worker_delta_resume.py", () => {
  it("test_regenerating_in_a_branched_thread_does_not_resurrect_the_old_answer", async () => {
    await alice("POST", "/api/threads", { thread_id: "parent" })
    await ask("parent", "q1")
    await ask("parent", "q2")
    const parent = await visible("parent")
    assert.deepStrictEqual(parent.map(textOf), ["q1", "Answer 1 to q1", "q2", "Answer 2 to q2"], JSON.stringify(parent.map(textOf)))
    const branch = (await alice("POST", "/api/threads/parent/branches", { message_id: parent[3].id })).json()
    const inherited = await visible(branch.thread_id)
    assert.deepStrictEqual(inherited.map(textOf), parent.map(textOf))

    const prepared = await alice("POST", `/api/threads/${branch.thread_id}/runs/regenerate/prepare`, {
      message_id: inherited[3].id
    })
    assert.strictEqual(prepared.status, 200, prepared.text)
    const body = prepared.json()
    const run = await alice("POST", `/api/threads/${branch.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: body.input,
      checkpoint: body.checkpoint,
      metadata: body.metadata
    })
    assert.strictEqual(run.status, 200, run.text)
    assert.deepStrictEqual((await visible(branch.thread_id)).map(textOf), ["q1", "Answer 1 to q1", "q2", "Answer 3 to q2"])
    const page = (await alice("GET", `/api/threads/${branch.thread_id}/messages/page`)).json()
    assert.notInclude(JSON.stringify(page), "Answer 2 to q2")
    assert.deepStrictEqual((await visible("parent")).map(textOf), parent.map(textOf))
  })
})
