/**
 * `multitask_strategy` across the processes of a cluster (issue 30, `gateway.cluster`): a thread's active run
 * executes on its shard's runner, and a client sends the next run to another process. Each strategy holds as on
 * one process: `reject` refuses (Cluster.test.ts), `interrupt` stops the active run and goes ahead, `rollback`
 * stops it and takes back what it added, `enqueue` queues the new run behind it. Skipped, saying why, without
 * PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import { as } from "../../support/requests.js"
import { freePort } from "../../support/ports.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster multitask] skipped: ${pg.skip}`)

const script = (body: ChatRequestBody): Turn => {
  const last = [...body.messages].reverse().find((m) => m.role === "user" && typeof m.content === "string")
  const text = String(last?.content ?? "")
  if (text.includes("hang")) return { content: "working", stall: true }
  return `Answered: ${/first question|interrupting|rolling back|queued/.exec(text)?.[0] ?? "?"}`
}

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const api = (gateway: TestGateway, method: string, path: string, body?: unknown) => as(() => gateway)(method, path, body)
const human = (content: string, strategy?: string) => ({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content }] },
  ...(strategy === undefined ? {} : { multitask_strategy: strategy })
})
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const ownerOf = (runId: string, asked: string) => Support.runnerAsked(gateways, runId, asked)

const texts = (state: any): ReadonlyArray<string> =>
  Support.visible(state.values.messages).map((m: any) => String(m.content).slice(0, 12))

describe.skipIf("skip" in pg)("multitask_strategy across the processes of a cluster", () => {
  it("interrupt, rollback and enqueue sent to a process that does not run the active run", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-mt-")
    for (let i = 0; i < 2; i++) {
      gateways.push(await Support.start({
        script,
        home,
        config: { database: { url }, gateway: { cluster: { runner_port: await freePort() } } }
      }))
    }
    for (let i = 0; i < 600 && Postgres.psql(url, "SELECT count(*) FROM cluster_runners WHERE healthy") !== "2"; i++) await sleep(100)
    await sleep(6000)

    const thread = (await api(gateways[0]!, "POST", "/threads", {})).json().thread_id as string
    const first = await api(gateways[0]!, "POST", `/threads/${thread}/runs/wait`, human("first question"))
    assert.strictEqual(first.status, 200, first.text)

    // interrupt: the active run ends interrupted, the new one goes ahead on what it left
    const hanging = (await api(gateways[0]!, "POST", `/threads/${thread}/runs`, human("hang on"))).json()
    const other = gateways[1 - (await ownerOf(hanging.run_id, "hang on"))]!
    const over = await api(other, "POST", `/threads/${thread}/runs/wait`, human("interrupting", "interrupt"))
    assert.strictEqual(over.status, 200, over.text)
    assert.strictEqual((await api(other, "GET", `/threads/${thread}/runs/${hanging.run_id}`)).json().status, "interrupted")
    assert.deepStrictEqual(texts(await api(other, "GET", `/threads/${thread}/state`).then((r) => r.json())), [
      "first questi",
      "Answered: fi",
      "hang on",
      "working",
      "interrupting",
      "Answered: in"
    ])

    // rollback: the active run is stopped and what it added to the thread is taken back
    const rolled = (await api(other, "POST", `/threads/${thread}/runs`, human("hang again"))).json()
    const notOwner = gateways[1 - (await ownerOf(rolled.run_id, "hang again"))]!
    const after = await api(notOwner, "POST", `/threads/${thread}/runs/wait`, human("rolling back", "rollback"))
    assert.strictEqual(after.status, 200, after.text)
    const rolledRecord = await api(notOwner, "GET", `/threads/${thread}/runs/${rolled.run_id}`)
    assert.include(["gone", "error", "interrupted"], rolledRecord.status === 200 ? rolledRecord.json().status : "gone")
    const afterRollback = texts(await api(notOwner, "GET", `/threads/${thread}/state`).then((r) => r.json()))
    assert.notInclude(afterRollback, "hang again")
    assert.deepStrictEqual(afterRollback.slice(-2), ["rolling back", "Answered: ro"])

    // enqueue: accepted pending behind the active run, and run once that one is cancelled (from the other process)
    const blocking = (await api(notOwner, "POST", `/threads/${thread}/runs`, human("hang three"))).json()
    const runner = await ownerOf(blocking.run_id, "hang three")
    const queued = await api(gateways[1 - runner]!, "POST", `/threads/${thread}/runs`, human("queued", "enqueue"))
    assert.strictEqual(queued.status, 200, queued.text)
    assert.strictEqual(queued.json().status, "pending")
    // still refused without a strategy
    assert.strictEqual((await api(gateways[1 - runner]!, "POST", `/threads/${thread}/runs`, human("no"))).status, 409)
    const cancel = await api(gateways[1 - runner]!, "POST", `/threads/${thread}/runs/${blocking.run_id}/cancel?wait=true`)
    assert.strictEqual(cancel.status, 204, cancel.text)
    const joined = await api(gateways[1 - runner]!, "GET", `/threads/${thread}/runs/${queued.json().run_id}/join`)
    assert.strictEqual(joined.status, 200, joined.text)
    assert.deepStrictEqual(Support.visible(joined.json().messages).slice(-2).map((m: any) => m.content.slice(0, 12)), [
      "queued",
      "Answered: qu"
    ])
    const statuses = (await api(gateways[runner]!, "GET", `/threads/${thread}/runs`)).json()
      .map((r: any) => [r.run_id, r.status])
    assert.deepInclude(statuses, [queued.json().run_id, "success"])
    assert.deepInclude(statuses, [blocking.run_id, "interrupted"])
  }, 180_000)
})
