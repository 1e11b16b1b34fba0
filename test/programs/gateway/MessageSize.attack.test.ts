/**
 * One token user posting runs of megabyte messages, then listing them. Before: a message was bounded only by the
 * 16 MiB body, and a thread's history answered every state with every message, so six runs of 5 MiB messages (and
 * ten small ones) made `GET .../history?limit=1000` a 500 (RangeError: Invalid string length) after the gateway
 * grew by about 1 GB building it; a thread's run list answered every run with its whole input. Now a message past
 * `gateway.max_message_bytes`, a run's input past `max_run_input_bytes`, are a 413 naming them, with nothing kept;
 * a page of a history or of a run list ends at `max_page_bytes`, and the next page (`before`, `offset`) goes on.
 * The model is SCRIPTED; the clients speak HTTP.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { BOB } = Support
const MiB = 1024 * 1024
const KiB = 1024

/** Bounds small enough to test quickly. */
const TIGHT = { max_message_bytes: 64 * KiB, max_run_input_bytes: 160 * KiB, max_page_bytes: 512 * KiB }

let wide: TestGateway
let tight: TestGateway

beforeAll(async () => {
  ;({ gateway: wide } = await Support.startTwoUsers(() => "ok"))
  ;({ gateway: tight } = await Support.startTwoUsers(() => "ok", { gateway: { ...Support.twoUsers, ...TIGHT } }))
})
afterAll(async () => {
  await wide?.stop()
  await tight?.stop()
})

const bobOn = (gateway: () => TestGateway) => Requests.as(gateway, BOB)
const bob = bobOn(() => wide)
const bobTight = bobOn(() => tight)

const newThread = async (as: typeof bob): Promise<string> => (await as("POST", "/threads", {})).json().thread_id

const message = (content: string) => ({ role: "user", content })
const run = (as: typeof bob, threadId: string, input: unknown, extra: Record<string, unknown> = {}) =>
  as("POST", `/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input, ...extra })

describe("a message of megabytes", () => {
  it("past gateway.max_message_bytes (2 MiB) is a 413 naming it and the bound, and nothing is kept", async () => {
    const threadId = await newThread(bob)
    const huge = "m".repeat(5 * MiB)
    const body = { assistant_id: "lead_agent", input: { messages: [message("hi"), message(huge)] } }
    for (const path of [`/threads/${threadId}/runs/wait`, `/threads/${threadId}/runs/stream`, "/runs/wait", "/runs"]) {
      const refused = await bob("POST", path, body)
      assert.strictEqual(refused.status, 413, path)
      assert.strictEqual(
        refused.json().detail,
        `input.messages.1: ${JSON.stringify(message(huge)).length} bytes of JSON, more than ` +
          "gateway.max_message_bytes (2097152, 2.0 MB), the most one message holds."
      )
    }
    assert.deepStrictEqual((await bob("GET", `/threads/${threadId}/runs`)).json(), [])
    assert.deepStrictEqual((await bob("GET", `/threads/${threadId}/state`)).json().values.messages ?? [], [])
    // an answer to a question (`command.resume`) becomes a message: bounded as one
    const resumed = await run(bob, threadId, null, { command: { resume: "r".repeat(3 * MiB) } })
    assert.strictEqual(resumed.status, 413)
    assert.match(resumed.json().detail, /^command\.resume: \d+ bytes of JSON, more than gateway\.max_message_bytes/)
    // one within the bound is run and kept whole
    const within = "w".repeat(1.5 * MiB)
    const ran = await run(bob, threadId, { messages: [message(within)] })
    assert.strictEqual(ran.status, 200)
    assert.strictEqual(Support.visible(ran.json().messages)[0].content, within)
  }, 60_000)

  it("messages each within it but past gateway.max_run_input_bytes (4 MiB) together are a 413", async () => {
    const threadId = await newThread(bob)
    const part = "p".repeat(1.5 * MiB)
    const refused = await run(bob, threadId, { messages: [message(part), message(part), message(part)] })
    assert.strictEqual(refused.status, 413)
    assert.match(
      refused.json().detail,
      /^input: \d+ bytes of JSON, more than gateway\.max_run_input_bytes \(4194304, 4\.0 MB\), the most a run's input/
    )
    assert.deepStrictEqual((await bob("GET", `/threads/${threadId}/runs`)).json(), [])
  }, 60_000)

  it("written by a state update is bounded as a run's, and the state is kept as it was", async () => {
    const threadId = await newThread(bob)
    assert.strictEqual((await run(bob, threadId, { messages: [message("hello")] })).status, 200)
    const before = (await bob("GET", `/threads/${threadId}/state`)).json()
    const refused = await bob("POST", `/threads/${threadId}/state`, {
      values: { messages: [{ type: "human", content: "u".repeat(3 * MiB) }] }
    })
    assert.strictEqual(refused.status, 413)
    assert.match(refused.json().detail, /^values\.messages\.0: \d+ bytes of JSON, more than gateway\.max_message_bytes/)
    const many = Array.from({ length: 3 }, () => ({ type: "human", content: "v".repeat(1.5 * MiB) }))
    const together = await bob("POST", `/threads/${threadId}/state`, { values: { messages: many } })
    assert.strictEqual(together.status, 413)
    assert.match(together.json().detail, /^values\.messages: \d+ bytes of JSON, more than gateway\.max_run_input/)
    assert.deepStrictEqual((await bob("GET", `/threads/${threadId}/state`)).json(), before)
  }, 60_000)

  it("the bounds are the configured ones", async () => {
    const threadId = await newThread(bobTight)
    const over = await run(bobTight, threadId, { messages: [message("o".repeat(65 * KiB))] })
    assert.strictEqual(over.status, 413)
    assert.include(over.json().detail, "more than gateway.max_message_bytes (65536, 64.0 KB)")
    const part = "q".repeat(60 * KiB)
    const together = await run(bobTight, threadId, { messages: [message(part), message(part), message(part)] })
    assert.strictEqual(together.status, 413)
    assert.include(together.json().detail, "more than gateway.max_run_input_bytes (163840, 160.0 KB)")
    assert.strictEqual((await run(bobTight, threadId, { messages: [message(part), message(part)] })).status, 200)
  }, 60_000)

  for (
    const [gateway, says] of [
      [{ max_message_bytes: 0 }, "gateway.max_message_bytes"],
      [{ max_run_input_bytes: -1 }, "gateway.max_run_input_bytes"],
      [{ max_page_bytes: 1.5 }, "gateway.max_page_bytes"]
    ] as const
  ) {
    it(`a bound that is not a positive integer stops the start, naming it (${JSON.stringify(gateway)})`, async () => {
      const started = await Support.start({ script: () => "unused", config: { gateway } }).then(
        (made) => made.stop().then(() => assert.fail("the gateway started")),
        (error: unknown) => String(error)
      )
      assert.include(started, says)
    })
  }
})

describe("a thread of large messages, listed", () => {
  // (the attack as it was, within the message bounds: each run adds a message just within them, and every state
  // of the thread's history holds all those before it: six runs made a history of about 90 MB, twelve one larger
  // than V8's longest string, a 500)
  it("its history is answered in pages of at most gateway.max_page_bytes (32 MiB)", async () => {
    const threadId = await newThread(bob)
    const big = (i: number) => `${i}`.padEnd(2 * MiB - 64, "h")
    for (let i = 0; i < 6; i++) {
      const ran = await run(bob, threadId, { messages: [message(big(i))] })
      assert.strictEqual(ran.status, 200, `run ${i}`)
    }
    const answer = await bob("GET", `/threads/${threadId}/history?limit=1000`)
    assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
    assert.isAtMost(Buffer.byteLength(answer.text), 32 * MiB)
    const states = answer.json() as Array<any>
    assert.isAbove(states.length, 0)
    // the newest first, with every message
    const newest = Support.visible(states[0].values.messages).filter((m: any) => m.type === "human")
    assert.deepStrictEqual(newest.map((m: any) => m.content), Array.from({ length: 6 }, (_, i) => big(i)))
  }, 180_000)

  it("a history page ends within the bound, and `before` goes on to the first checkpoint", async () => {
    const threadId = await newThread(bobTight)
    for (let i = 0; i < 6; i++) {
      assert.strictEqual((await run(bobTight, threadId, { messages: [message(`${i}`.repeat(60 * KiB))] })).status, 200)
    }
    const walk = async (limit: number) => {
      const ids: Array<string> = []
      let pages = 0
      let before: string | undefined
      for (; pages < 100; pages++) {
        const answer = await bobTight("POST", `/threads/${threadId}/history`, { limit, before })
        assert.strictEqual(answer.status, 200)
        const states = answer.json() as Array<any>
        if (states.length === 0) break
        // a page holds one state at least; more only within the bound
        if (states.length > 1) assert.isAtMost(Buffer.byteLength(answer.text), TIGHT.max_page_bytes)
        ids.push(...states.map((state) => state.checkpoint.checkpoint_id))
        before = states.at(-1).checkpoint.checkpoint_id
      }
      return { ids, pages }
    }
    // pages of up to 1000 states end at the bound: several of them, together every state once, as one by one
    const paged = await walk(1000)
    const oneByOne = await walk(1)
    assert.isAbove(paged.pages, 1)
    assert.isBelow(paged.pages, oneByOne.pages)
    assert.deepStrictEqual(paged.ids, oneByOne.ids)
    const numbers = paged.ids.map(Number)
    assert.deepStrictEqual(numbers, [...numbers].sort((a, b) => b - a))
  }, 120_000)

  it("its runs are answered in pages of at most gateway.max_page_bytes, each run with its input", async () => {
    const threadId = await newThread(bobTight)
    const inputs = Array.from({ length: 10 }, (_, i) => ({ messages: [message(`${i}`.repeat(60 * KiB))] }))
    for (const input of inputs) assert.strictEqual((await run(bobTight, threadId, input)).status, 200)
    const listed: Array<any> = []
    for (let pages = 0; pages < 20 && listed.length < inputs.length; pages++) {
      const answer = await bobTight("GET", `/threads/${threadId}/runs?limit=1000&offset=${listed.length}`)
      assert.strictEqual(answer.status, 200)
      assert.isAtMost(Buffer.byteLength(answer.text), TIGHT.max_page_bytes)
      const page = answer.json() as Array<any>
      assert.isBelow(page.length, inputs.length, "a page of every run is past the bound")
      listed.push(...page)
    }
    // newest first, each with what it was asked
    assert.deepStrictEqual(listed.map((r) => r.kwargs.input), [...inputs].reverse())
    // a list that fits is whole
    const few = await bobTight("GET", `/threads/${threadId}/runs?limit=2&select=run_id`)
    assert.strictEqual(few.json().length, 2)
  }, 120_000)
})
