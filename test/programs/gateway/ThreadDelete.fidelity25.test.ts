/**
 * Deleting a thread answers as the caller's route expects. DeerFlow's own route, `DELETE /api/threads/{id}` (its
 * web app calls it after the SDK's delete, to remove the thread's local data), answers DeerFlow's 200
 * `{success: true, message: "Deleted local thread data for <id>"}` (DeerFlow's test_threads_router
 * `test_delete_thread_route_cleans_thread_directory`); LangGraph's routes (`/threads/{id}`,
 * `/api/langgraph/threads/{id}`) answer LangGraph's 204 without a body, and the real LangGraph SDK's
 * `threads.delete` works under every prefix. Over the real gateway, its files on disk.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-thread-delete-25"
const BOB = "bob-token-thread-delete-25"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: {
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } }
    }
  })
})
afterAll(() => gateway?.stop())

/** A thread of alice's with a file in its outputs; the thread's directory on disk. */
const made = async (threadId: string) => {
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: threadId })).status, 200)
  const dir = threadPaths(gateway.home, "alice", `${threadId}${ThreadIds.tagOf("alice")}`)
  Fs.mkdirSync(dir.outputs, { recursive: true })
  Fs.writeFileSync(Path.join(dir.outputs, "report.md"), "# Report\n")
  return dir
}

describe("DELETE of a thread, DeerFlow's route and LangGraph's", () => {
  it("DeerFlow's /api/threads/{id}: 200 with DeerFlow's body; the thread and its files are gone", async () => {
    const dir = await made("thread-route")
    const deleted = await alice("DELETE", "/api/threads/thread-route")
    assert.strictEqual(deleted.status, 200, deleted.text)
    assert.match(deleted.headers.get("content-type") ?? "", /^application\/json/)
    assert.deepStrictEqual(deleted.json(), { success: true, message: "Deleted local thread data for thread-route" })
    assert.isFalse(Fs.existsSync(Path.join(dir.outputs, "report.md")))
    assert.strictEqual((await alice("GET", "/api/threads/thread-route")).status, 404)
    // a second delete: 404, which DeerFlow's app takes as already deleted
    assert.strictEqual((await alice("DELETE", "/api/threads/thread-route")).status, 404)
  })

  it("LangGraph's /threads/{id} and /api/langgraph/threads/{id}: 204 without a body", async () => {
    for (const prefix of ["", "/api/langgraph"]) {
      const threadId = `langgraph${prefix.replaceAll("/", "-")}`
      const dir = await made(threadId)
      const deleted = await alice("DELETE", `${prefix}/threads/${threadId}`)
      assert.strictEqual(deleted.status, 204, prefix)
      assert.strictEqual(deleted.text, "")
      assert.isFalse(Fs.existsSync(Path.join(dir.outputs, "report.md")))
      assert.strictEqual((await alice("GET", `/api/threads/${threadId}`)).status, 404)
    }
  })

  it("another user's thread is not found under DeerFlow's route, and stays", async () => {
    await made("alices-own")
    const refused = await bob("DELETE", "/api/threads/alices-own")
    assert.strictEqual(refused.status, 404)
    assert.notInclude(refused.text, "Deleted local thread data")
    assert.strictEqual((await alice("GET", "/api/threads/alices-own")).status, 200)
  })

  it("the LangGraph SDK's threads.delete works under every prefix (200 with a body or 204)", async () => {
    for (const prefix of ["", "/api", "/api/langgraph"]) {
      const threadId = `sdk${prefix.replaceAll("/", "-")}`
      await made(threadId)
      const client = new Client({
        apiUrl: `${gateway.url}${prefix}`,
        apiKey: null,
        defaultHeaders: { authorization: `Bearer ${ALICE}` }
      })
      await client.threads.delete(threadId)
      assert.strictEqual((await alice("GET", `/api/threads/${threadId}`)).status, 404, prefix)
    }
  })
})
