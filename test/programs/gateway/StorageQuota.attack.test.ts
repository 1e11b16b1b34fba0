/**
 * One token user growing what their threads keep in the database. Before: nothing bounded it (a message by
 * `max_message_bytes`, a run's input by `max_run_input_bytes`, but not how many of them a thread or a user's threads
 * piled up), so a thread run long enough had a state, folded whole at each run and `GET .../state`, as large as its
 * user made it. Now `gateway.quotas.max_thread_bytes` bounds one thread and `max_thread_bytes_per_user` all of a
 * user's: a run or a state update that would pass one is a 403 naming the quota, the use and what it would add, with
 * nothing kept; a run that passes one mid-run ends there, an error saying so, its thread readable and its tool calls
 * answered. The other user is not affected, another thread of the same user neither (for the thread's quota), and
 * deleting threads frees the user's. On SQLite here, and on PostgreSQL (skipped, saying why, without one). The model
 * is SCRIPTED; the clients speak HTTP.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Effect from "effect/Effect"
import * as M from "../../../src/state/Message.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB, lastUserText, twoUsers } = Support
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota PostgreSQL] skipped: ${pg.skip}`)
afterAll(() => ("stop" in pg ? pg.stop() : undefined))

/** "grow": a 300 KiB answer; "call": a tool call of 300 KiB of arguments; else a short answer. */
const script = (body: ChatRequestBody): Turn => {
  const text = lastUserText(body)
  const answered = body.messages.at(-1)?.role === "tool"
  if (text.includes("grow")) return "g".repeat(300 * KiB)
  if (text.includes("call a tool") && !answered) {
    return { toolCalls: [{ name: "ls", arguments: { path: `/mnt/user-data/${"c".repeat(300 * KiB)}` } }] }
  }
  return "ok"
}

const human = (content: string) => ({ messages: [{ type: "human", content }] })
const big = "b".repeat(300 * KiB)

/** A gateway of alice and bob with these quotas (and `config` beside them). */
const startWith = (quotas: Record<string, unknown>, config: Record<string, unknown> = {}) =>
  Support.start({ script, config: { ...config, gateway: { ...twoUsers, quotas: { max_user_bytes: 0, ...quotas } } } })

/** The user's requests to the gateway `target` holds. */
const as = (target: () => TestGateway, token?: string) => {
  const request = Requests.as(target, token)
  const newThread = async () => (await request("POST", "/threads", {})).json().thread_id as string
  const run = (threadId: string, content: string) =>
    request("POST", `/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input: human(content) })
  const runs = async (threadId: string) => (await request("GET", `/threads/${threadId}/runs`)).json() as Array<any>
  const state = (threadId: string) => request("GET", `/threads/${threadId}/state`)
  return { request, newThread, run, runs, state }
}

/** A pattern of the parts of a message, in order. */
const pattern = (...parts: ReadonlyArray<string>) => new RegExp(parts.join(""))

const THREAD_REFUSED = pattern(
  "^Thread storage quota reached: this thread of user bob keeps (\\d+) bytes \\([\\d.]+ KB\\) in the database ",
  "and this would add (\\d+) bytes \\([\\d.]+ KB\\), past gateway\\.quotas\\.max_thread_bytes ",
  "\\(262144 bytes \\(256\\.0 KB\\)\\); start a new thread \\(or delete this one\\)\\.$"
)
const USER_REFUSED = pattern(
  "^Thread storage quota reached: the threads of user bob keep (\\d+) bytes \\([\\d.]+ (KB|MB)\\) in the ",
  "database and this would add (\\d+) bytes \\([\\d.]+ KB\\), past ",
  "gateway\\.quotas\\.max_thread_bytes_per_user \\(1048576 bytes \\(1\\.0 MB\\)\\); delete threads to free space\\.$"
)
const THREAD_EXCEEDED = pattern(
  "Thread storage quota exceeded: this thread of user bob keeps \\d+ bytes \\([\\d.]+ KB\\) in the database, ",
  "past gateway\\.quotas\\.max_thread_bytes \\(262144 bytes \\(256\\.0 KB\\)\\); writing stopped after ",
  "this step: start a new thread \\(or delete this one\\)\\."
)
const USER_EXCEEDED = pattern(
  "Thread storage quota exceeded: the threads of user alice keep \\d+ bytes \\([\\d.]+ MB\\) in the database, ",
  "past gateway\\.quotas\\.max_thread_bytes_per_user \\(1048576 bytes \\(1\\.0 MB\\)\\); writing ",
  "stopped after this step: delete threads to free space\\."
)

describe("gateway.quotas.max_thread_bytes (one thread)", () => {
  let gateway: TestGateway
  beforeAll(async () => {
    gateway = await startWith({ max_thread_bytes: 256 * KiB, max_thread_bytes_per_user: 0 })
  })
  afterAll(() => gateway?.stop())
  const bob = as(() => gateway, BOB)
  const alice = as(() => gateway, ALICE)

  it("refuses the run that would take the thread past it, before anything is kept; other threads go on", async () => {
    const threadId = await bob.newThread()
    // (a message is kept in its checkpoint, in its run's record and in the run's recorded events)
    const part = "p".repeat(40 * KiB)
    assert.strictEqual((await bob.run(threadId, part)).status, 200)
    assert.strictEqual((await bob.runs(threadId))[0].status, "success")
    const before = (await bob.state(threadId)).json()
    const refused = await bob.run(threadId, part)
    assert.strictEqual(refused.status, 403)
    const detail: string = refused.json().detail
    const [, used, adding] = THREAD_REFUSED.exec(detail) ?? assert.fail(detail)
    assert.isAbove(Number(used), 3 * 40 * KiB)
    assert.isAbove(Number(adding), 2 * 40 * KiB)
    assert.isAbove(Number(used) + Number(adding), 256 * KiB)
    assert.strictEqual((await bob.runs(threadId)).length, 1)
    assert.deepStrictEqual((await bob.state(threadId)).json(), before)
    // a state update too
    const update = await bob.request("POST", `/threads/${threadId}/state`, {
      values: { messages: [{ type: "human", content: "u".repeat(100 * KiB) }] }
    })
    assert.strictEqual(update.status, 403)
    assert.match(update.json().detail, /past gateway\.quotas\.max_thread_bytes \(262144 bytes/)
    assert.deepStrictEqual((await bob.state(threadId)).json(), before)
    // a small run still fits; another thread of bob's and alice's are not this one
    const small = await bob.run(threadId, "small")
    assert.strictEqual(small.status, 200, small.text)
    assert.strictEqual((await bob.run(await bob.newThread(), part)).status, 200)
    assert.strictEqual((await alice.run(await alice.newThread(), part)).status, 200)
  }, 60_000)

  it("a run that grows its thread past it ends there, an error saying so; the thread stays readable", async () => {
    const threadId = await bob.newThread()
    const ended = await bob.run(threadId, "grow, please")
    assert.strictEqual(ended.status, 200)
    const [record] = await bob.runs(threadId)
    assert.strictEqual(record.status, "error")
    const run = (await bob.request("GET", `/threads/${threadId}/runs/${record.run_id}`)).json()
    assert.match(run.error, THREAD_EXCEEDED)
    const state = await bob.state(threadId)
    assert.strictEqual(state.status, 200)
    const messages = Support.visible(state.json().values.messages)
    assert.deepStrictEqual(messages.map((m: any) => m.type), ["human", "ai"])
    assert.strictEqual(messages[1].content.length, 300 * KiB)
    // the thread is full: the next run is refused before it starts
    assert.strictEqual((await bob.run(threadId, "more")).status, 403)
    // and any other write to it (DeerFlow's goal here) is answered with the quota's words, not as a fault
    const goal = await bob.request("PUT", `/api/threads/${threadId}/goal`, { objective: "finish" })
    assert.strictEqual(goal.status, 403)
    assert.match(goal.json().detail, THREAD_EXCEEDED)
  }, 60_000)

  it("streamed, the run's stream says why it ended, then ends", async () => {
    const threadId = await bob.newThread()
    const response = await fetch(`${gateway.url}/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { authorization: `Bearer ${BOB}`, "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input: human("grow, please"), stream_mode: ["values"] })
    })
    assert.strictEqual(response.status, 200)
    const { events } = await Support.readSse(response)
    const names = events.map((e) => e.event)
    assert.include(names, "error")
    assert.strictEqual(names.at(-1), "end")
    const error = events.find((e) => e.event === "error")!.data as { message: string }
    assert.match(error.message, THREAD_EXCEEDED)
    assert.strictEqual((await bob.runs(threadId))[0].status, "error")
  }, 60_000)

  it("a run whose tool call takes its thread past it ends with the call answered", async () => {
    const threadId = await bob.newThread()
    assert.strictEqual((await bob.run(threadId, "call a tool")).status, 200)
    const [record] = await bob.runs(threadId)
    assert.strictEqual(record.status, "error")
    const messages: Array<any> = (await bob.state(threadId)).json().values.messages
    const calls = messages.flatMap((m) => (m.type === "ai" ? m.tool_calls ?? [] : []))
    assert.strictEqual(calls.length, 1)
    const answers = messages.filter((m) => m.type === "tool")
    assert.deepStrictEqual(answers.map((m) => m.tool_call_id), [calls[0].id])
  }, 60_000)
})

const perUser = (name: string, config: () => Promise<Record<string, unknown> | undefined>) =>
  describe(`gateway.quotas.max_thread_bytes_per_user (all of a user's threads), ${name}`, () => {
    let gateway: TestGateway | undefined
    beforeAll(async () => {
      const more = await config()
      if (more !== undefined) gateway = await startWith({ max_thread_bytes_per_user: 1024 * KiB }, more)
    })
    afterAll(() => gateway?.stop())
    const bob = as(() => gateway!, BOB)
    const alice = as(() => gateway!, ALICE)

    it("a user who fills it is refused; the other user is not; deleting threads frees it", async (context) => {
      if (gateway === undefined) return context.skip()
      const part = "f".repeat(150 * KiB)
      const threads: Array<string> = []
      let refused: Requests.Answer | undefined
      for (let i = 0; i < 12 && refused === undefined; i++) {
        const threadId = await bob.newThread()
        threads.push(threadId)
        const ran = await bob.run(threadId, part)
        if (ran.status === 403) refused = ran
        else assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
      }
      assert.isDefined(refused, "bob was never refused")
      const detail: string = refused!.json().detail
      const [, used, , adding] = USER_REFUSED.exec(detail) ?? assert.fail(detail)
      assert.isAbove(Number(used) + Number(adding), 1024 * KiB)
      // (past it at most by what the last run kept after its last step: its record and events)
      assert.isBelow(Number(used), 1024 * KiB + 3 * 150 * KiB)
      // (a run of it keeps about five times its message: three in its first step, its record's, its events'; admitted
      // only when its first step fits: `StorageQuota.firstStepBytes`)
      assert.isAtLeast(threads.length, 2)
      // nothing of the refused run kept
      assert.deepStrictEqual(await bob.runs(threads.at(-1)!), [])
      // a state update on one of bob's threads is refused as well (one that would take him past the limit)
      const update = await bob.request("POST", `/threads/${threads[0]}/state`, {
        values: { messages: [{ type: "human", content: part.repeat(4) }] }
      })
      assert.strictEqual(update.status, 403)
      assert.match(update.json().detail, /past gateway\.quotas\.max_thread_bytes_per_user/)
      // and so is a copy of one
      const copy = await bob.request("POST", `/threads/${threads[0]}/copy`)
      assert.strictEqual(copy.status, 403)
      assert.match(copy.json().detail, /past gateway\.quotas\.max_thread_bytes_per_user/)
      // alice is not bob
      assert.strictEqual((await alice.run(await alice.newThread(), part)).status, 200)
      // deleting bob's threads frees what they kept
      for (const threadId of threads.slice(0, -1)) {
        assert.strictEqual((await bob.request("DELETE", `/threads/${threadId}`)).status, 204)
      }
      assert.strictEqual((await bob.run(threads.at(-1)!, part)).status, 200)
    }, 120_000)

    it("a run that takes its user past it mid-run ends there, an error saying so", async (context) => {
      if (gateway === undefined) return context.skip()
      // (bob near the limit: alice's runs grow her threads; hers are the ones tested here)
      const threadIds: Array<string> = []
      let last: any
      for (let i = 0; i < 6; i++) {
        const threadId = await alice.newThread()
        threadIds.push(threadId)
        const ran = await alice.run(threadId, "grow, please")
        if (ran.status === 403) break
        last = (await alice.runs(threadId))[0]
        if (last.status === "error") break
      }
      assert.strictEqual(last?.status, "error")
      const run = (await alice.request("GET", `/threads/${threadIds.at(-1)}/runs/${last.run_id}`)).json()
      assert.match(run.error, USER_EXCEEDED)
      assert.strictEqual((await alice.state(threadIds.at(-1)!)).status, 200)
      assert.strictEqual((await alice.run(await alice.newThread(), "hello")).status, 403)
    }, 120_000)
  })

perUser("SQLite", async () => ({}))
perUser("PostgreSQL", async () => ("skip" in pg ? undefined : { database: { url: await pg.createDatabase() } }))

describe("the open gateway's local user", () => {
  it("is one user, the CLI's threads (made without an owner) counted", async () => {
    const gateway = await Support.start({
      script,
      config: { gateway: { heartbeat_seconds: 1, quotas: { max_thread_bytes_per_user: 256 * KiB } } }
    })
    try {
      const local = as(() => gateway)
      assert.strictEqual((await local.run(await local.newThread(), "hello")).status, 200)
      // a thread of the CLI's in the same data directory
      await Effect.runPromise(Effect.gen(function*() {
        yield* gateway.store.ensure("from-the-cli")
        yield* Effect.either(gateway.store.append("from-the-cli", "cli-run", [{ messages: [M.human(big)] }]))
      }))
      const refused = await local.run(await local.newThread(), "hello again")
      assert.strictEqual(refused.status, 403)
      assert.match(refused.json().detail, /the threads of user default keep \d+ bytes/)
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})

describe("the quotas' configuration", () => {
  for (const [quotas, says] of [
    [{ max_thread_bytes: -1 }, "max_thread_bytes"],
    [{ max_thread_bytes_per_user: 1.5 }, "max_thread_bytes_per_user"]
  ] as const) {
    it(`a quota that is not a non-negative integer stops the start, naming it: ${JSON.stringify(quotas)}`, async () => {
      const started = await startWith(quotas).then(
        (made) => made.stop().then(() => assert.fail("the gateway started")),
        (error: unknown) => String(error)
      )
      assert.include(started, says)
    })
  }
})
