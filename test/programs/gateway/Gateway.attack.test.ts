/**
 * Attacks on the gateway by another token user and a hostile client, each found to work once: a user filling the
 * disk every user shares with custom agents (no bound on how many), and a `Last-Event-ID` that is no event id
 * (`0x10`, `1e3`) read as one. The model is SCRIPTED; the clients speak HTTP as a hostile one would.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CustomAgents from "../../../src/programs/CustomAgents.js"
import * as ThreadStream from "../../../src/programs/gateway/ThreadStream.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB } = Support

let gateway: TestGateway

beforeAll(async () => {
  ;({ gateway } = await Support.startTwoUsers(Support.echoOrHang))
})
afterAll(() => gateway?.stop())

const raw = Requests.raw(() => gateway)
const call = (token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  raw(token, method, path, body === undefined ? undefined : JSON.stringify(body), headers)

const detail = async (response: Response) => ((await response.json()) as { detail: string }).detail

describe("custom agents of one user", () => {
  it(`are at most ${CustomAgents.MAX_AGENTS_PER_USER}: the next is a 409 naming the bound`, async () => {
    const soul = "s".repeat(CustomAgents.MAX_SOUL_BYTES - 16)
    for (let i = 0; i < CustomAgents.MAX_AGENTS_PER_USER; i++) {
      const made = await call(BOB, "POST", "/api/agents", { name: `filler-${i}`, soul })
      assert.strictEqual(made.status, 201, `agent ${i}: ${await made.text()}`)
    }
    const refused = await call(BOB, "POST", "/api/agents", { name: "one-too-many", soul })
    assert.strictEqual(refused.status, 409)
    assert.strictEqual(
      await detail(refused),
      `The agent one-too-many was not created: a user has at most ${CustomAgents.MAX_AGENTS_PER_USER} agents; ` +
        "delete one first."
    )
    const bobs = Path.join(gateway.home, "users", "bob", "agents")
    assert.isFalse(Fs.existsSync(Path.join(bobs, "one-too-many")))
    assert.strictEqual(Fs.readdirSync(bobs).length, CustomAgents.MAX_AGENTS_PER_USER)
    // an agent he has is still changed; alice's bound is hers
    assert.strictEqual((await call(BOB, "PUT", "/api/agents/filler-0", { description: "changed" })).status, 200)
    assert.strictEqual((await call(ALICE, "POST", "/api/agents", { name: "mine", soul: "hers" })).status, 201)
    // one deleted makes room for one
    assert.strictEqual((await call(BOB, "DELETE", "/api/agents/filler-1")).status, 204)
    assert.strictEqual((await call(BOB, "POST", "/api/agents", { name: "one-too-many", soul })).status, 201)
    assert.strictEqual((await call(BOB, "POST", "/api/agents", { name: "two-too-many", soul })).status, 409)
  }, 120_000)
})

describe("a Last-Event-ID that is no event id", () => {
  const NOT_IDS = ["0x10", "1e3", "0b1", "1.0", "+1", "99999999999999999999", "-5"]

  it("joining a run is a 400 naming the header, for each spelling Number would read", async () => {
    const thread = (await (await call(ALICE, "POST", "/threads", {})).json()) as { thread_id: string }
    const run = (await (await call(ALICE, "POST", `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("hello")
    })).json()) as unknown
    assert.isDefined(run)
    const runs = (await (await call(ALICE, "GET", `/threads/${thread.thread_id}/runs`)).json()) as Array<any>
    const path = `/threads/${thread.thread_id}/runs/${runs[0].run_id}/stream`
    for (const id of NOT_IDS) {
      const answer = await call(ALICE, "GET", path, undefined, { "last-event-id": id })
      assert.strictEqual(answer.status, 400, id)
      assert.strictEqual(
        await detail(answer),
        `Last-Event-ID must be an event id of this run, got ${JSON.stringify(id)}.`
      )
    }
    // an id, and the SDK's -1, still rejoin
    for (const id of ["1", "-1", "007"]) {
      const answer = await call(ALICE, "GET", path, undefined, { "last-event-id": id })
      assert.strictEqual(answer.status, 200, id)
      await answer.body?.cancel()
    }
  })

  it("the thread stream's cursor (run:id) reads digits only", () => {
    for (const id of NOT_IDS) assert.isUndefined(ThreadStream.parseCursor(`run-1:${id}`), id)
    assert.deepStrictEqual(ThreadStream.parseCursor("run-1:16"), { _tag: "after", runId: "run-1", id: 16 })
  })
})

// a thread's metadata and title are answered with each thread of a search: 40 threads of 15 MB metadata made a
// search a 500 (RangeError: Invalid string length) after the gateway's memory grew by 1.7 GB building it
describe("what every search answers", () => {
  const huge = { x: "a".repeat(15 * 1024 * 1024) }
  const count = async (token: string) => (await (await call(token, "POST", "/threads/count", {})).json()) as number

  it("a thread's metadata past 64 KiB is a 422 naming it, made or patched, and nothing is stored", async () => {
    const before = await count(BOB)
    const made = await call(BOB, "POST", "/threads", { metadata: huge })
    assert.strictEqual(made.status, 422)
    assert.match(await detail(made), /^metadata: .*15728648 bytes of JSON, more than the 65536 \(64 KiB\) metadata/)
    assert.strictEqual(await count(BOB), before)
    // one just within is kept; patches that would merge past the bound are refused, the thread's metadata kept
    const within = { a: "b".repeat(40 * 1024) }
    const thread = (await (await call(BOB, "POST", "/threads", { metadata: within })).json()) as any
    assert.deepStrictEqual(thread.metadata, within)
    const grown = await call(BOB, "PATCH", `/threads/${thread.thread_id}`, { metadata: { c: "d".repeat(40 * 1024) } })
    assert.strictEqual(grown.status, 422)
    assert.match(await detail(grown), /^metadata: the thread's metadata would be \d+ bytes of JSON, more than 65536/)
    const after = (await (await call(BOB, "GET", `/threads/${thread.thread_id}`)).json()) as any
    assert.deepStrictEqual(after.metadata, within)
    // a patch that replaces a key stays within
    const replaced = await call(BOB, "PATCH", `/threads/${thread.thread_id}`, { metadata: { a: "small" } })
    assert.strictEqual(replaced.status, 200)
  })

  it("a run's metadata past 64 KiB is a 422, and no run starts", async () => {
    const thread = (await (await call(BOB, "POST", "/threads", {})).json()) as any
    for (const body of [{ metadata: huge }, { config: { metadata: huge } }]) {
      const refused = await call(BOB, "POST", `/threads/${thread.thread_id}/runs`, {
        assistant_id: "lead_agent",
        input: Support.userInput("hello"),
        ...body
      })
      assert.strictEqual(refused.status, 422)
      assert.match(await detail(refused), /metadata: .*bytes of JSON, more than the 65536/)
    }
    assert.deepStrictEqual(await (await call(BOB, "GET", `/threads/${thread.thread_id}/runs`)).json(), [])
  })

  // (40 runs with a 15 MB key beside their messages made the thread's run list a 500, the gateway 1.7 GB larger)
  it("what a run keeps besides its messages past 128 KiB is a 422, and no run is kept", async () => {
    const thread = (await (await call(BOB, "POST", "/threads", {})).json()) as any
    const runs = `/threads/${thread.thread_id}/runs/wait`
    const big = "j".repeat(140 * 1024)
    for (const extra of [
      { input: { ...Support.userInput("hi"), junk: huge.x } },
      { input: Support.userInput("hi"), context: { junk: big } },
      { input: Support.userInput("hi"), config: { configurable: { junk: big } } },
      { input: Support.userInput("hi"), config: { context: { junk: big } } },
      { input: Support.userInput("hi"), config: { tags: [big] } }
    ]) {
      const refused = await call(BOB, "POST", runs, { assistant_id: "lead_agent", ...extra })
      assert.strictEqual(refused.status, 422, Object.keys(extra).join())
      assert.match(
        await detail(refused),
        /^input \(besides its messages\), context and config: \d+ bytes of JSON, more than 131072 \(128 KiB\)/
      )
    }
    assert.deepStrictEqual(await (await call(BOB, "GET", `/threads/${thread.thread_id}/runs`)).json(), [])
    // a stateless run and a cron are refused alike; a small key beside the messages is taken
    assert.strictEqual((await call(BOB, "POST", "/runs/wait", { input: { junk: big } })).status, 422)
    const cron = await call(BOB, "POST", "/runs/crons", { schedule: "0 0 * * *", input: { junk: big } })
    assert.strictEqual(cron.status, 422)
    const taken = await call(BOB, "POST", runs, {
      assistant_id: "lead_agent",
      input: { ...Support.userInput("hi"), note: "small" },
      context: { note: "small" }
    })
    assert.strictEqual(taken.status, 200)
  })

  it("a title set through the state is bounded as a run's input.title", async () => {
    const thread = (await (await call(BOB, "POST", "/threads", {})).json()) as any
    const state = `/threads/${thread.thread_id}/state`
    const refused = await call(BOB, "POST", state, { values: { title: "t".repeat(1001) } })
    assert.strictEqual(refused.status, 422)
    assert.strictEqual(await detail(refused), "values.title: at most 1000 characters.")
    const taken = await call(BOB, "POST", state, { values: { title: "t".repeat(1000) } })
    assert.strictEqual(taken.status, 200)
  })
})

describe("a refusal of a huge value", () => {
  it("names what was wrong without echoing the value: a 2 MB metadata's 422 stays small", async () => {
    const huge = { metadata: { blob: "y".repeat(2_000_000) } }
    for (const path of ["/runs", "/threads"]) {
      const refused = await call(BOB, "POST", path, huge)
      const text = await refused.text()
      assert.strictEqual(refused.status, 422, text.slice(0, 300))
      assert.include(text, "metadata")
      assert.isBelow(text.length, 10_000)
    }
  })
})
