/**
 * `multitask_strategy: "enqueue"` queues a run behind the thread's active run, as LangGraph does: it is accepted
 * at once (`pending`), and runs when the active run ended, on the state that run left. It was a 422. A queued run
 * cancelled before its turn never runs.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "alice-token-enqueue-0000000"

let gateway: TestGateway

const api = Requests.as(() => gateway, TOKEN)

const lastText = (body: any) => JSON.stringify(body.messages[body.messages.length - 1]?.content ?? "")
const question = (text: string, strategy?: string) => ({
  input: { messages: [{ type: "human", content: text }] },
  ...(strategy !== undefined ? { multitask_strategy: strategy } : {})
})

beforeAll(async () => {
  gateway = await Support.start({
    // a long answer streamed slowly: the first run is still running when the next arrives
    script: (body) => lastText(body).includes("slow") ? `${"word ".repeat(60)}done` : "Quick answer.",
    server: { delayMs: 15 },
    config: { gateway: { auth: { tokens: [{ token: TOKEN, user: "alice" }] } } }
  })
})
afterAll(() => gateway?.stop())

describe("multitask_strategy enqueue", () => {
  it("a run queued behind the active one is accepted pending, then runs on what the first left", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "queue" })).status, 200)
    const first = (await api("POST", "/threads/queue/runs", question("slow one"))).json()
    const queued = await api("POST", "/threads/queue/runs", question("then two", "enqueue"))
    assert.strictEqual(queued.status, 200, queued.text)
    assert.strictEqual(queued.json().status, "pending")
    // still refused without enqueue
    assert.strictEqual((await api("POST", "/threads/queue/runs", question("three"))).status, 409)
    const values = (await api("GET", `/threads/queue/runs/${queued.json().run_id}/join`)).json()
    const texts = Support.visible(values.messages).map((m: any) => m.content)
    assert.deepStrictEqual(texts.map((t: string) => t.slice(0, 8)), ["slow one", "word wor", "then two", "Quick an"])
    // the queued run's model call saw the first run's whole answer
    const call = gateway.scripted.requests.find((r) => lastText(r).includes("then two"))!
    assert.include(JSON.stringify(call.messages), "done")
    const runs = (await api("GET", "/threads/queue/runs")).json()
    assert.deepStrictEqual(runs.map((r: any) => [r.run_id, r.status]), [
      [queued.json().run_id, "success"],
      [first.run_id, "success"]
    ])
  })

  it("a queued run streams its events once it runs; its response starts at once, its run id with it", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "streamed" })).status, 200)
    const first = (await api("POST", "/threads/streamed/runs", question("slow one"))).json()
    const response = await fetch(`${gateway.url}/threads/streamed/runs/stream`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ ...question("then two", "enqueue"), stream_mode: ["values"] })
    })
    assert.strictEqual(response.status, 200)
    // the headers came before the run ahead ended (they used to wait for the queued run's first event); that run
    // may not have started yet either (`pending`)
    const ahead = (await api("GET", `/threads/streamed/runs/${first.run_id}`)).json().status
    assert.include(["pending", "running"], ahead)
    assert.match(response.headers.get("content-location") ?? "", /\/runs\/[^/]+/)
    const { events } = await Support.readSse(response)
    assert.strictEqual(events.at(-1)!.event, "end")
    const values = events.filter((e) => e.event === "values").at(-1)!.data as any
    assert.strictEqual(Support.visible(values.messages).at(-1).content, "Quick answer.")
  })

  it("a queued run cancelled before its turn never runs", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "cancelled" })).status, 200)
    const first = (await api("POST", "/threads/cancelled/runs", question("slow one"))).json()
    const queued = (await api("POST", "/threads/cancelled/runs", question("never asked", "enqueue"))).json()
    const cancel = await api("POST", `/threads/cancelled/runs/${queued.run_id}/cancel?wait=1`)
    assert.strictEqual(cancel.status, 204, cancel.text)
    assert.strictEqual((await api("GET", `/threads/cancelled/runs/${queued.run_id}`)).json().status, "interrupted")
    await api("GET", `/threads/cancelled/runs/${first.run_id}/join`)
    assert.isFalse(gateway.scripted.requests.some((r) => lastText(r).includes("never asked")))
    const state = (await api("GET", "/threads/cancelled/state")).json()
    assert.notInclude(JSON.stringify(state.values.messages), "never asked")
  })
})
