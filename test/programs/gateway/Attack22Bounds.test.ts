/**
 * Attack round 22 on the input bounds (`gateway.max_message_bytes`, `max_run_input_bytes`), as a token user of a
 * gateway whose operator set them low: a cron's input is a run's input at each of its ticks, so it is bounded as
 * one. Before, a cron's payload was checked against the defaults (2 MiB a message), whatever the configuration
 * said, so a message five times the configured bound was kept and added to a thread every minute.
 * The model is SCRIPTED; the clients speak HTTP.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024
const TIGHT = { max_message_bytes: 32 * KiB, max_run_input_bytes: 48 * KiB }

let gateway: TestGateway
beforeAll(async () => {
  ;({ gateway } = await Support.startTwoUsers(() => "ok", { gateway: { ...Support.twoUsers, ...TIGHT } }))
})
afterAll(async () => {
  await gateway?.stop()
})

const bob = Requests.as(() => gateway, Support.BOB)
const message = (content: string) => ({ role: "user", content })

describe("a cron's input is bounded as a run's, by the configured bounds", () => {
  it("a message past max_message_bytes is a 413 naming it, on a thread's cron or a stateless one", async () => {
    const threadId = (await bob("POST", "/threads", {})).json().thread_id as string
    const huge = "m".repeat(160 * KiB)
    const body = { assistant_id: "lead_agent", schedule: "0 9 * * *", input: { messages: [message(huge)] } }
    for (const path of [`/threads/${threadId}/runs/crons`, "/runs/crons"]) {
      const refused = await bob("POST", path, body)
      assert.strictEqual(refused.status, 413, `${path}: ${refused.text.slice(0, 200)}`)
      assert.strictEqual(
        refused.json().detail,
        `input.messages.0: ${JSON.stringify(message(huge)).length} bytes of JSON, more than ` +
          "gateway.max_message_bytes (32768, 32.0 KB), the most one message holds."
      )
    }
    assert.deepStrictEqual((await bob("POST", "/runs/crons/search", {})).json(), [])
    // messages each within it, past max_run_input_bytes together
    const part = "p".repeat(30 * KiB)
    const together = await bob("POST", "/runs/crons", { ...body, input: { messages: [message(part), message(part)] } })
    assert.strictEqual(together.status, 413)
    assert.match(together.json().detail, /^input: \d+ bytes of JSON, more than gateway\.max_run_input_bytes/)
    // an update of a cron's input is bounded too; one within the bounds is kept
    const made = await bob("POST", "/runs/crons", { ...body, input: { messages: [message("hello")] } })
    assert.strictEqual(made.status, 200, made.text)
    const cronId = made.json().cron_id as string
    const patched = await bob("PATCH", `/runs/crons/${cronId}`, { input: { messages: [message(huge)] } })
    assert.strictEqual(patched.status, 413, patched.text.slice(0, 200))
    const kept = (await bob("POST", "/runs/crons/search", {})).json()
    assert.deepStrictEqual(kept.map((c: any) => c.payload.input.messages[0].content), ["hello"])
  })
})

describe("a state update is bounded whole, not only its messages", () => {
  it("fields besides messages past max_run_input_bytes are a 413 naming them, and nothing is kept", async () => {
    const threadId = (await bob("POST", "/threads", {})).json().thread_id as string
    const todos = Array.from({ length: 40 }, (_, i) => ({ content: `${i} ${"t".repeat(2 * KiB)}`, status: "pending" }))
    const refused = await bob("POST", `/threads/${threadId}/state`, { values: { todos } })
    assert.strictEqual(refused.status, 413, refused.text.slice(0, 300))
    assert.match(refused.json().detail, /^values: \d+ bytes of JSON, more than gateway\.max_run_input_bytes/)
    assert.isNull((await bob("GET", `/threads/${threadId}/state`)).json().values.todos)
    // an honest update is kept
    const kept = await bob("POST", `/threads/${threadId}/state`, { values: { todos: todos.slice(0, 2) } })
    assert.strictEqual(kept.status, 200, kept.text.slice(0, 300))
    assert.lengthOf((await bob("GET", `/threads/${threadId}/state`)).json().values.todos, 2)
  })
})

describe("a run's metadata is bounded (held: 64 KiB, as a thread's)", () => {
  it("metadata past the bound is refused naming it, and no run starts", async () => {
    const threadId = (await bob("POST", "/threads", {})).json().thread_id as string
    const metadata = { note: "n".repeat(200 * KiB) }
    const refused = await bob("POST", `/threads/${threadId}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [message("hi")] },
      metadata
    })
    assert.include([413, 422], refused.status, refused.text.slice(0, 300))
    assert.match(refused.json().detail, /metadata/)
    assert.deepStrictEqual((await bob("GET", `/threads/${threadId}/runs`)).json(), [])
  })
})
