/**
 * A thread's stream (`GET /threads/{id}/stream`) in a cluster (`gateway.cluster`): asked of a process that does
 * not run the thread's runs, it follows them on the thread's runner as the runner's own stream does, one run after
 * the other; a `Last-Event-ID` naming one of them goes on after that event, from either process. Skipped, saying
 * why, without PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import { freePort } from "../../support/ports.js"
import { as } from "../../support/requests.js"
import type { SseEvent, TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster thread stream] skipped: ${pg.skip}`)

const script = (body: ChatRequestBody): Turn => {
  const last = [...body.messages].reverse().find((m) => m.role === "user" && typeof m.content === "string")
  const text = String(last?.content ?? "")
  if (text.includes("hang")) return { content: "working on it", stall: true }
  return `Answered: ${text.slice(0, 20)}`
}

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const api = (gateway: TestGateway, method: string, path: string, body?: unknown) => as(() => gateway)(method, path, body)
const human = (content: string) => ({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content }] },
  stream_mode: ["values", "messages-tuple"]
})
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const ownerOf = (runId: string, asked: string) => Support.runnerAsked(gateways, runId, asked)

/** The thread stream of `gateway` from `lastEventId` until `enough` (then the connection is closed). */
const threadStream = async (
  gateway: TestGateway,
  threadId: string,
  lastEventId: string | undefined,
  enough: (event: SseEvent, all: ReadonlyArray<SseEvent>) => boolean
) => {
  const controller = new AbortController()
  // (a stream that never shows what is awaited fails the test instead of hanging it)
  const timer = setTimeout(() => controller.abort(new Error(`${threadId}'s stream: not seen in 30 s`)), 30_000)
  const response = await fetch(`${gateway.url}/threads/${threadId}/stream`, {
    headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId },
    signal: controller.signal
  })
  assert.strictEqual(response.status, 200)
  try {
    return (await Support.readSse(response, enough)).events
  } finally {
    clearTimeout(timer)
    controller.abort()
  }
}

const runOf = (event: SseEvent) => event.id!.slice(0, event.id!.lastIndexOf(":"))
const seqOf = (event: SseEvent) => Number(event.id!.slice(event.id!.lastIndexOf(":") + 1))

describe.skipIf("skip" in pg)("a thread's stream across the processes of a cluster", () => {
  it("follows the runs the thread's runner runs, and goes on after a Last-Event-ID from either process", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-ts-")
    for (let i = 0; i < 2; i++) {
      gateways.push(await Support.start({
        script,
        home,
        config: { database: { url }, gateway: { heartbeat_seconds: 1, cluster: { runner_port: await freePort() } } }
      }))
    }
    for (let i = 0; i < 600 && Postgres.psql(url, "SELECT count(*) FROM cluster_runners WHERE healthy") !== "2"; i++) {
      await sleep(100)
    }
    await sleep(6000)

    const thread = (await api(gateways[0]!, "POST", "/threads", {})).json().thread_id as string
    const hanging = (await api(gateways[0]!, "POST", `/threads/${thread}/runs`, human("hang on"))).json()
    const owner = await ownerOf(hanging.run_id, "hang on")
    const other = gateways[1 - owner]!
    assert.isUndefined(other.runs.get(hanging.run_id), "the other process does not run it")

    // joined without Last-Event-ID at the process that does not run it: the active run's events, from its runner
    const joined = await threadStream(other, thread, undefined, (event) =>
      event.event === "messages" && JSON.stringify(event.data).includes("working"))
    const ofHanging = joined.filter((e) => e.id !== undefined)
    assert.isAbove(ofHanging.length, 0)
    for (const event of ofHanging) assert.strictEqual(runOf(event), hanging.run_id)
    const cursor = ofHanging.at(-1)!

    // the run cancelled; the thread's next run, started at the other process, runs at the thread's runner: the
    // stream rejoined from the cursor goes on after it, through the cancelled run's end, then the next run's events
    const rejoined = threadStream(other, thread, cursor.id, (event) => event.event === "end" && runOf(event) !== hanging.run_id)
    await sleep(500)
    const cancel = await api(other, "POST", `/threads/${thread}/runs/${hanging.run_id}/cancel?wait=true`)
    assert.strictEqual(cancel.status, 204, cancel.text)
    const next = await api(other, "POST", `/threads/${thread}/runs/wait`, human("second question"))
    assert.strictEqual(next.status, 200, next.text)
    const events = (await rejoined).filter((e) => e.id !== undefined)
    const firstRun = events.filter((e) => runOf(e) === hanging.run_id)
    const secondRun = events.filter((e) => runOf(e) !== hanging.run_id)
    // nothing at or before the cursor again, in order, the cancelled run's end, then a whole second run
    assert.isAbove(seqOf(firstRun[0] ?? secondRun[0]!), seqOf(cursor) - 1)
    if (firstRun.length > 0) assert.isAbove(seqOf(firstRun[0]!), seqOf(cursor))
    assert.strictEqual(firstRun.at(-1)?.event, "end")
    assert.strictEqual(secondRun[0]!.event, "metadata")
    secondRun.forEach((event, i) => assert.strictEqual(seqOf(event), i + 1))
    const lastValues = secondRun.filter((e) => e.event === "values").at(-1)!.data as any
    assert.deepStrictEqual(
      Support.visible(lastValues.messages).slice(-2).map((m: any) => [m.type, String(m.content).slice(0, 9)]),
      [["human", "second qu"], ["ai", "Answered:"]]
    )
    const secondId = runOf(secondRun[0]!)
    assert.isDefined(gateways.find((g) => g.runs.get(secondId) !== undefined), "a runner ran it")

    // from the owner too, with the second run's first event as cursor: the rest of it, the same events
    const fromOwner = await threadStream(gateways[owner]!, thread, secondRun[0]!.id, (event) => event.event === "end")
    assert.deepStrictEqual(fromOwner.filter((e) => e.id !== undefined), secondRun.slice(1))
    const fromOther = await threadStream(other, thread, secondRun[0]!.id, (event) => event.event === "end")
    assert.deepStrictEqual(fromOther.filter((e) => e.id !== undefined), secondRun.slice(1))
  }, 120_000)
})
