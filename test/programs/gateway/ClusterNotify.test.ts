/**
 * A thread's stream idle in one process of a cluster hears of a run another runner starts through PostgreSQL's
 * LISTEN/NOTIFY (`cluster/RunNotices`), not by reading the thread's run records every few seconds: two gateway
 * processes on one database, three streams idle on the process that is not the thread's runner. Skipped, saying
 * why, without PostgreSQL (see test/support/postgres.ts).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as RunNotices from "../../../src/programs/gateway/cluster/RunNotices.js"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import { freePort } from "../../support/ports.js"
import { as } from "../../support/requests.js"
import type { SseEvent, TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster notices] skipped: ${pg.skip}`)

const script = (body: ChatRequestBody): Turn => {
  const last = [...body.messages].reverse().find((m) => m.role === "user" && typeof m.content === "string")
  return `Answered: ${String(last?.content ?? "").slice(0, 20)}`
}

const gateways: Array<TestGateway> = []
const scope = Effect.runSync(Scope.make())
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  await Effect.runPromise(Scope.close(scope, Exit.void))
  if ("stop" in pg) await pg.stop()
})

const api = (gateway: TestGateway, method: string, path: string, body?: unknown) =>
  as(() => gateway)(method, path, body)
const human = (content: string) => ({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content }] },
  stream_mode: ["values"]
})
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const runOf = (event: SseEvent) => event.id!.slice(0, event.id!.lastIndexOf(":"))

/** A store that counts, per gateway, the reads of each thread's run records (what an idle stream polls). */
const counting = (reads: Map<string, number>) => (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
  ...store,
  // (counted as each read runs: a stream builds its read once and runs it each time)
  runs: (filter) =>
    Effect.zipRight(
      Effect.sync(() => {
        if (filter.threadId !== undefined) reads.set(filter.threadId, (reads.get(filter.threadId) ?? 0) + 1)
      }),
      store.runs(filter)
    )
})

/** The thread stream of `gateway` (no Last-Event-ID) until `enough`; aborted, failing, after `limitMs`. */
const threadStream = (
  gateway: TestGateway,
  threadId: string,
  enough: (event: SseEvent) => boolean,
  limitMs: () => number
) => {
  const controller = new AbortController()
  let timer: ReturnType<typeof setTimeout> | undefined
  const read = (async () => {
    const response = await fetch(`${gateway.url}/threads/${threadId}/stream`, { signal: controller.signal })
    assert.strictEqual(response.status, 200)
    return (await Support.readSse(response, enough)).events
  })()
  return {
    /** The events, once `enough` held (given `limitMs` from now). */
    events: async () => {
      timer = setTimeout(() => controller.abort(new Error(`${threadId}'s stream: not seen in time`)), limitMs())
      try {
        return await read
      } finally {
        clearTimeout(timer)
        controller.abort()
      }
    }
  }
}

describe.skipIf("skip" in pg)("a cluster's thread streams hear of runs through LISTEN/NOTIFY", () => {
  it("a stream idle on one process sees a run the other starts, reading no records while idle", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-notify-")
    const reads = [new Map<string, number>(), new Map<string, number>()]
    for (let i = 0; i < 2; i++) {
      gateways.push(await Support.start({
        script,
        home,
        wrapStore: counting(reads[i]!),
        config: { database: { url }, gateway: { heartbeat_seconds: 1, cluster: { runner_port: await freePort() } } }
      }))
    }
    await until(() => Postgres.psql(url, "SELECT count(*) FROM cluster_runners WHERE healthy") === "2", "runners")
    // (the shards settle: assignments are refreshed every 3 s)
    await sleep(6000)

    // what the channel carries, as any client of the database hears it
    const heard: Array<string> = []
    const database = await Effect.runPromise(
      Layer.buildWithScope(Layer.orDie(PgClient.layer({ url: Redacted.make(url) })), scope)
    )
    await Effect.runPromise(Effect.gen(function*() {
      const client = yield* PgClient.PgClient
      const notices = Stream.runForEach(client.listen(RunNotices.CHANNEL), (p) => Effect.sync(() => heard.push(p)))
      yield* Effect.forkIn(notices, scope)
    }).pipe(Effect.provide(database)))

    // one LISTEN connection per process (two gateways, and this test's own)
    const listening = () =>
      Postgres.psql(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'"
      )
    await until(() => listening() === "3", () => `three LISTEN connections, not ${listening()}`, 200)

    // a thread and its first run: which process is its runner (B), which is not (A)
    const thread = (await api(gateways[0]!, "POST", "/threads", {})).json().thread_id as string
    const first = await api(gateways[0]!, "POST", `/threads/${thread}/runs/wait`, human("first question"))
    assert.strictEqual(first.status, 200, first.text)
    const firstId = (await api(gateways[0]!, "GET", `/threads/${thread}/runs`)).json()[0].run_id as string
    const runner = gateways.findIndex((g) => g.runs.get(firstId) !== undefined)
    assert.isAtLeast(runner, 0, "a runner ran it")
    const a = gateways[1 - runner]!
    const b = gateways[runner]!
    const readsOnA = () => reads[1 - runner]!.get(thread) ?? 0

    // three streams idle on A: each reads the thread's records once as it begins
    const before = readsOnA()
    let deadline = 0
    const streams = [0, 1, 2].map(() =>
      threadStream(a, thread, (e) => e.event === "end" && runOf(e) !== firstId, () => deadline)
    )
        await until(() => readsOnA() >= before + 3, "the three streams began")
    // (one LISTEN connection per process still, not one per stream)
    assert.strictEqual(listening(), "3")
    // idle for a while: no stream reads the records (they used to, every 3 s)
    const idleFrom = readsOnA()
    await sleep(9000)
    assert.strictEqual(readsOnA() - idleFrom, 0, "no record reads while idle")

    // a run started through B runs on B; the streams on A follow it through to its end
    const second = await api(b, "POST", `/threads/${thread}/runs/wait`, human("second question"))
    assert.strictEqual(second.status, 200, second.text)
    const secondId = (await api(b, "GET", `/threads/${thread}/runs`)).json()
      .map((r: any) => r.run_id as string).find((id: string) => id !== firstId) as string
    assert.isDefined(b.runs.get(secondId), "B ran it")
    assert.isUndefined(a.runs.get(secondId), "A did not")
    // (well within the streams' fallback read, 30 s after they began)
    deadline = 15_000
    for (const stream of streams) {
      const events = (await stream.events()).filter((e) => e.id !== undefined)
      assert.deepStrictEqual([...new Set(events.map(runOf))], [secondId])
      assert.strictEqual(events[0]!.event, "metadata")
      assert.strictEqual(events.at(-1)!.event, "end")
      const values = events.filter((e) => e.event === "values").at(-1)!.data as any
      assert.deepStrictEqual(
        Support.visible(values.messages).slice(-2).map((m: any) => [m.type, String(m.content).slice(0, 15)]),
        [["human", "second question"], ["ai", "Answered: --- B"]]
      )
    }
    // woken by the notices: a few reads, not one every 3 s per stream
    assert.isAbove(readsOnA() - idleFrom, 0)
    // the channel carried the thread's id, nothing else: each run's start and end
    await until(
      () => heard.filter((p) => p === thread).length >= 4,
      () => `the runs' starts and ends heard: ${heard.length}`
    )
    // (besides each process's check that it still hears: a token after `:`, no thread's id)
    assert.deepStrictEqual([...new Set(heard.filter((p) => !p.startsWith(":check:")))], [thread])

    // the processes' LISTEN connections cut (this test's own among them): each process notices its check does not
    // come back, listens again on a fresh connection, and an idle stream hears of the next run again
    Postgres.psql(
      url,
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity " +
        "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
    )
    await until(() => listening() === "2", () => `the two processes listening again, not ${listening()}`)
    deadline = 0
    const later = (e: SseEvent) => e.event === "end" && runOf(e) !== firstId && runOf(e) !== secondId
    const after = threadStream(a, thread, later, () => deadline)
    const opened = readsOnA()
    await until(() => readsOnA() > opened, "the stream began")
    const third = await api(b, "POST", `/threads/${thread}/runs/wait`, human("third question"))
    assert.strictEqual(third.status, 200, third.text)
    deadline = 15_000
    const events = (await after.events()).filter((e) => e.id !== undefined)
    assert.strictEqual(events[0]!.event, "metadata")
    assert.strictEqual(events.at(-1)!.event, "end")
  }, 240_000)
})
