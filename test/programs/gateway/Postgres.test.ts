/**
 * Several gateways on one PostgreSQL database (`database.url`), as several `antler serve` processes share threads:
 * a thread made and run on one is read and continued on another; while one runs a thread, the others refuse a
 * run on it (the lease in the database) and cannot cancel it; a gateway starting up leaves the live runs of
 * the others alone. Skipped, saying why, without PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway Postgres] skipped: ${pg.skip}`)

// the user's messages the model got (not the date reminder of the thread's first turn)
const questions = (body: ChatRequestBody) =>
  body.messages.filter((m) => m.role === "user" && !JSON.stringify(m.content).includes("<system-reminder>"))

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(questions(body).at(-1)?.content ?? "")
  if (text.includes("hang")) return { content: "working", stall: true }
  return `Answered ${questions(body).length} question(s).`
}

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const post = (gateway: TestGateway, path: string, body: unknown) =>
  fetch(`${gateway.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
const get = async (gateway: TestGateway, path: string) => (await fetch(`${gateway.url}${path}`)).json() as Promise<any>
const human = (content: string) => ({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content }] } })

describe.skipIf("skip" in pg)("gateways sharing a PostgreSQL database", () => {
  it("share threads and runs; one run per thread across them; startup recovery spares live runs", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-pg-")
    const config = { database: { url } }
    const a = await Support.start({ script, config, home })
    gateways.push(a)
    const b = await Support.start({ script, config, home })
    gateways.push(b)

    const thread = await (await post(a, "/threads", { metadata: { shared: true } })).json() as any
    assert.strictEqual((await post(a, `/threads/${thread.thread_id}/runs/wait`, human("first"))).status, 200)
    const seen = await get(b, `/threads/${thread.thread_id}/state`)
    assert.deepStrictEqual(Support.visibleTypes(seen.values.messages), ["human", "ai"])
    const continued = await (await post(b, `/threads/${thread.thread_id}/runs/wait`, human("second"))).json() as any
    assert.strictEqual(continued.messages.at(-1).content, "Answered 2 question(s).")
    assert.strictEqual(Support.visible((await get(a, `/threads/${thread.thread_id}/state`)).values.messages).length, 4)
    assert.deepStrictEqual((await get(a, `/threads/${thread.thread_id}/runs`)).map((r: any) => r.status), ["success", "success"])

    // a runs the thread: b refuses another run on it and cannot cancel a's
    const hanging = await (await post(a, `/threads/${thread.thread_id}/runs`, human("hang on"))).json() as any
    for (let i = 0; i < 400; i++) {
      if ((await get(b, `/threads/${thread.thread_id}/runs/${hanging.run_id}`)).status === "running") break
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const refused = await post(b, `/threads/${thread.thread_id}/runs`, human("me too"))
    assert.strictEqual(refused.status, 409)
    assert.include(((await refused.json()) as any).detail, hanging.run_id)
    const cancel = await fetch(`${b.url}/threads/${thread.thread_id}/runs/${hanging.run_id}/cancel`, { method: "POST" })
    assert.strictEqual(cancel.status, 409)
    assert.include(((await cancel.json()) as any).detail, "another gateway process")
    assert.strictEqual((await get(b, `/threads/${thread.thread_id}`)).status, "busy")

    // a third gateway starting now settles only runs nobody holds: a's run goes on
    const c = await Support.start({ script, config, home })
    gateways.push(c)
    assert.strictEqual((await get(c, `/threads/${thread.thread_id}/runs/${hanging.run_id}`)).status, "running")

    // a stops (its run is cancelled, what it completed saved); the thread is free for the others
    await a.stop()
    gateways.splice(gateways.indexOf(a), 1)
    assert.strictEqual((await get(b, `/threads/${thread.thread_id}/runs/${hanging.run_id}`)).status, "interrupted")
    const after = await (await post(c, `/threads/${thread.thread_id}/runs/wait`, human("third"))).json() as any
    assert.strictEqual(after.messages.at(-1).content, "Answered 4 question(s).")
  }, 120_000)
})
