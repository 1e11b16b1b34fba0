/**
 * The streams of a cluster's run that its runner stops while it settles (its turn answered, the goal evaluator
 * asked and held open by the scripted model), followed through the other process, end as a stream of one process
 * ends: two `antler serve` processes (real child processes) are runners of one cluster on one PostgreSQL database,
 * and a client follows the run through the process that does not run it, by the run's join
 * (`GET .../runs/{run_id}/stream`) and by the thread's stream (`GET /threads/{id}/stream`).
 *
 * - Its runner killed (SIGKILL), the thread's next runner ends the run without running it again (`RunSettling`):
 *   both streams end with the run's `error` (DeerFlow's `{message, name}`, LangGraph's `error`), then `end`, as a
 *   run failing in one process ends its stream; the join's response then closes.
 * - Its runner stopped (SIGTERM, a drain shorter than the evaluator's wait), it settles the run itself: the streams
 *   end with `end`, no `error`.
 * - And, for comparison, its runner killed mid-turn (the model stalled): the survivor resumes the run, and both
 *   streams go on with the resumed attempt (its `metadata` says `attempt: 2`) to its `end`.
 *
 * Skipped, saying why, without PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as RunSettling from "../../../src/programs/gateway/RunSettling.js"
import * as Cluster from "../../support/cluster.js"
import { isEvaluator } from "../../support/goalScript.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import type { SseEvent } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster settling streams] skipped: ${pg.skip}`)

// the answer turn; the evaluator's request held open (the runner stops while it waits); a "slow" turn's first
// request stalled (its runner is killed mid-turn), answered once the run is resumed
const script = (body: ChatRequestBody): Turn => {
  if (isEvaluator(body)) return { hang: true }
  const slow = (b: ChatRequestBody) => JSON.stringify(b.messages).includes("slow")
  if (slow(body) && scripted.filter(slow).length <= 1) return { content: "working", stall: true }
  return "Here is the report."
}
let scripted: ReadonlyArray<ChatRequestBody> = []

const suite = Cluster.suite(pg)
type Started = Cluster.Runner

/** Two runners of one cluster on a fresh database, sharing a data directory; their model holds the evaluator. */
const cluster = async (drainSeconds: number) => {
  const dbUrl = await (pg as Postgres.Postgres).createDatabase()
  const model = await suite.model(script)
  scripted = model.requests
  const home = Support.tempDir("antler-cluster-settling-streams-")
  const start = () =>
    suite.runner({
      dbUrl,
      home,
      modelUrl: model.url,
      gateway: { heartbeat_seconds: 1 },
      cluster: { health_check_seconds: 1, drain_seconds: drainSeconds }
    })
  const a = await start()
  const b = await start()
  // (the shards spread over both before the thread is made: a shard moving would hand its run over)
  await Cluster.registered(dbUrl, 2)
  return { dbUrl, a, b }
}

const send = async (base: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  assert.isBelow(response.status, 300, `${method} ${path}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

/** A stream read in the background: its events as they come, and whether it ended (the server closed it). */
const follow = (url: string, lastEventId?: string) => {
  const controller = new AbortController()
  const events: Array<SseEvent> = []
  let closed = false
  const read = fetch(url, {
    headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId },
    signal: controller.signal
  }).then(async (response) => {
    assert.strictEqual(response.status, 200, url)
    await Support.readSse(response, (event) => (events.push(event), false))
    closed = true
  }).catch(() => {})
  return { events, closed: () => closed, read, close: () => controller.abort() }
}

/**
 * A thread with a goal and a background run on it, accepted by `a`; once the run's turn answered and the evaluator
 * is asked, which runner holds the thread's lease (the run's runner) and the other.
 */
const settlingRun = async (dbUrl: string, a: Started, b: Started) => {
  const thread = await send(a.url, "POST", "/threads", {})
  await send(a.url, "PUT", `/api/threads/${thread.thread_id}/goal`, { objective: "Write the report" })
  const run = await send(a.url, "POST", `/threads/${thread.thread_id}/runs`, {
    assistant_id: "lead_agent",
    input: { messages: [{ type: "human", content: "Write the report" }] }
  })
  await until(async () => scripted.some(isEvaluator), "the goal evaluator asked")
  const { leased, holder: runner, other } = Cluster.holderOf(dbUrl, thread.thread_id, a, b)
  assert.strictEqual(leased.runId, run.run_id, `the thread's lease: ${JSON.stringify(leased)}`)
  return { threadId: thread.thread_id as string, runId: run.run_id as string, runner, other }
}

/** The run's join and the thread's stream through `via`, each once it gave the run's answer (`runner`: on failure). */
const followers = async (via: Started, threadId: string, runId: string, runner?: Started) => {
  const join = follow(`${via.url}/threads/${threadId}/runs/${runId}/stream`)
  const thread = follow(`${via.url}/threads/${threadId}/stream`, "-")
  const answered = (events: ReadonlyArray<SseEvent>) =>
    events.some((event) => event.event === "values" && JSON.stringify(event.data).includes("Here is the report."))
  await until(() => answered(join.events) && answered(thread.events), () =>
    `both followers had the answer: ${JSON.stringify([join.events, thread.events])}\n${via.server.output()}\n${
      runner?.server.output() ?? ""
    }`)
  return { join, thread }
}

const ended = (events: ReadonlyArray<SseEvent>) => events.some((event) => event.event === "end")

/** Event ids (the thread stream's without their run's prefix), each above the one before. */
const ascending = (events: ReadonlyArray<SseEvent>) => {
  const ids = events.map((event) => Number(event.id!.slice(event.id!.lastIndexOf(":") + 1)))
  ids.slice(1).forEach((id, i) => assert.isAbove(id, ids[i]!, JSON.stringify(events.map((e) => e.id))))
}

describe.skipIf("skip" in pg)("the streams of a cluster's run whose runner stops while it settles", () => {
  it("killed: both followers' streams end with the run's error and end, as one process's", async () => {
    const { a, b, dbUrl } = await cluster(20)
    const { other, runId, runner, threadId } = await settlingRun(dbUrl, a, b)
    const { join, thread } = await followers(other, threadId, runId)
    try {
      const exited = new Promise((resolve) => runner.server.child.once("exit", resolve))
      runner.server.child.kill("SIGKILL")
      await exited

      // once the dead runner's lease lapsed, the survivor ends the run; the join's response closes after its end
      await until(() => join.closed() && ended(thread.events), () =>
        `the followers' streams ended: ${JSON.stringify([join.events, thread.events])}\n${other.server.output()}`, 3600)
      const record = await send(other.url, "GET", `/threads/${threadId}/runs/${runId}`)
      assert.strictEqual(record.status, "error", JSON.stringify(record))
      assert.strictEqual(record.error, RunSettling.INTERRUPTED)
      const error = { message: RunSettling.INTERRUPTED, name: RunSettling.ERROR_NAME, error: RunSettling.ERROR_NAME }
      for (const events of [join.events, thread.events]) {
        assert.deepStrictEqual(
          events.slice(-2).map((event) => [event.event, event.data]),
          [["error", error], ["end", null]],
          JSON.stringify(events)
        )
        assert.strictEqual(events.filter((event) => event.event === "end").length, 1)
        assert.strictEqual(events[0]!.event, "metadata")
        ascending(events)
      }
      for (const event of thread.events) assert.isTrue(event.id!.startsWith(`${runId}:`))
      // the model saw no second turn
      assert.strictEqual(scripted.filter((body) => !isEvaluator(body)).length, 1)
    } finally {
      join.close()
      thread.close()
    }
  }, 300_000)

  it("killed mid-turn (not settling): the followers' streams go on with the resumed run to its end", async () => {
    const { a, b, dbUrl } = await cluster(20)
    const thread = (await send(a.url, "POST", "/threads", {})).thread_id as string
    const run = (await send(a.url, "POST", `/threads/${thread}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "A slow report" }] }
    })).run_id as string
    await until(() => scripted.length > 0, "the model asked")
    const { holder: runner, other } = Cluster.holderOf(dbUrl, thread, a, b)
    const join = follow(`${other.url}/threads/${thread}/runs/${run}/stream`)
    const stream = follow(`${other.url}/threads/${thread}/stream`, "-")
    try {
      await until(() => join.events.length >= 2 && stream.events.length >= 2, "both followers had the run's input")
      const exited = new Promise((resolve) => runner.server.child.once("exit", resolve))
      runner.server.child.kill("SIGKILL")
      await exited
      await until(() => join.closed() && ended(stream.events), () =>
        `the followers' streams ended: ${JSON.stringify([join.events, stream.events])}\n${other.server.output()}`, 3600)
      for (const events of [join.events, stream.events]) {
        assert.strictEqual(events.at(-1)!.event, "end", JSON.stringify(events))
        assert.strictEqual(events.filter((event) => event.event === "end").length, 1)
        // the resumed attempt from its first event: its metadata, then its values with the answer
        const resumed = events.findIndex((event) => event.event === "metadata" && (event.data as any).attempt === 2)
        assert.isAbove(resumed, 0, JSON.stringify(events))
        const values = events.filter((event) => event.event === "values").at(-1)!.data as any
        assert.include(JSON.stringify(values.messages.at(-1)), "Here is the report.")
        ascending(events)
      }
    } finally {
      join.close()
      stream.close()
    }
  }, 300_000)

  it("stopped (SIGTERM): the followers' streams end with end, the run settled where it was", async () => {
    const { a, b, dbUrl } = await cluster(1)
    const { other, runId, runner, threadId } = await settlingRun(dbUrl, a, b)
    const { join, thread } = await followers(other, threadId, runId, runner)
    try {
      runner.server.child.kill("SIGTERM")
      assert.strictEqual(await runner.server.exited, 0, runner.server.output())
      await until(() => join.closed() && ended(thread.events), () =>
        `the followers' streams ended: ${JSON.stringify([join.events, thread.events])}\n${other.server.output()}`, 3600)
      const record = await send(other.url, "GET", `/threads/${threadId}/runs/${runId}`)
      assert.strictEqual(record.status, "success", `${JSON.stringify(record)}\n${runner.server.output()}`)
      for (const events of [join.events, thread.events]) {
        assert.strictEqual(events.at(-1)!.event, "end", JSON.stringify(events))
        assert.strictEqual(events.filter((event) => event.event === "end").length, 1)
        assert.isFalse(events.some((event) => event.event === "error"), JSON.stringify(events))
        ascending(events)
      }
    } finally {
      join.close()
      thread.close()
    }
  }, 300_000)
})
