/**
 * Attack round 29 on the goal evaluator's verdict and one of the process's own secrets (a configured model's key): its
 * reason is made one line and cut at 1,000 characters (`MAX_REASON_CHARS`), kept as the thread's goal, and only the
 * store's and the stream's masks of whole values ran after the cut. An evaluator saying the key where the cut fell had
 * its beginning kept in the goal and streamed.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import { isEvaluator, verdict } from "../../support/goalScript.js"
import * as Support from "./support.js"

const SLOW = 120_000
// (the key of a second configured model: the evaluating model's adapter knows only its own)
const KEY = "sk-a29-goal-0123456789abcdefghijkl"
const START = KEY.slice(0, 8)

const script = (body: ChatRequestBody): Turn =>
  isEvaluator(body)
    // (the key 990 characters into the reason: its cut at 1,000 keeps 10 of it)
    ? verdict(false, "needs_user_input", `${"x".repeat(990)}${KEY} was refused; the user must give another.`)
    : "I tried."

const { alice } = fileGateway(() => Support.startWithOtherKey(script, KEY), SLOW)

describe("Attack29: the goal evaluator's reason cut inside one of the process's own secrets", () => {
  it("the goal and the stream keep none of the key", async () => {
    const thread = "a29-goal-cut"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const put = await alice("PUT", `/api/threads/${thread}/goal`, { objective: "Get the ERP report" })
    assert.strictEqual(put.status, 200, put.text)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("fetch the report"),
      stream_mode: ["values", "updates", "custom"]
    })
    assert.strictEqual(stream.status, 200, stream.text.slice(0, 300))
    const goal = await alice("GET", `/api/threads/${thread}/goal`)
    assert.include(goal.text, "x[redacted]", "masked, then cut")
    assert.notInclude(goal.text, START, "the goal")
    assert.notInclude(stream.text, START, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.notInclude(state.text, START, "the thread")
  }, SLOW)
})
