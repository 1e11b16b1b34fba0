/**
 * Per-user quotas (`gateway.quotas`): a user at `max_threads_per_user` gets no new thread, however it would be
 * made (create, a run or an upload on a new id, a stateless run, copy, branch), and one whose thread files would
 * pass `max_user_bytes` gets no upload, copy or branch of files; each is a 403 saying which quota, its limit and the
 * use, and leaves nothing behind. The other user is not affected; deleting frees the quota. A quota that is not a
 * non-negative integer stops the start, naming the field. Through the real `@langchain/langgraph-sdk` Client where
 * it has the call, `fetch` for DeerFlow's uploads and branches. The model is SCRIPTED.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Requests from "../../support/requests.js"
import { formOf } from "../../support/uploadForms.js"
import * as Quotas from "../../../src/programs/gateway/Quotas.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB, lastUserText, twoUsers } = Support

const human = (content: string) => ({ messages: [{ type: "human", content }] })

/** The error a call failed with. */
const errorOf = (call: Promise<unknown>): Promise<{ status?: number; message: string }> =>
  call.then(() => assert.fail("the call succeeded"), (error) => error)

/** The names of the files under `dir` (none when it does not exist). */
const filesUnder = (dir: string): ReadonlyArray<string> =>
  Fs.existsSync(dir)
    ? (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
      .filter((entry) => entry.isFile()).map((entry) => entry.name)
    : []

/** A gateway of alice and bob with these quotas, and an SDK client and a request helper for each. */
const startWith = async (quotas: Record<string, unknown>) => {
  const gateway = await Support.start({
    script: (body) => `You said: ${lastUserText(body)}`,
    config: { gateway: { ...twoUsers, quotas } }
  })
  return {
    gateway,
    alice: new Client({ apiUrl: gateway.url, apiKey: ALICE }),
    bob: new Client({ apiUrl: gateway.url, apiKey: BOB }),
    aliceRequest: Requests.as(() => gateway, ALICE),
    bobRequest: Requests.as(() => gateway, BOB)
  }
}

describe("max_threads_per_user", () => {
  let setup: Awaited<ReturnType<typeof startWith>>
  beforeAll(async () => {
    setup = await startWith({ max_threads_per_user: 2, max_user_bytes: 0 })
  })
  afterAll(() => setup?.gateway.stop())

  it("refuses the user's thread past it, however it would be made; the other user's are not counted", async () => {
    const { alice, bob, aliceRequest } = setup
    const first = await alice.threads.create()
    await alice.runs.wait(first.thread_id, "lead_agent", { input: human("hello") })
    await alice.threads.create({ threadId: "second" })

    const refused = await errorOf(alice.threads.create())
    assert.strictEqual(refused.status, 403)
    assert.include(refused.message, "gateway.quotas.max_threads_per_user")
    assert.include(refused.message, "user alice has 2 threads")
    assert.include(refused.message, "(2)")

    // every other way of making a thread: a run on a new id, a stateless run, a copy, DeerFlow's upload and branch
    assert.strictEqual(
      (await errorOf(alice.runs.wait("on-new-id", "lead_agent", { input: human("hi"), ifNotExists: "create" })))
        .status,
      403
    )
    assert.strictEqual((await errorOf(alice.runs.wait(null, "lead_agent", { input: human("hi") }))).status, 403)
    const batch = await errorOf(alice.runs.createBatch([{ assistantId: "lead_agent", input: human("hi") }]))
    assert.strictEqual(batch.status, 403)
    assert.include(batch.message, "max_threads_per_user")
    const copy = await errorOf(alice.threads.copy(first.thread_id))
    assert.strictEqual(copy.status, 403)
    assert.include(copy.message, "max_threads_per_user")
    const upload = await aliceRequest("POST", "/api/threads/by-upload/uploads", formOf("notes.txt", 10))
    assert.strictEqual(upload.status, 403, upload.text)
    assert.include(upload.json().detail, "max_threads_per_user")
    const answer = (await alice.threads.getState(first.thread_id)).values as { messages: Array<{ id: string }> }
    const branch = await aliceRequest("POST", `/api/threads/${first.thread_id}/branches`, {
      message_id: answer.messages.at(-1)!.id
    })
    assert.strictEqual(branch.status, 403, branch.text)
    assert.include(branch.json().detail, "max_threads_per_user")
    const goal = await aliceRequest("PUT", "/api/threads/by-goal/goal", { objective: "Ship it" })
    assert.strictEqual(goal.status, 403, goal.text)
    // nothing was made: still her two threads, and no files of a refused one
    const hers = (await alice.threads.search({ limit: 100 })).map((t) => t.thread_id)
    assert.sameMembers(hers, [first.thread_id, "second"])
    assert.strictEqual(await Support.statusOf(alice.threads.get("by-upload")), 404)
    assert.strictEqual(await Support.statusOf(alice.threads.get("by-goal")), 404)
    assert.notInclude(filesUnder(Path.join(setup.gateway.home, "users", "alice")), "notes.txt")

    // bob has a quota of his own
    await bob.threads.create()
    await bob.threads.create()
    assert.strictEqual((await errorOf(bob.threads.create())).status, 403)
  })

  it("a deleted thread frees its place", async () => {
    const { alice } = setup
    while ((await alice.threads.search({ limit: 100 })).length < 2) await alice.threads.create()
    assert.strictEqual((await errorOf(alice.threads.create())).status, 403)
    const [oldest] = await alice.threads.search({ limit: 1, sortBy: "created_at", sortOrder: "asc" })
    await alice.threads.delete(oldest!.thread_id)
    const made = await alice.threads.create({ threadId: "third" })
    assert.strictEqual(made.thread_id, "third")
    assert.strictEqual((await errorOf(alice.threads.create())).status, 403)
  })

  it("a scheduled task's run on a thread of its own is refused, saying why", async () => {
    const { alice, aliceRequest } = setup
    // (alice at her quota, whichever tests ran before)
    while ((await alice.threads.search({ limit: 100 })).length < 2) await alice.threads.create()
    const created = await aliceRequest("POST", "/api/scheduled-tasks", {
      context_mode: "fresh_thread_per_run",
      title: "Daily",
      prompt: "Summarize the news.",
      schedule_type: "cron",
      schedule_spec: { cron: "0 9 * * *" },
      timezone: "UTC"
    })
    assert.strictEqual(created.status, 200, created.text)
    const task = created.json()
    // (a manual trigger whose run the quota refuses is answered 403, as every quota refusal, saying why)
    const triggered = await aliceRequest("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.strictEqual(triggered.status, 403, triggered.text)
    assert.include(triggered.json().detail, "could not start its run: Thread quota reached: user alice has 2 threads")
    assert.include(triggered.json().detail, "max_threads_per_user allows (2); delete a thread to make another.")
    // the task's run is recorded failed, saying why; no thread was made
    const runs = (await aliceRequest("GET", `/api/scheduled-tasks/${task.id}/runs`)).json()
    assert.deepStrictEqual(runs.map((run: any) => [run.status, run.run_id]), [["failed", null]])
    assert.include(runs[0].error, "gateway.quotas.max_threads_per_user")
    assert.strictEqual((await alice.threads.search({ limit: 100 })).length, 2)
  })
})

describe("max_user_bytes", () => {
  let setup: Awaited<ReturnType<typeof startWith>>
  beforeAll(async () => {
    setup = await startWith({ max_threads_per_user: 100, max_user_bytes: 10_000 })
  })
  afterAll(() => setup?.gateway.stop())

  const uploaded = async (threadId: string) =>
    (await setup.aliceRequest("GET", `/api/threads/${threadId}/uploads/list`)).json().files.map((f: any) => f.filename)

  it("refuses an upload past it before writing it; the other user's files are not counted", async () => {
    const { aliceRequest, bobRequest, gateway } = setup
    assert.strictEqual((await aliceRequest("POST", "/api/threads/docs/uploads", formOf("a.txt", 6000))).status, 200)
    const refused = await aliceRequest("POST", "/api/threads/docs/uploads", formOf("b.txt", 6000))
    assert.strictEqual(refused.status, 403, refused.text)
    const detail: string = refused.json().detail
    assert.include(detail, "gateway.quotas.max_user_bytes")
    assert.include(detail, "the threads of user alice hold 5.9 KB")
    assert.include(detail, "would add 5.9 KB")
    assert.include(detail, "(9.8 KB)")
    assert.deepStrictEqual(await uploaded("docs"), ["a.txt"])
    // a refused upload on a new id makes no thread, and no file is anywhere on disk
    const elsewhere = await aliceRequest("POST", "/api/threads/fresh/uploads", formOf("c.txt", 6000))
    assert.strictEqual(elsewhere.status, 403, elsewhere.text)
    assert.strictEqual((await aliceRequest("GET", "/api/threads/fresh")).status, 404)
    assert.sameMembers([...filesUnder(Path.join(gateway.home, "users", "alice"))], ["a.txt"])
    // what fits still goes in (to the limit exactly)
    assert.strictEqual((await aliceRequest("POST", "/api/threads/docs/uploads", formOf("d.txt", 4000))).status, 200)
    // bob's files are his
    assert.strictEqual((await bobRequest("POST", "/api/threads/docs/uploads", formOf("a.txt", 6000))).status, 200)
  })

  it("refuses a copy or a branch whose files would pass it; deleting files frees it", async () => {
    const { alice, aliceRequest } = setup
    await alice.runs.wait("docs", "lead_agent", { input: human("read my files") })
    const threads = (await alice.threads.search({ limit: 100 })).length

    const copy = await errorOf(alice.threads.copy("docs"))
    assert.strictEqual(copy.status, 403)
    assert.include(copy.message, "max_user_bytes")
    const answer = (await alice.threads.getState("docs")).values as { messages: Array<{ id: string }> }
    const branch = await aliceRequest("POST", "/api/threads/docs/branches", { message_id: answer.messages.at(-1)!.id })
    assert.strictEqual(branch.status, 403, branch.text)
    assert.include(branch.json().detail, "max_user_bytes")
    assert.strictEqual((await alice.threads.search({ limit: 100 })).length, threads)

    // with the larger file deleted the thread's files (4000 bytes) fit twice, not three times
    const deleted = await aliceRequest("DELETE", "/api/threads/docs/uploads/a.txt")
    assert.strictEqual(deleted.status, 200, deleted.text)
    const copied = await alice.threads.copy("docs")
    assert.notStrictEqual(copied.thread_id, "docs")
    assert.strictEqual((await errorOf(alice.threads.copy("docs"))).status, 403)
    // and a deleted thread's files no longer count
    await alice.threads.delete(copied.thread_id)
    const made = await aliceRequest("POST", "/api/threads/docs/branches", { message_id: answer.messages.at(-1)!.id })
    assert.strictEqual(made.status, 200, made.text)
    assert.strictEqual(made.json().workspace_clone_mode, "current_thread_best_effort")
  })
})

describe("max_user_bytes, uploads at once", () => {
  let setup: Awaited<ReturnType<typeof startWith>>
  beforeAll(async () => {
    setup = await startWith({ max_user_bytes: 10_000 })
  })
  afterAll(() => setup?.gateway.stop())

  it("admits only what fits: the check and the write go together", async () => {
    const { aliceRequest, gateway } = setup
    const answers = await Promise.all(
      [1, 2, 3].map((i) => aliceRequest("POST", "/api/threads/race/uploads", formOf(`part${i}.txt`, 4000)))
    )
    assert.sameMembers(answers.map((answer) => answer.status), [200, 200, 403])
    assert.strictEqual(filesUnder(Path.join(gateway.home, "users", "alice")).length, 2)
  })
})

describe("measuring a user's files", () => {
  it("counts regular files in every directory, not links; stops past the limit, or at the deadline", async () => {
    const dir = Support.tempDir("antler-quota-")
    Fs.mkdirSync(Path.join(dir, "t1", "user-data", "outputs"), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "t1", "user-data", "a.txt"), "x".repeat(100))
    Fs.writeFileSync(Path.join(dir, "t1", "user-data", "outputs", "b.txt"), "x".repeat(50))
    Fs.symlinkSync("/etc/hostname", Path.join(dir, "t1", "user-data", "link"))
    Fs.symlinkSync("/usr", Path.join(dir, "t1", "user-data", "dirlink"))
    assert.deepStrictEqual(await Quotas.measure(dir, Infinity, performance.now() + 10_000), {
      bytes: 150,
      complete: true
    })
    assert.deepStrictEqual(await Quotas.measure(Path.join(dir, "none"), Infinity, performance.now() + 10_000), {
      bytes: 0,
      complete: true
    })
    // past the limit the rest is not walked (the use is known to be over)
    assert.deepStrictEqual(await Quotas.measure(dir, 10, performance.now() + 10_000), { bytes: 100, complete: true })
    assert.isFalse((await Quotas.measure(dir, Infinity, performance.now() - 1)).complete)
    const refused = new Quotas.QuotaExceeded({ reason: "unmeasured", user: "alice", limit: 1024, used: 10, adding: 5 })
    assert.include(refused.message, "could not be measured within 10 s")
    assert.include(refused.message, "gateway.quotas.max_user_bytes")
  })
})

describe("the open gateway", () => {
  let gateway: TestGateway
  beforeAll(async () => {
    gateway = await Support.start({
      script: (body) => `You said: ${lastUserText(body)}`,
      config: { gateway: { heartbeat_seconds: 1, quotas: { max_threads_per_user: 2 } } }
    })
  })
  afterAll(() => gateway?.stop())

  it("has the same limits; its local user is one user, the CLI's threads counted", async () => {
    const client = new Client({ apiUrl: gateway.url })
    // a thread the CLI made (no owner: the local user's)
    await Effect.runPromise(gateway.store.ensure("from-the-cli"))
    await client.threads.create()
    const refused = await errorOf(client.threads.create())
    assert.strictEqual(refused.status, 403)
    assert.include(refused.message, "user default has 2 threads")
  })
})

describe("max_store_bytes_per_user", () => {
  let setup: Awaited<ReturnType<typeof startWith>>
  beforeAll(async () => {
    setup = await startWith({ max_store_bytes_per_user: 2000 })
  })
  afterAll(() => setup?.gateway.stop())

  it("refuses a store item past it; a replaced value counts once, a deleted one frees its room", async () => {
    const { alice, bob } = setup
    const text = (n: number) => ({ text: "x".repeat(n) })
    await alice.store.putItem(["notes"], "first", text(1200))
    const refused = await errorOf(alice.store.putItem(["notes"], "second", text(900)))
    assert.strictEqual(refused.status, 403)
    assert.include(refused.message, "gateway.quotas.max_store_bytes_per_user")
    assert.include(refused.message, "user alice")
    assert.isNull(await alice.store.getItem(["notes"], "second"))
    // replacing the first item weighs its new value, not both
    await alice.store.putItem(["notes"], "first", text(1900))
    assert.strictEqual((await alice.store.getItem(["notes"], "first"))?.value.text, "x".repeat(1900))
    // bob's items are his own quota
    await bob.store.putItem(["notes"], "first", text(1900))
    await alice.store.deleteItem(["notes"], "first")
    await alice.store.putItem(["notes"], "second", text(900))
    assert.strictEqual((await alice.store.getItem(["notes"], "second"))?.value.text, "x".repeat(900))
  })
})

describe("a quota that is not a non-negative integer", () => {
  for (
    const [quotas, field, says] of [
      [{ max_user_bytes: -1 }, "gateway.quotas.max_user_bytes", "non-negative"],
      [{ max_threads_per_user: "many" }, "gateway.quotas.max_threads_per_user", "expected a number"],
      [{ max_threads_per_user: 2.5 }, "gateway.quotas.max_threads_per_user", "integer"],
      [{ max_store_bytes_per_user: -5 }, "gateway.quotas.max_store_bytes_per_user", "non-negative"]
    ] as const
  ) {
    it(`stops the start, naming the field (${JSON.stringify(quotas)})`, async () => {
      const started = await Support.start({ script: () => "unused", config: { gateway: { quotas } } }).then(
        (gateway) => gateway.stop().then(() => assert.fail("the gateway started")),
        (error: unknown) => String(error)
      )
      assert.include(started, field)
      assert.include(started, says)
    })
  }
})
