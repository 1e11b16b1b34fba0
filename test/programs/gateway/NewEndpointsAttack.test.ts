/**
 * Attacks on the LangGraph endpoints added together (threads.count, threads.copy, runs.delete, `select`, a run's
 * `kwargs` and `metadata`, join answering the run's last values) by another user, a hostile client and malformed
 * bodies: each user reaches only their own threads and runs, secrets sent with a run are not kept in its
 * `kwargs`, a refused body is a 4xx naming what was wrong, and a deleted run is gone. The model is SCRIPTED.
 */
import type { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB, statusOf } = Support

const script = Support.echoOrHang

let gateway: TestGateway
let alice: Client
let bob: Client

beforeAll(async () => {
  ;({ alice, bob, gateway } = await Support.startTwoUsers(script))
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

const raw = Requests.raw(() => gateway)

/** Alice's thread with one finished run. */
const aliceThread = async (metadata: Record<string, unknown> = {}) => {
  const thread = await alice.threads.create({ metadata })
  await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
  const [run] = await alice.runs.list(thread.thread_id)
  return { threadId: thread.thread_id, runId: run!.run_id }
}

describe("another user", () => {
  it("cannot count, copy, delete, join, cancel or read alice's threads and runs, by her ids or through his", async () => {
    const tag = crypto.randomUUID()
    const { runId, threadId } = await aliceThread({ tag })
    const bobs = await bob.threads.create({ metadata: { tag: "bob" } })
    const bobsThread = bobs.thread_id

    // count and search: no filter (metadata, values, status) finds hers
    assert.strictEqual(await bob.threads.count({ metadata: { tag } }), 0)
    assert.strictEqual(await bob.threads.count({ values: { title: null } as any, metadata: { tag } }), 0)
    assert.deepStrictEqual(await bob.threads.search({ ids: [threadId], select: ["thread_id"] }), [])
    assert.deepStrictEqual(await bob.threads.search({ metadata: { tag }, select: ["thread_id"] }), [])

    // copy of her thread: 404, nothing made
    const before = await bob.threads.count()
    assert.strictEqual(await statusOf(bob.threads.copy(threadId)), 404)
    assert.strictEqual(await bob.threads.count(), before)

    // her run, by her thread's id or through his own thread
    for (const thread of [threadId, bobsThread]) {
      assert.strictEqual(await statusOf(bob.runs.get(thread, runId)), 404)
      assert.strictEqual(await statusOf(bob.runs.delete(thread, runId)), 404)
      assert.strictEqual(await statusOf(bob.runs.join(thread, runId)), 404)
      assert.strictEqual(await statusOf(bob.runs.cancel(thread, runId)), 404)
      assert.strictEqual((await raw(BOB, "GET", `/threads/${thread}/runs/${runId}/stream`)).status, 404)
    }
    // the stored id of her thread is no id of his either
    const stored = `${threadId}${ThreadIds.tagOf("alice")}`
    assert.strictEqual(await statusOf(bob.threads.copy(stored)), 404)
    assert.strictEqual(await statusOf(bob.runs.delete(stored, runId)), 404)
    // her run is still there
    assert.strictEqual((await alice.runs.get(threadId, runId)).status, "success")
  })
})

describe("select", () => {
  it("refuses prototype keys and names of no field, on each route that takes it", async () => {
    const { threadId } = await aliceThread()
    for (const name of ["__proto__", "constructor", "toString", "hasOwnProperty", "kwargs.config"]) {
      const searched = await raw(ALICE, "POST", "/threads/search", JSON.stringify({ select: [name] }))
      assert.strictEqual(searched.status, 422, name)
      const assistants = await raw(ALICE, "POST", "/assistants/search", JSON.stringify({ select: [name] }))
      assert.strictEqual(assistants.status, 422, name)
      const runs = await raw(ALICE, "GET", `/threads/${threadId}/runs?select=${encodeURIComponent(name)}`)
      assert.strictEqual(runs.status, 422, name)
    }
    // a select that is not a list of names
    for (const select of ["thread_id", { __proto__: 1 }, [1], [null]]) {
      const answered = await raw(ALICE, "POST", "/threads/search", JSON.stringify({ select }))
      assert.strictEqual(answered.status, 422, JSON.stringify(select))
    }
  })
})

describe("malformed bodies", () => {
  it("of count, copy and runs.delete are refused with 4xx, never a 500", async () => {
    const { runId, threadId } = await aliceThread()
    const bodies = [
      "[]",
      "\"x\"",
      "null",
      "1",
      "{",
      JSON.stringify({ metadata: [] }),
      JSON.stringify({ values: 1 }),
      JSON.stringify({ status: 5 }),
      JSON.stringify({ metadata: { __proto__: { x: 1 } } }),
      "{\"__proto__\": {\"polluted\": true}, \"metadata\": {\"__proto__\": {}}}",
      "[".repeat(5000)
    ]
    for (const body of bodies) {
      const counted = await raw(ALICE, "POST", "/threads/count", body)
      assert.isBelow(counted.status, 500, `count ${body.slice(0, 40)}: ${await counted.text()}`)
    }
    assert.isUndefined(({} as any).polluted)
    // copy takes no body; one sent is no problem
    const copied = await raw(ALICE, "POST", `/threads/${threadId}/copy`, "{\"thread_id\":\"../../x\"}")
    assert.strictEqual(copied.status, 200)
    assert.notStrictEqual(((await copied.json()) as any).thread_id, "../../x")
    // hostile ids in paths
    // (".." and "%2e%2e" are resolved by fetch itself: see the raw request below)
    for (const id of ["a%2Fb", "x".repeat(5000), "%00", "%2e%2e%2f%2e%2e"]) {
      const copy = await raw(ALICE, "POST", `/threads/${id}/copy`)
      assert.include([400, 404, 422], copy.status, `copy ${id}`)
      const deleted = await raw(ALICE, "DELETE", `/threads/${threadId}/runs/${id}`)
      assert.include([400, 404, 422], deleted.status, `delete ${id}`)
    }
    // sent as it is, ".." is not resolved by the gateway into the thread's path (DELETE /threads/{id})
    for (const id of ["..", "%2e%2e"]) {
      const status = await new Promise<number>((resolve, reject) => {
        const url = new URL(gateway.url)
        const request = Http.request({
          host: url.hostname,
          port: url.port,
          method: "DELETE",
          path: `/threads/${threadId}/runs/${id}`,
          headers: { authorization: `Bearer ${ALICE}` }
        }, (response) => {
          response.resume()
          resolve(response.statusCode ?? 0)
        })
        request.on("error", reject)
        request.end()
      })
      assert.include([400, 404, 422], status, `raw delete ${id}`)
    }
    assert.strictEqual((await alice.runs.get(threadId, runId)).status, "success")
  })
})

describe("a run's kwargs", () => {
  it("keep no request header, and no bearer token or URL credentials sent in its config", async () => {
    const thread = await alice.threads.create()
    const token = "tok-0123456789abcdefghijklmnopqrstuv"
    const answered = await raw(
      ALICE,
      "POST",
      `/threads/${thread.thread_id}/runs/wait`,
      JSON.stringify({
        assistant_id: "lead_agent",
        input: human("hi"),
        config: { configurable: { authorization: `Bearer ${token}` } },
        metadata: { callback: `https://user:${token}@example.com/hook` }
      }),
      { "x-api-key": `secret-header-${token}`, "x-custom": token }
    )
    assert.strictEqual(answered.status, 200)
    // a webhook is refused (Antler calls none), without its credentials in the refusal or any run kept
    const hooked = await raw(
      ALICE,
      "POST",
      `/threads/${thread.thread_id}/runs/wait`,
      JSON.stringify({ assistant_id: "lead_agent", input: human("hi"), webhook: `https://user:${token}@example.com/h` })
    )
    assert.strictEqual(hooked.status, 422)
    assert.notInclude(await hooked.text(), token)
    const text = JSON.stringify(await alice.runs.list(thread.thread_id))
    assert.notInclude(text, token)
    assert.notInclude(text, ALICE)
    assert.notInclude(text, "x-api-key")
    assert.notInclude(text, "alice\"")
  })
})

describe("runs.delete", () => {
  it("refuses a queued run (409) and leaves it to run", async () => {
    const thread = await alice.threads.create()
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    const queued = await alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("after"),
      multitaskStrategy: "enqueue"
    })
    assert.strictEqual((await alice.runs.get(thread.thread_id, queued.run_id)).status, "pending")
    assert.strictEqual(await statusOf(alice.runs.delete(thread.thread_id, queued.run_id)), 409)
    assert.strictEqual(await statusOf(alice.runs.delete(thread.thread_id, hanging.run_id)), 409)
    await alice.runs.cancel(thread.thread_id, hanging.run_id, true)
    await alice.runs.join(thread.thread_id, queued.run_id)
    assert.strictEqual((await alice.runs.get(thread.thread_id, queued.run_id)).status, "success")
  })

  it("leaves no way to join the deleted run again: its join and its stream are 404s", async () => {
    const { runId, threadId } = await aliceThread()
    await alice.runs.delete(threadId, runId)
    assert.strictEqual(await statusOf(alice.runs.get(threadId, runId)), 404)
    assert.strictEqual(await statusOf(alice.runs.join(threadId, runId)), 404)
    assert.strictEqual((await raw(ALICE, "GET", `/threads/${threadId}/runs/${runId}/stream`)).status, 404)
  })
})

describe("threads.copy", () => {
  it("of a thread with a run going on: a copy of what was written, idle, with no run; the run goes on", async () => {
    const thread = await alice.threads.create()
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    for (let i = 0; i < 200 && (await alice.runs.get(thread.thread_id, hanging.run_id)).status !== "running"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const copy = await alice.threads.copy(thread.thread_id)
    assert.strictEqual(copy.status, "idle")
    assert.deepStrictEqual(await alice.runs.list(copy.thread_id), [])
    // the copy takes a run of its own at once
    await alice.runs.wait(copy.thread_id, "lead_agent", { input: human("go") })
    assert.strictEqual((await alice.runs.get(thread.thread_id, hanging.run_id)).status, "running")
    await alice.runs.cancel(thread.thread_id, hanging.run_id, true)
  })

  it("copies no symbolic link (a host file linked from a thread's outputs stays out of the copy)", async () => {
    const { threadId } = await aliceThread()
    const root = Path.join(gateway.home, "users", "alice", "threads", `${threadId}${ThreadIds.tagOf("alice")}`, "user-data")
    const outputs = Path.join(root, "outputs")
    Fs.mkdirSync(outputs, { recursive: true })
    const host = Path.join(gateway.home, "host-secret.txt")
    Fs.writeFileSync(host, "host secret\n")
    Fs.symlinkSync(host, Path.join(outputs, "link.txt"))
    Fs.symlinkSync(Path.dirname(host), Path.join(outputs, "dir-link"))
    const copy = await alice.threads.copy(threadId)
    const copied = Path.join(
      gateway.home, "users", "alice", "threads", `${copy.thread_id}${ThreadIds.tagOf("alice")}`, "user-data", "outputs"
    )
    assert.isFalse(Fs.existsSync(Path.join(copied, "link.txt")))
    assert.isFalse(Fs.existsSync(Path.join(copied, "dir-link")))
    const read = await raw(ALICE, "GET", `/api/threads/${copy.thread_id}/artifacts/mnt/user-data/outputs/link.txt`)
    assert.strictEqual(read.status, 404)
  })
})
