/**
 * Attack round 26 on the run's mask of its request secrets (`SkillSecrets.runRedactor`, `Redact.make`), as a user of
 * the gateway gives them (`context.secrets`) with a text that says one back.
 *
 * - A value whose masked form is long (its hex is twice its UTF-8 bytes: a 16 KiB token, 6,000 CJK characters; its
 *   URL-encoded form up to three times its bytes) made the redactor's one pattern too large for the JavaScript
 *   engine: every text it was asked to mask that held a URL, a `Bearer` word or the value failed with a SyntaxError
 *   quoting the whole pattern. The run's request failed (500) and the gateway's log printed the error, the value in
 *   plain text and in hex and base64 with it: the log hid the process's secrets only.
 * - A value of thousands of short lines made the redactor search tens of thousands of texts (each line alone, in every
 *   form) in every text of the run, on the gateway's one thread: seconds for one input. Their number is bounded now:
 *   a request past it is refused (422), naming the field and the bound, before anything is kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Logger from "effect/Logger"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000

/** Every log line of the gateway with the cause it was logged with, as the process's logger prints it. */
const logged: Array<string> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ cause, message }) => {
    logged.push([...[message].flat().map(String), Cause.isEmpty(cause) ? "" : Cause.pretty(cause)].join(" "))
  })
)

const { alice } = fileGateway(() =>
  Support.start({
    script: Support.echoOrHang,
    config: { gateway: Support.twoUsers },
    logger: capture
  }), SLOW)

/** A token of `length` characters, its start marked so that any part of it is found. */
const token = (length: number, mark: string) => {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
  let out = mark
  for (let i = 0; out.length < length; i++) out += alphabet[(i * 7919 + 13) % alphabet.length]
  return out
}

/** Whether `text` holds `value`, or its start, in plain text, hex or base64. */
const holds = (text: string, value: string) => {
  const start = value.slice(0, 24)
  return text.includes(start) || text.includes(Buffer.from(start).toString("hex")) ||
    text.includes(Buffer.from(value).toString("base64").slice(0, 24))
}

const runWith = async (thread: string, value: string, said: string) => {
  assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
  return alice("POST", `/threads/${thread}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(said),
    context: { secrets: { ERP_TOKEN: value } }
  })
}

describe("Attack26: a request secret whose masked forms are long", () => {
  for (
    const [what, value] of [
      ["a token of 16 KiB (its hex is 32 KiB)", token(16 * 1024, "LONGTOKEN-")],
      ["6,000 CJK characters (18,000 bytes: its hex is 36 KiB)", "秘密鍵CJK" + "鍵".repeat(5_994)]
    ] as const
  ) {
    it(`${what}: the run goes and masks it; the log never shows it`, async () => {
      const thread = `a26-long-${value.length}`
      const before = logged.length
      const waited = await runWith(thread, value, `fetch https://erp.example/api?token=${value} please`)
      assert.strictEqual(waited.status, 200, waited.text.slice(0, 400))
      assert.include(waited.text, "fetch https://erp.example/api?token=[redacted] please")
      assert.isFalse(holds(waited.text, value), "the run's answer")
      const state = await alice("GET", `/threads/${thread}/state`)
      assert.strictEqual(state.status, 200)
      assert.include(state.text, "fetch https://erp.example/api?token=[redacted] please")
      assert.include(state.text, "You said: ")
      assert.isFalse(holds(state.text, value), "the thread")
      const runs = await alice("GET", `/threads/${thread}/runs`)
      assert.strictEqual(runs.json()[0]?.status, "success", runs.text.slice(0, 400))
      assert.isFalse(holds(runs.text, value), "the run's record")
      const log = logged.slice(before).join("\n")
      assert.isFalse(holds(log, value), `the gateway's log: ${log.slice(0, 300)}`)
    }, SLOW)
  }
})

describe("Attack26: a request secret of many lines", () => {
  it("past the bound on the lines masked alone, the run is refused (422) naming it, nothing kept", async () => {
    const thread = "a26-lines"
    const lines = Array.from({ length: 1_800 }, (_, i) => `ln${String(i).padStart(6, "0")}`)
    const refused = await runWith(thread, lines.join("\n"), "hello")
    assert.strictEqual(refused.status, 422, refused.text)
    assert.include(refused.text, "context.secrets")
    assert.match(refused.text, /1800 lines of 8 characters or more; at most 256/)
    assert.notInclude(refused.text, "ln000001")
    const runs = await alice("GET", `/threads/${thread}/runs`)
    assert.deepStrictEqual(runs.json(), [])
  }, SLOW)

  it("a private key's 60 lines are taken; a line of it typed is masked, in the thread's title too", async () => {
    const lines = Array.from({ length: 60 }, (_, i) => token(64, `KEYLINE${String(i).padStart(3, "0")}`))
    const value = `-----BEGIN PRIVATE KEY-----\n${lines.join("\n")}\n-----END PRIVATE KEY-----`
    const waited = await runWith("a26-key", value, `line ${lines[41]} end`)
    assert.strictEqual(waited.status, 200, waited.text.slice(0, 400))
    assert.include(waited.text, "line [redacted] end")
    assert.notInclude(waited.text, "KEYLINE041")
    // (the local title is the user's words cut at 50 characters: the cut line's beginning was kept and listed)
    const thread = await alice("GET", "/threads/a26-key")
    assert.strictEqual(thread.status, 200)
    assert.notInclude(thread.text, "KEYLINE041")
    const state = await alice("GET", "/threads/a26-key/state")
    assert.strictEqual(state.json().values.title, "line [redacted] end")
    const searched = await alice("POST", "/threads/search", { limit: 10 })
    assert.notInclude(searched.text, "KEYLINE041")
  }, SLOW)
})
