/**
 * DeerFlow's test_checkpoint_lineage: the checkpoint a regenerate (or an edit) replays from is one the thread was at
 * rest in, before the question, even when the date reminder took over the first question's id (`<id>__user`).
 * Antler writes a checkpoint after each whole step, so none holds a node's pending writes: the "pending tasks"
 * scans (test_lineage_walk_reports_missing_parent_when_no_settled_ancestor_exists,
 * test_unknown_pending_tasks_do_not_block_selection) have nothing to skip.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "ada-token-lineage-000000000"

let gateway: TestGateway
let calls = 0
const ada = Requests.as(() => gateway, TOKEN)

const textOf = (m: any) => (typeof m.content === "string" ? m.content : m.content.map((c: any) => c.text).join(""))

beforeAll(async () => {
  gateway = await Support.start({
    script: () => `Answer ${++calls}.`,
    config: { gateway: { auth: { tokens: [{ token: TOKEN, user: "ada" }] } } }
  })
})
afterAll(() => gateway?.stop())

const ask = async (threadId: string, question: string) => {
  const run = await ada("POST", `/api/threads/${threadId}/runs/wait`, {
    input: { messages: [{ type: "human", content: question }] },
    if_not_exists: "create"
  })
  assert.strictEqual(run.status, 200, run.text)
}

const visible = async (threadId: string) =>
  Support.visible((await ada("GET", `/api/threads/${threadId}/state`)).json().values.messages)

/** The regenerate base of an answer and the thread's checkpoint of that id in its history (undefined for "0"). */
const base = async (threadId: string, answerId: string) => {
  const prepared = await ada("POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: answerId })
  assert.strictEqual(prepared.status, 200, prepared.text)
  const id = prepared.json().checkpoint.checkpoint_id as string
  const history = (await ada("POST", `/api/threads/${threadId}/history`, { limit: 100 })).json()
  return { id, at: history.find((h: any) => h.checkpoint.checkpoint_id === id) }
}

describe("test_checkpoint_lineage", () => {
  // test_chronological_scan_skips_checkpoints_with_pending_tasks, test_lineage_walk_skips_checkpoints_with_pending_tasks
  it("the first turn, its question under `<id>__user`, replays from before the thread's first checkpoint", async () => {
    await ask("first", "question")
    const [question, answer] = await visible("first")
    assert.isTrue(question.id.endsWith("__user"))
    const found = await base("first", answer.id)
    assert.strictEqual(found.id, "0")
    assert.isUndefined(found.at)
  })

  // test_chronological_scan_prefers_the_previous_turn_boundary
  it("a later turn replays from the previous run's settled tail, not from inside its own run", async () => {
    await ask("later", "first")
    await ask("later", "second")
    const messages = await visible("later")
    const found = await base("later", messages[3].id)
    assert.isDefined(found.at)
    assert.deepStrictEqual(found.at.next, [])
    assert.deepStrictEqual(Support.visible(found.at.values.messages).map(textOf), ["first", textOf(messages[1])])
    // it is the last checkpoint of the first run
    const runs = (await ada("GET", "/api/threads/later/runs")).json()
    assert.strictEqual(found.at.metadata.run_id, runs.at(-1).run_id)
  })
})
