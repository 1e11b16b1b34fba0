/**
 * A request secret (`context.secrets`) that the user also typed into the run's own input: the thread and the stream
 * hide it (the run's redactor, `RunSecretsStore`), and the run's record, which keeps what the run was asked with
 * (`kwargs.input`, its `metadata`), keeps and answers it masked too, in every form the run's redactor masks (the value,
 * one line of a value of several, URL-encoded, JSON-escaped, base64, hex), through every route that answers the run:
 * its create answer, GET of the run, the runs list, join, wait. The secrets themselves (`context.secrets`,
 * `config.context.secrets`) are never kept or answered.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const MARK = "DO-NOT-LEAK"
/** A secret of two lines (a PEM-like key): each line is masked alone too. */
const LINE_ONE = `erp-line-one-${MARK}-7f3c`
const LINE_TWO = "erp-line-two-91ab-c0ffee"
const SECRET = `${LINE_ONE}\n${LINE_TWO}`
const B64 = Buffer.from(LINE_ONE).toString("base64")
const HEX = Buffer.from(LINE_ONE).toString("hex")

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Noted.", config: { gateway: Support.twoUsers } })
}, SLOW)
afterAll(() => gateway?.stop())

/** What the user typed: the secret in each form, and an ordinary word (`kept`) that must stay. */
const typed = `kept: my token is ${SECRET} (url ${encodeURIComponent(LINE_ONE)}, b64 ${B64}, hex ${HEX}, ` +
  `json ${JSON.stringify(SECRET).slice(1, -1)}, line ${LINE_TWO})`

const assertHidden = (text: string, where: string) => {
  assert.notInclude(text, MARK, where)
  assert.notInclude(text, LINE_TWO, where)
  assert.notInclude(text, B64.slice(2, 22), where)
  assert.notInclude(text, HEX.slice(0, 24), where)
}

const body = (extra: Record<string, unknown> = {}) => ({
  assistant_id: "lead_agent",
  input: Support.userInput(typed),
  context: { secrets: { ERP_TOKEN: SECRET }, mode: "flash" },
  metadata: { note: `typed ${LINE_ONE}` },
  ...extra
})

describe("Secrets25b: a request secret the user typed into the run's own input", () => {
  it("is masked in the run's record as kept and answered: create, get, list, join, wait, the store", async () => {
    const thread = "s25b-record"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const created = await alice("POST", `/threads/${thread}/runs`, body())
    assert.strictEqual(created.status, 200, created.text)
    const runId = created.json().run_id as string
    const joined = await alice("GET", `/threads/${thread}/runs/${runId}/join`)
    assert.strictEqual(joined.status, 200, joined.text)
    const record = await alice("GET", `/threads/${thread}/runs/${runId}`)
    const listed = await alice("GET", `/threads/${thread}/runs`)
    const kwargs = record.json().kwargs
    // the input is kept, as sent, with each form of the secret masked
    const kept = JSON.stringify(kwargs.input)
    assert.include(kept, "kept: my token is [redacted]")
    assert.include(kept, "b64 [redacted]")
    assert.include(kept, "hex [redacted]")
    assert.deepStrictEqual(kwargs.context, { mode: "flash" }, "the secrets are not kept in the context")
    assert.include(JSON.stringify(record.json().metadata), "typed [redacted]")
    for (const [where, text] of Object.entries({ created, joined, record, listed })) assertHidden(text.text, where)
    const stored = await Effect.runPromise(gateway.store.runs({ runId }))
    assert.isAbove(stored.length, 0)
    assertHidden(JSON.stringify(stored), "the stored record")
  }, SLOW)

  it("is masked in a wait's answer and its record; config.context.secrets is neither kept nor answered", async () => {
    const thread = "s25b-wait"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const { context: _, ...rest } = body()
    const waited = await alice("POST", `/threads/${thread}/runs/wait`, {
      ...rest,
      config: { context: { secrets: { ERP_TOKEN: SECRET }, mode: "pro" }, configurable: { note: LINE_ONE } }
    })
    assert.strictEqual(waited.status, 200, waited.text)
    const listed = await alice("GET", `/threads/${thread}/runs`)
    const run = listed.json()[0]
    assert.deepStrictEqual(run.kwargs.config.context, { mode: "pro" })
    assert.strictEqual(run.kwargs.config.configurable.note, "[redacted]")
    assert.include(JSON.stringify(run.kwargs.input), "kept: my token is [redacted]")
    for (const [where, text] of Object.entries({ waited, listed })) assertHidden(text.text, where)
    assertHidden(JSON.stringify(await Effect.runPromise(gateway.store.runs({ runId: run.run_id }))), "stored")
  }, SLOW)

  it("is masked in the record of a run queued behind another (enqueue)", async () => {
    const thread = "s25b-queued"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const first = await alice("POST", `/threads/${thread}/runs`, body())
    const second = await alice("POST", `/threads/${thread}/runs`, body({ multitask_strategy: "enqueue" }))
    assert.strictEqual(second.status, 200, second.text)
    const runId = second.json().run_id as string
    await alice("GET", `/threads/${thread}/runs/${first.json().run_id}/join`)
    await alice("GET", `/threads/${thread}/runs/${runId}/join`)
    const record = await alice("GET", `/threads/${thread}/runs/${runId}`)
    assert.include(JSON.stringify(record.json().kwargs.input), "kept: my token is [redacted]")
    for (const [where, text] of Object.entries({ first, second, record })) assertHidden(text.text, where)
    assertHidden(JSON.stringify(await Effect.runPromise(gateway.store.runs({ runId }))), "the queued run's record")
  }, SLOW)
})
