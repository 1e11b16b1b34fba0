/**
 * Attack round 29 on the composer's helpers and one of the process's own secrets (a configured model's key): the
 * follow-up questions are each cut at 300 characters, and nothing masked the model's answer, before the cut or after
 * it. A model saying a configured key back (the conversation the app sends held it; a proxy put it in) had it, or its
 * beginning where the cut fell, in the route's answer. A polished draft is cut at 100,000 characters the same way.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000
// (the key of a second configured model: the answering model's adapter knows only its own)
const KEY = "sk-a29-suggest-0123456789abcdefghij"
const START = KEY.slice(0, 8)

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  // (the first question holds the key 290 characters in: its cut at 300 keeps 10 of it; the second, whole)
  if (text.includes("follow-up questions")) {
    return JSON.stringify([`${"x".repeat(290)}${KEY} ok?`, `Is ${KEY} the key?`])
  }
  // (the key 99,990 characters into the draft: its cut at 100,000 keeps 10 of it)
  return `Rewritten: ${"y".repeat(99_979)}${KEY} and more`
}

const { alice } = fileGateway(
  () => Support.startWithOtherKey(script, KEY, { input_polish: { enabled: true, max_chars: 100 } }),
  SLOW
)

describe("Attack29: the composer's answers and one of the process's own secrets", () => {
  it("follow-up questions say none of the key, whole or cut", async () => {
    const thread = "a29-suggest"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const answer = await alice("POST", `/api/threads/${thread}/suggestions`, {
      messages: [{ role: "user", content: "what next?" }, { role: "assistant", content: "Noted." }],
      n: 2
    })
    assert.strictEqual(answer.status, 200, answer.text)
    const [cut, whole] = answer.json().suggestions
    assert.include(cut, "x[redacted]", "masked, then cut")
    assert.strictEqual(whole, "Is [redacted] the key?")
    assert.notInclude(answer.text, START)
  }, SLOW)

  it("a polished draft says none of the key", async () => {
    const answer = await alice("POST", "/api/input-polish", { text: "tidy this up" })
    assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
    assert.include(answer.json().rewritten_text, "y[redacted]", "masked, then cut")
    assert.notInclude(answer.text, START)
  }, SLOW)
})
