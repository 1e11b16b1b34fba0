/**
 * `antler serve` as a cluster (issue 30, `gateway.cluster`): three gateways on one PostgreSQL database, each a
 * runner of @effect/cluster; a thread's runs execute on the runner owning its shard, and any gateway accepts and
 * routes a request about it. A client round-robin across the three sees what one process would show: every event
 * of a streamed run once and in order, joins with `Last-Event-ID` from another gateway going on exactly where the
 * client was, and a cancel from a gateway that does not run the run stopping it. Skipped, saying why, without
 * PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import type { SseEvent, TestGateway } from "./support.js"
import { eventually, until } from "../../support/poll.js"
import * as Support from "./support.js"
import { freePort } from "../../support/ports.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster] skipped: ${pg.skip}`)

const RUNS = 100

const script = (body: ChatRequestBody): Turn => {
  const last = JSON.stringify(body.messages.at(-1)?.content ?? "")
  if (last.includes("hang")) return { content: "working", stall: true }
  const asked = body.messages.filter((m) =>
    m.role === "user" && !JSON.stringify(m.content).includes("<system-reminder>")
  ).length
  return `Answered ${asked} question(s): ${"word ".repeat(20)}`
}

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const post = (gateway: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })
const get = async (gateway: TestGateway, path: string) => (await fetch(`${gateway.url}${path}`)).json() as Promise<any>
const human = (content: string) => ({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content }] },
  stream_mode: ["values", "messages-tuple"]
})

/** The index of the gateway running run `runId`, once one does. */
const runnerOf = (runId: string): Promise<number> =>
  eventually(() => {
    const runner = gateways.findIndex((g) => g.runs.get(runId) !== undefined)
    return runner < 0 ? undefined : runner
  }, `a gateway runs ${runId}`, { tries: 400, everyMs: 25 })

/** Every event id present, from `first`, one more each time, the last one `end`. */
const assertComplete = (events: ReadonlyArray<SseEvent>, first: number, what: string) => {
  assert.isAbove(events.length, 2, what)
  events.forEach((event, i) => assert.strictEqual(Number(event.id), first + i, `${what}: event ${i}`))
  assert.strictEqual(events.at(-1)!.event, "end", what)
}

describe("gateway.cluster refused", () => {
  it("without database.url, and with a runner_port that is not a port: the start says what is wrong", async () => {
    const noDatabase = await Support.start({ script, config: { gateway: { cluster: { runner_port: 4000 } } } }).then(
      (gateway) => (gateways.push(gateway), "started"),
      (error) => String(error)
    )
    assert.include(noDatabase, "gateway.cluster needs PostgreSQL")
    const badPort = await Support.start({
      script,
      config: { gateway: { cluster: { runner_port: "eighty" } } }
    }).then((gateway) => (gateways.push(gateway), "started"), (error) => String(error))
    assert.include(badPort, "runner_port")
  })
})

describe.skipIf("skip" in pg)("gateways as a cluster on one PostgreSQL database", () => {
  it("round-robin: streamed runs, joins with Last-Event-ID and cancels from other processes", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-")
    for (let i = 0; i < 3; i++) {
      const runnerPort = await freePort()
      gateways.push(await Support.start({
        script,
        home,
        config: {
          database: { url },
          gateway: { heartbeat_seconds: 1, finished_runs_kept: 1000, cluster: { runner_port: runnerPort } }
        }
      }))
    }
    // the shards move while runners join (a run started meanwhile stays on the runner that started it, and a
    // stream routed to the thread's new owner breaks: see docs/gateway.md); the client starts once all three are
    // registered and a few assignment rounds (every 3 s) went by
    for (let i = 0; i < 600 && Postgres.psql(url, "SELECT count(*) FROM cluster_runners WHERE healthy") !== "3"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await new Promise((resolve) => setTimeout(resolve, 8000))
    let turn = 0
    const next = () => gateways[turn++ % gateways.length]!

    // the shards are spread as the runners register: a thread's first run waits until its owner is known
    const threads: Array<string> = []
    for (let i = 0; i < RUNS; i++) {
      threads.push(((await (await post(next(), "/threads", {})).json()) as any).thread_id)
    }

    const runs = await Promise.all(threads.map(async (thread) => {
      // (the client leaves the first gateway mid-stream: the run goes on)
      const streamed = await post(next(), `/threads/${thread}/runs/stream`, {
        ...human("hello"),
        on_disconnect: "continue"
      })
      assert.strictEqual(streamed.status, 200)
      const location = streamed.headers.get("content-location")!
      const runId = location.split("/").at(-1)!
      // the client reads two events, then goes on from another gateway with Last-Event-ID
      const head = await Support.readSse(streamed, (_, all) => all.length === 2)
      const cursor = Number(head.events[1]!.id)
      const joined = await fetch(`${next().url}/threads/${thread}/runs/${runId}/stream`, {
        headers: { "last-event-id": String(cursor) }
      })
      assert.strictEqual(joined.status, 200)
      const rest = (await Support.readSse(joined)).events.filter((e) => e.event !== "")
      return { thread, runId, head: head.events, rest }
    }))

    const owners = new Map<string, number>()
    for (const run of runs) {
      assertComplete([...run.head, ...run.rest], 1, `run ${run.runId}`)
      assert.strictEqual(run.rest.filter((e) => e.event === "metadata").length, 0)
      // and the whole stream again from a third gateway: the same events
      const again = await fetch(`${next().url}/threads/${run.thread}/runs/${run.runId}/stream`)
      const replay = (await Support.readSse(again)).events
      assert.deepStrictEqual(replay, [...run.head, ...run.rest])
      const finalState = await get(next(), `/threads/${run.thread}/state`)
      assert.strictEqual(Support.visible(finalState.values.messages).at(-1).content.slice(0, 23), "Answered 1 question(s):")
      owners.set(run.runId, gateways.findIndex((g) => g.runs.get(run.runId) !== undefined))
    }
    // the runs were spread over the three runners, each run on one of them
    assert.deepStrictEqual(new Set(owners.values()), new Set([0, 1, 2]))

    // a run hangs on its thread's runner; a gateway that does not run it cancels it
    const thread = threads[0]!
    const hanging = (await (await post(next(), `/threads/${thread}/runs`, human("hang on"))).json()) as any
    const owner = await runnerOf(hanging.run_id)
    const other = gateways[(owner + 1) % 3]!
    const busy = await post(other, `/threads/${thread}/runs`, human("me too"))
    assert.strictEqual(busy.status, 409)
    const cancel = await fetch(`${other.url}/threads/${thread}/runs/${hanging.run_id}/cancel?wait=true`, {
      method: "POST"
    })
    assert.strictEqual(cancel.status, 204, await cancel.text())
    const stopped = await fetch(`${other.url}/threads/${thread}/runs/${hanging.run_id}`)
    assert.strictEqual(((await stopped.json()) as any).status, "interrupted")
    const after = await (await post(gateways[(owner + 2) % 3]!, `/threads/${thread}/runs/wait`, human("again"))).json()
    assert.match((after as any).messages.at(-1).content, /^Answered \d question\(s\):/)

    // a client following a run through a gateway that does not run it, with cancel_on_disconnect, goes away: the
    // run is cancelled on its runner
    const left = (await (await post(next(), `/threads/${threads[1]!}/runs`, human("hang on again"))).json()) as any
    const runner = await runnerOf(left.run_id)
    const away = new AbortController()
    const follower = await fetch(
      `${gateways[(runner + 1) % 3]!.url}/threads/${threads[1]!}/runs/${left.run_id}/stream?cancel_on_disconnect=true`,
      { signal: away.signal }
    )
    await Support.readSse(follower, (_, all) => all.length >= 1)
    away.abort()
    await until(
      async () => (await get(gateways[runner]!, `/threads/${threads[1]!}/runs/${left.run_id}`)).status === "interrupted",
      "the run cancelled",
      400,
      25
    )
  }, 240_000)
})
