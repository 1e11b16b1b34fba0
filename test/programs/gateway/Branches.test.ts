/**
 * DeerFlow's regenerate, edit-and-regenerate and branch, as its app makes them: the prepare endpoints answer what
 * the app then sends as a run from a checkpoint (which now forks the thread there), and a branch is a new thread
 * holding the conversation up to an answer. Each was a 404; each is per user (another user's thread is a 404).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-branches-000000"
const BOB = "bob-token-branches-00000000"

let gateway: TestGateway
let calls = 0

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const textOf = (m: any) => (typeof m.content === "string" ? m.content : m.content.map((c: any) => c.text).join(""))
const visible = async (threadId: string) =>
  Support.visible((await alice("GET", `/api/threads/${threadId}/state`)).json().values.messages)
const texts = async (threadId: string) => (await visible(threadId)).map(textOf)

/** A run as the app starts it after a prepare: the input, the checkpoint and the metadata it was given. */
const runPrepared = async (threadId: string, prepared: any) => {
  const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
    assistant_id: "lead_agent",
    input: prepared.input,
    checkpoint: prepared.checkpoint,
    metadata: prepared.metadata
  })
  assert.strictEqual(run.status, 200, run.text)
}

const ask = async (threadId: string, question: string) => {
  const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
    input: { messages: [{ type: "human", content: [{ type: "text", text: question }] }] }
  })
  assert.strictEqual(run.status, 200, run.text)
}

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      const last = body.messages[body.messages.length - 1] as { content?: unknown }
      // a question the model cannot answer: a request it refuses (not retried)
      if (JSON.stringify(last.content).includes("qbroken")) {
        return { status: 400, body: { error: { message: "the model refuses this", type: "invalid_request_error" } } }
      }
      return `Answer ${++calls} to ${JSON.stringify(last.content).match(/q\w+( edited)?/)?.[0]}`
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
})
afterAll(() => gateway?.stop())

describe("regenerate", () => {
  it("prepares a run from the checkpoint before the question; that run replaces the latest answer", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "regen" })).status, 200)
    await ask("regen", "qone")
    await ask("regen", "qtwo")
    const before = await visible("regen")
    const answer = before[3]
    const runs = (await alice("GET", "/api/threads/regen/runs")).json()
    const prepared = await alice("POST", "/api/threads/regen/runs/regenerate/prepare", { message_id: answer.id })
    assert.strictEqual(prepared.status, 200, prepared.text)
    const body = prepared.json()
    assert.strictEqual(body.target_run_id, runs[0].run_id)
    assert.deepStrictEqual(body.input.messages.map(textOf), ["qtwo"])
    assert.strictEqual(body.input.messages[0].id, before[2].id)
    assert.strictEqual(body.metadata.regenerate_from_message_id, answer.id)
    assert.strictEqual(body.metadata.regenerate_checkpoint_id, body.checkpoint.checkpoint_id)
    await runPrepared("regen", body)
    const after = await texts("regen")
    assert.strictEqual(after.length, 4)
    assert.deepStrictEqual(after.slice(0, 3), before.slice(0, 3).map(textOf))
    assert.match(after[3]!, /^Answer \d+ to qtwo$/)
    assert.notStrictEqual(after[3], textOf(answer))
    // the replaced answer stays in history
    const history = (await alice("POST", "/api/threads/regen/history", { limit: 100 })).json()
    assert.isTrue(history.some((h: any) => h.values.messages.some((m: any) => m.id === answer.id)))
  })

  it("of a thread's first answer starts from before its first checkpoint", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "first" })).status, 200)
    await ask("first", "qsolo")
    const [, answer] = await visible("first")
    const body = (await alice("POST", "/api/threads/first/runs/regenerate/prepare", { message_id: answer.id })).json()
    assert.strictEqual(body.checkpoint.checkpoint_id, "0")
    await runPrepared("first", body)
    const after = await texts("first")
    assert.strictEqual(after.length, 2)
    assert.strictEqual(after[0], "qsolo")
    assert.notStrictEqual(after[1], textOf(answer))
  })

  // DeerFlow's test_prepare_regenerate_payload_replays_the_pre_swap_user_message_id: the first question's id was
  // taken over by the date reminder (the question came back as `<id>__user`); replayed under that id, the
  // regenerated turn would be told no date
  it("of a first answer replays the question under the id the client sent, so it is told the date", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "dated" })).status, 200)
    await ask("dated", "qdated")
    const [question, answer] = await visible("dated")
    assert.isTrue(question.id.endsWith("__user"))
    const body = (await alice("POST", "/api/threads/dated/runs/regenerate/prepare", { message_id: answer.id })).json()
    assert.strictEqual(body.input.messages[0].id, question.id.slice(0, -"__user".length))
    const before = gateway.scripted.requests.length
    await runPrepared("dated", body)
    const request = gateway.scripted.requests.slice(before).find((r) => JSON.stringify(r).includes("qdated"))
    assert.include(JSON.stringify(request?.messages), "<current_date>")
    const after = await visible("dated")
    assert.deepStrictEqual(after.map(textOf).slice(0, 1), ["qdated"])
    assert.strictEqual(after.length, 2)
  })

  // DeerFlow's test_prepare_regenerate_payload_returns_clean_input_and_base_checkpoint: the question as the user
  // wrote it, not the uploads block put before it for the model
  it("replays a question sent with files as the user wrote it, with its files and no server keys", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "files" })).status, 200)
    const form = new FormData()
    form.append("files", new Blob(["field notes\n"], { type: "text/plain" }), "notes.txt")
    const upload = await fetch(`${gateway.url}/api/threads/files/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE}` },
      body: form
    })
    assert.strictEqual(upload.status, 200)
    const files = [{ filename: "notes.txt", size: 12, path: "/mnt/user-data/uploads/notes.txt" }]
    const first = gateway.scripted.requests.length
    const run = await alice("POST", "/api/threads/files/runs/wait", {
      input: {
        messages: [{ type: "human", content: [{ type: "text", text: "qfiles" }], additional_kwargs: { files } }]
      }
    })
    assert.strictEqual(run.status, 200, run.text)
    const [, answer] = await visible("files")
    // DeerFlow's page reads the question from its run events, as the user wrote it (test_run_journal)
    const page = (await alice("GET", "/api/threads/files/messages/page")).json()
    assert.deepStrictEqual(page.data[0].content.content, [{ type: "text", text: "qfiles" }])
    assert.notProperty(page.data[0].content.additional_kwargs, "original_user_content")
    const body = (await alice("POST", "/api/threads/files/runs/regenerate/prepare", { message_id: answer.id })).json()
    const [replayed] = body.input.messages
    assert.deepStrictEqual(replayed.content, [{ type: "text", text: "qfiles" }])
    assert.deepStrictEqual(replayed.additional_kwargs.files, files)
    assert.notProperty(replayed.additional_kwargs, "original_user_content")
    const before = gateway.scripted.requests.length
    await runPrepared("files", body)
    const request = gateway.scripted.requests.slice(before).find((r) => JSON.stringify(r).includes("qfiles"))
    // the uploads block once, as in the first run
    const blocks = (r: any) => JSON.stringify(r?.messages).split("<current_uploads>").length - 1
    const original = gateway.scripted.requests.slice(first).find((r) => JSON.stringify(r).includes("qfiles"))
    assert.isAbove(blocks(original), 0)
    assert.strictEqual(blocks(request), blocks(original))
    const [question] = await visible("files")
    assert.strictEqual(question.additional_kwargs.original_user_content, "qfiles")
  })

  it("refuses what is not the latest answer, a message it does not have, and another user's thread", async () => {
    const messages = await visible("regen")
    const older = await alice("POST", "/api/threads/regen/runs/regenerate/prepare", { message_id: messages[1].id })
    assert.strictEqual(older.status, 409)
    const question = await alice("POST", "/api/threads/regen/runs/regenerate/prepare", { message_id: messages[2].id })
    assert.strictEqual(question.status, 409)
    const none = await alice("POST", "/api/threads/regen/runs/regenerate/prepare", { message_id: "nope" })
    assert.strictEqual(none.status, 404)
    const other = await bob("POST", "/api/threads/regen/runs/regenerate/prepare", { message_id: messages[3].id })
    assert.strictEqual(other.status, 404)
    assert.strictEqual((await alice("POST", "/api/threads/regen/runs/regenerate/prepare", {})).status, 422)
  })
})

describe("edit and regenerate", () => {
  it("prepares the edited question under a new id; its run replaces the latest turn", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "edit" })).status, 200)
    await ask("edit", "qone")
    await ask("edit", "qtwo")
    const before = await visible("edit")
    const request = { human_message_id: before[2].id, replacement_text: "qtwo edited" }
    const prepared = await alice("POST", "/api/threads/edit/runs/edit-regenerate/prepare", request)
    assert.strictEqual(prepared.status, 200, prepared.text)
    const body = prepared.json()
    assert.notStrictEqual(body.replacement_human_message_id, before[2].id)
    assert.strictEqual(body.input.messages[0].id, body.replacement_human_message_id)
    assert.deepStrictEqual(body.source_message_ids, [before[2].id, before[3].id])
    assert.strictEqual(body.metadata.replay_kind, "edit")
    await runPrepared("edit", body)
    const after = await texts("edit")
    assert.deepStrictEqual(after.slice(0, 3), ["qone", textOf(before[1]), "qtwo edited"])
    assert.match(after[3]!, /^Answer \d+ to qtwo edited$/)
    assert.strictEqual(after.length, 4)
  })

  // DeerFlow's test_prepare_edit_regenerate_payload_preserves_a_rename_the_replay_base_predates and
  // ..._lets_an_untitled_base_name_the_edited_turn
  it("keeps a title the user gave after the turn's start; a first turn's edit is titled anew", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "renamed" })).status, 200)
    await ask("renamed", "qone")
    await ask("renamed", "qtwo")
    const title = (await alice("GET", "/api/threads/renamed/state")).json().values.title
    assert.isString(title)
    const renamed = await alice("POST", "/api/threads/renamed/state", { values: { title: "My rename" } })
    assert.strictEqual(renamed.status, 200, renamed.text)
    const before = await visible("renamed")
    const edit = async (at: number, text: string) => {
      const request = { human_message_id: before[at].id, replacement_text: text }
      const prepared = await alice("POST", "/api/threads/renamed/runs/edit-regenerate/prepare", request)
      assert.strictEqual(prepared.status, 200, prepared.text)
      return prepared.json()
    }
    const body = await edit(2, "qtwo edited")
    assert.strictEqual(body.input.title, "My rename")
    await runPrepared("renamed", body)
    assert.strictEqual((await alice("GET", "/api/threads/renamed/state")).json().values.title, "My rename")
    // (the first turn, from before the thread had a title)
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "untitled" })).status, 200)
    await ask("untitled", "qfirst")
    await alice("POST", "/api/threads/untitled/state", { values: { title: "Named" } })
    const [question] = await visible("untitled")
    const request = { human_message_id: question.id, replacement_text: "qfirst edited" }
    const first = (await alice("POST", "/api/threads/untitled/runs/edit-regenerate/prepare", request)).json()
    assert.notProperty(first.input, "title")
    // a run's input title is read as the state's, a string
    const refused = await alice("POST", "/api/threads/untitled/runs/wait", { input: { title: 5 } })
    assert.strictEqual(refused.status, 422, refused.text)
    assert.include(refused.json().detail, "input.title")
  })

  // DeerFlow's test_run_agent_rolls_back_failed_edit_replay_and_publishes_restored_values
  it("an edited question's run that fails leaves the thread as it was before the edit", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "edit-fails" })).status, 200)
    await ask("edit-fails", "qone")
    await ask("edit-fails", "qtwo")
    const before = await texts("edit-fails")
    const question = (await visible("edit-fails"))[2]
    const request = { human_message_id: question.id, replacement_text: "qbroken edited" }
    const prepared = (await alice("POST", "/api/threads/edit-fails/runs/edit-regenerate/prepare", request)).json()
    const run = await alice("POST", "/api/threads/edit-fails/runs/wait", {
      assistant_id: "lead_agent",
      input: prepared.input,
      checkpoint: prepared.checkpoint,
      metadata: prepared.metadata
    })
    assert.strictEqual(run.status, 200, run.text)
    // the client is told the run failed, and is given the thread as it is again
    assert.isDefined(run.json().__error__)
    assert.deepStrictEqual(Support.visible(run.json().messages).map(textOf), before)
    assert.deepStrictEqual(await texts("edit-fails"), before)
    const runs = (await alice("GET", "/api/threads/edit-fails/runs")).json()
    assert.strictEqual(runs[0].status, "error")
    // streamed: the error, then the thread as it is again
    const again = (await alice("POST", "/api/threads/edit-fails/runs/edit-regenerate/prepare", request)).json()
    const streamed = await fetch(`${gateway.url}/api/threads/edit-fails/runs/stream`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: again.input,
        checkpoint: again.checkpoint,
        metadata: again.metadata,
        stream_mode: ["values"]
      })
    })
    const { events } = await Support.readSse(streamed)
    const names = events.map((e) => e.event)
    assert.isAbove(names.lastIndexOf("values"), names.indexOf("error"))
    assert.isAtLeast(names.indexOf("error"), 0)
    const last = events.filter((e) => e.event === "values").at(-1)!.data as any
    assert.deepStrictEqual(Support.visible(last.messages).map(textOf), before)
    // the thread goes on from its original turns
    await ask("edit-fails", "qthree")
    const after = await texts("edit-fails")
    assert.deepStrictEqual(after.slice(0, 4), before)
    assert.match(after[5]!, /^Answer \d+ to qthree$/)
  })

  it("refuses an unchanged text, an older question, and another user's thread", async () => {
    const messages = await visible("edit")
    const same = { human_message_id: messages[2].id, replacement_text: " qtwo edited " }
    assert.strictEqual((await alice("POST", "/api/threads/edit/runs/edit-regenerate/prepare", same)).status, 409)
    const older = { human_message_id: messages[0].id, replacement_text: "other" }
    assert.strictEqual((await alice("POST", "/api/threads/edit/runs/edit-regenerate/prepare", older)).status, 409)
    const other = { human_message_id: messages[2].id, replacement_text: "bob's" }
    assert.strictEqual((await bob("POST", "/api/threads/edit/runs/edit-regenerate/prepare", other)).status, 404)
  })
})

describe("branches", () => {
  it("a branch from an older answer is a new thread of the user's holding the conversation up to it", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "trunk" })).status, 200)
    await ask("trunk", "qone")
    await ask("trunk", "qtwo")
    const trunk = await visible("trunk")
    const made = await alice("POST", "/api/threads/trunk/branches", { message_id: trunk[1].id, title: "Side" })
    assert.strictEqual(made.status, 200, made.text)
    const branch = made.json()
    assert.strictEqual(branch.parent_thread_id, "trunk")
    assert.strictEqual(branch.branched_from_message_id, trunk[1].id)
    assert.strictEqual(branch.workspace_clone_mode, "skipped_historical_turn")
    assert.isString(branch.parent_checkpoint_id)
    assert.deepStrictEqual(await texts(branch.thread_id), trunk.slice(0, 2).map(textOf))
    const state = (await alice("GET", `/api/threads/${branch.thread_id}/state`)).json()
    assert.strictEqual(state.values.title, "Side")
    const thread = (await alice("GET", `/api/threads/${branch.thread_id}`)).json()
    assert.strictEqual(thread.metadata.branch_parent_thread_id, "trunk")
    // the branch goes on by itself; the trunk is unchanged
    await ask(branch.thread_id, "qthree")
    assert.strictEqual((await texts(branch.thread_id)).length, 4)
    assert.deepStrictEqual(await texts("trunk"), trunk.map(textOf))
    assert.strictEqual((await bob("GET", `/api/threads/${branch.thread_id}`)).status, 404)
  })

  it("a branch from the latest answer holds every message; refusals", async () => {
    const trunk = await visible("trunk")
    const made = (await alice("POST", "/api/threads/trunk/branches", { message_id: trunk[3].id })).json()
    assert.deepStrictEqual(await texts(made.thread_id), trunk.map(textOf))
    assert.notStrictEqual(made.workspace_clone_mode, "skipped_historical_turn")
    // the app asks each answer's run for its workspace changes: the branch's seeded answers name a run of their own
    const page = (await alice("GET", `/api/threads/${made.thread_id}/messages/page`)).json()
    const runIds = [...new Set(page.data.map((row: { run_id: string }) => row.run_id))] as Array<string>
    assert.isAbove(runIds.length, 0)
    for (const runId of runIds) {
      const changes = await alice("GET", `/api/threads/${made.thread_id}/runs/${runId}/workspace-changes`)
      assert.strictEqual(changes.status, 200, `${runId}: ${changes.text}`)
      assert.strictEqual(changes.json().available, false)
    }
    assert.strictEqual((await bob("GET", `/api/threads/${made.thread_id}/runs/${runIds[0]}/workspace-changes`)).status, 404)
    assert.strictEqual((await alice("POST", "/api/threads/trunk/branches", { message_id: "nope" })).status, 404)
    // a question is no turn's end: as DeerFlow's, 409 (it made a branch holding the question's answer)
    const question = await alice("POST", "/api/threads/trunk/branches", { message_id: trunk[2].id })
    assert.strictEqual(question.status, 409, question.text)
    assert.strictEqual((await bob("POST", "/api/threads/trunk/branches", { message_id: trunk[3].id })).status, 404)
  })

  // DeerFlow's test_threads_router (test_branch_thread_from_older_assistant_turn_creates_truncated_thread): a branch
  // is named as its source chat is now (DeerFlow's display name), even from a turn before the chat was renamed
  it("is named as the chat is now, a rename since the turn included; a blank title is none", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "renamed" })).status, 200)
    await ask("renamed", "qone")
    await ask("renamed", "qtwo")
    const renamed = await alice("POST", "/api/threads/renamed/state", { values: { title: "Trip plans" } })
    assert.strictEqual(renamed.status, 200, renamed.text)
    const first = (await visible("renamed"))[1]
    for (const title of [undefined, "  "]) {
      const made = await alice("POST", "/api/threads/renamed/branches", { message_id: first.id, title })
      assert.strictEqual(made.status, 200, made.text)
      const id = made.json().thread_id
      assert.strictEqual((await alice("GET", `/api/threads/${id}/state`)).json().values.title, "Trip plans")
      const listed = (await alice("POST", "/api/threads/search", { limit: 100 })).json()
      assert.strictEqual(listed.find((t: any) => t.thread_id === id).values.title, "Trip plans")
    }
  })

  // DeerFlow's test_threads_router (test_branch_thread_rejects_sidecar_threads): the app's side conversation
  // (metadata.deerflow_sidecar) is not branched; it made a thread of the user's from it
  it("of a side conversation (the app's sidecar thread) is refused, and no thread is made", async () => {
    const made = await alice("POST", "/api/threads", { thread_id: "aside", metadata: { deerflow_sidecar: true } })
    assert.strictEqual(made.status, 200, made.text)
    await ask("aside", "qone")
    const answer = (await visible("aside"))[1]
    const before = (await alice("POST", "/api/threads/search", { limit: 100 })).json().length
    const refused = await alice("POST", "/api/threads/aside/branches", { message_id: answer.id })
    assert.strictEqual(refused.status, 409, refused.text)
    assert.include(refused.json().detail, "main conversation")
    assert.strictEqual((await alice("POST", "/api/threads/search", { limit: 100 })).json().length, before)
  })

  it("each inherited turn is a run of its own; regenerating the latest answer keeps the turns before it", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "stem" })).status, 200)
    await ask("stem", "qone")
    await ask("stem", "qtwo")
    await ask("stem", "qthree")
    const stem = await visible("stem")
    const branch = (await alice("POST", "/api/threads/stem/branches", { message_id: stem[5].id })).json()
    const page = (await alice("GET", `/api/threads/${branch.thread_id}/messages/page`)).json()
    const runOf = new Map<string, string>(page.data.map((row: any) => [row.content.id, row.run_id]))
    const turns = [0, 2, 4].map((i) => runOf.get(stem[i].id))
    assert.strictEqual(new Set(turns).size, 3)
    for (const i of [1, 3, 5]) assert.strictEqual(runOf.get(stem[i].id), turns[(i - 1) / 2])
    // the app's regenerate replaces the last turn's run only, from the checkpoint after the turns before it
    const prepared = await alice("POST", `/api/threads/${branch.thread_id}/runs/regenerate/prepare`, {
      message_id: stem[5].id
    })
    assert.strictEqual(prepared.status, 200, prepared.text)
    assert.strictEqual(prepared.json().target_run_id, turns[2])
    await runPrepared(branch.thread_id, prepared.json())
    const after = await texts(branch.thread_id)
    assert.deepStrictEqual(after.slice(0, 5), stem.slice(0, 5).map(textOf))
    assert.strictEqual(after.length, 6)
    assert.match(after[5]!, /^Answer \d+ to qthree$/)
    assert.notStrictEqual(after[5], textOf(stem[5]))
  })
})
