/**
 * DeerFlow's test_memory_thread_meta_isolation: over the thread store DeerFlow's `database.backend: memory` picks (which
 * Antler reads as SQLite, with a warning), each user sees and changes only their own threads. DeerFlow's store reads
 * the user from a context variable; Antler's gateway names the user of each request, so
 * `test_no_context_raises` (a request without a user is a 401 here: Isolation.test) and
 * `test_explicit_none_bypasses_filter` (the migration escape hatch; Antler's CLI reads the store as its own) do
 * not apply.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-thread-meta-0000"
const BOB = "bob-token-thread-meta-000000"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Hello.",
    config: {
      database: { backend: "memory" },
      gateway: { auth: { tokens: [{ token: ALICE, user: "user-a" }, { token: BOB, user: "user-b" }] } }
    }
  })
})
afterAll(() => gateway?.stop())

const create = async (as: typeof alice, threadId: string, metadata: Record<string, unknown> = {}) => {
  const made = await as("POST", "/threads", { thread_id: threadId, metadata })
  assert.strictEqual(made.status, 200, made.text)
}

const ids = async (as: typeof alice) =>
  (await as("POST", "/threads/search", { limit: 100 })).json().map((t: any) => t.thread_id)

describe("test_memory_thread_meta_isolation", () => {
  it("test_search_isolation", async () => {
    await create(alice, "t-alpha-search")
    await create(bob, "t-beta-search")
    assert.include(await ids(alice), "t-alpha-search")
    assert.notInclude(await ids(alice), "t-beta-search")
    assert.include(await ids(bob), "t-beta-search")
    assert.notInclude(await ids(bob), "t-alpha-search")
  })

  it("test_get_isolation", async () => {
    await create(alice, "t-alpha-get", { display_name: "A's thread" })
    assert.strictEqual((await bob("GET", "/threads/t-alpha-get")).status, 404)
    const own = await alice("GET", "/threads/t-alpha-get")
    assert.strictEqual(own.status, 200, own.text)
    assert.strictEqual(own.json().metadata.display_name, "A's thread")
  })

  it("test_update_display_name_denied", async () => {
    await create(alice, "t-alpha-name")
    const rename = await bob("POST", "/threads/t-alpha-name/state", { values: { title: "hacked" } })
    assert.strictEqual(rename.status, 404, rename.text)
    const renamed = await alice("POST", "/threads/t-alpha-name/state", { values: { title: "original" } })
    assert.strictEqual(renamed.status, 200, renamed.text)
    assert.strictEqual((await bob("POST", "/threads/t-alpha-name/state", { values: { title: "hacked" } })).status, 404)
    assert.strictEqual((await alice("GET", "/threads/t-alpha-name/state")).json().values.title, "original")
  })

  // the status is the runs': a run bob starts on alice's thread is refused, and her thread stays idle
  it("test_update_status_denied", async () => {
    await create(alice, "t-alpha-status")
    const run = await bob("POST", "/threads/t-alpha-status/runs/wait", { input: Support.userInput("hi") })
    assert.strictEqual(run.status, 404, run.text)
    assert.strictEqual((await alice("GET", "/threads/t-alpha-status")).json().status, "idle")
  })

  it("test_update_metadata_denied", async () => {
    await create(alice, "t-alpha-meta", { key: "original" })
    assert.strictEqual((await bob("PATCH", "/threads/t-alpha-meta", { metadata: { key: "hacked" } })).status, 404)
    assert.strictEqual((await alice("GET", "/threads/t-alpha-meta")).json().metadata.key, "original")
  })

  it("test_delete_denied", async () => {
    await create(alice, "t-alpha-delete")
    assert.strictEqual((await bob("DELETE", "/threads/t-alpha-delete")).status, 404)
    assert.strictEqual((await alice("GET", "/threads/t-alpha-delete")).status, 200)
  })
})
