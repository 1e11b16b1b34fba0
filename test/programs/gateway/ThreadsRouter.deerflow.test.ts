/**
 * DeerFlow's test_threads_router, the parts its app sees that no other test ports: a state update while a run
 * holds the thread is refused in DeerFlow's words (`test_update_state_rejects_run_owned_by_another_worker`), and a
 * branch is named after its source's title, trimmed, a branch of a branch without the `Branch:` prefixes DeerFlow's
 * earlier branches were titled with (`test_branch_display_name_strips_legacy_branch_prefix_only_for_branch_sources`),
 * and a deletion that fails is DeerFlow's generic 500, its cause (a host path) logged, not answered
 * (`test_delete_thread_data_returns_generic_500_error`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { StoreError } from "../../../src/services/RunContext.js"
import { captureLogs } from "../../support/logs.js"
import { until } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-threads-router-00"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }] } } }
  })
})
afterAll(() => gateway?.stop())

const ask = async (threadId: string, question: string) => {
  const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
    input: { messages: [{ type: "human", content: question }] }
  })
  assert.strictEqual(run.status, 200, run.text)
}

const lastAnswer = async (threadId: string) => {
  const messages = Support.visible((await alice("GET", `/api/threads/${threadId}/state`)).json().values.messages)
  return messages.findLast((m: { type: string }) => m.type === "ai")
}

const titleOf = async (threadId: string) => (await alice("GET", `/api/threads/${threadId}/state`)).json().values.title

const setTitle = async (threadId: string, title: string) => {
  const set = await alice("POST", `/api/threads/${threadId}/state`, { values: { title } })
  assert.strictEqual(set.status, 200, set.text)
}

const branch = async (threadId: string) => {
  const answer = await lastAnswer(threadId)
  const made = await alice("POST", `/api/threads/${threadId}/branches`, { message_id: answer.id })
  assert.strictEqual(made.status, 200, made.text)
  return made.json().thread_id as string
}

describe("DeerFlow's threads router", () => {
  it("a state update while a run holds the thread is a 409 in DeerFlow's words, and writes nothing", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "held" })).status, 200)
    await setTitle("held", "Before the run")
    const run = (await alice("POST", "/api/threads/held/runs", {
      input: { messages: [{ type: "human", content: "hang on" }] }
    })).json()
    await until(
      async () => (await alice("GET", `/api/threads/held/runs/${run.run_id}`)).json().status === "running",
      "the run running"
    )
    const refused = await alice("POST", "/api/threads/held/state", { values: { title: "must not write" } })
    assert.strictEqual(refused.status, 409, refused.text)
    assert.strictEqual(refused.json().detail, "Thread has a run in flight. Update state after the run finishes.")
    const cancelled = await alice("POST", `/api/threads/held/runs/${run.run_id}/cancel?wait=true`)
    assert.isBelow(cancelled.status, 300, cancelled.text)
    assert.strictEqual(await titleOf("held"), "Before the run")
    // once the run has ended, the same update is taken
    await setTitle("held", "After the run")
    assert.strictEqual(await titleOf("held"), "After the run")
  })

  it("a branch is named after its source's title; a branch of a branch drops the `Branch:` prefixes", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "original" })).status, 200)
    await ask("original", "first question")
    // a chat (not a branch) keeps whatever its title says, trimmed
    await setTitle("original", "  Branch: Original chat  ")
    const first = await branch("original")
    assert.strictEqual(await titleOf(first), "Branch: Original chat")
    // a branch titled as DeerFlow's earlier branches were: its branch is named after the chat it came from
    await setTitle(first, "Branch: Branch: Original chat")
    const second = await branch(first)
    assert.strictEqual(await titleOf(second), "Original chat")
    assert.isTrue((await alice("GET", `/api/threads/${second}`)).json().metadata.deerflow_branch)
    // a title the request gives is the branch's, as it is written
    const answer = await lastAnswer(first)
    const named = await alice("POST", `/api/threads/${first}/branches`, {
      message_id: answer.id,
      title: "Branch: mine"
    })
    assert.strictEqual(named.status, 200, named.text)
    assert.strictEqual(await titleOf(named.json().thread_id), "Branch: mine")
    // a title of only prefixes leaves the branch untitled
    await setTitle(first, "Branch:  branch: ")
    assert.isNull(await titleOf(await branch(first)))
  })
})

describe("DeerFlow's threads router: a deletion that fails", () => {
  const SECRET = "/srv/secret/antler-home/users/alice/threads"
  const { capture, logged } = captureLogs()
  let failing: TestGateway
  const asAlice = Requests.as(() => failing, ALICE)

  beforeAll(async () => {
    failing = await Support.start({
      script: Support.echoOrHang,
      config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }] } } },
      logger: capture,
      wrapStore: (store) => ({
        ...store,
        delete: (threadId) =>
          threadId.startsWith("doomed")
            ? Effect.fail(new StoreError({ operation: "delete", message: `Cannot remove ${SECRET}: EACCES` }))
            : store.delete(threadId)
      })
    })
  })
  afterAll(() => failing?.stop())

  it("is a 500 in DeerFlow's words, naming no path; the cause is in the gateway's log", async () => {
    assert.strictEqual((await asAlice("POST", "/api/threads", { thread_id: "doomed" })).status, 200)
    for (const path of ["/api/threads/doomed", "/threads/doomed"]) {
      const failed = await asAlice("DELETE", path)
      assert.strictEqual(failed.status, 500, failed.text)
      assert.strictEqual(failed.json().detail, "Failed to delete local thread data.")
      assert.notInclude(failed.text, SECRET)
    }
    assert.isTrue(logged.some((line) => line.includes(SECRET) && line.includes("doomed")), logged.join("\n"))
    // another thread is deleted as ever
    assert.strictEqual((await asAlice("POST", "/api/threads", { thread_id: "fine" })).status, 200)
    assert.strictEqual((await asAlice("DELETE", "/api/threads/fine")).status, 200)
    assert.strictEqual((await asAlice("GET", "/api/threads/fine")).status, 404)
  })
})
