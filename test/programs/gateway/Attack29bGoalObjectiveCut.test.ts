/**
 * Attack round 29b on the goal's objective and one of the process's own secrets (a configured model's key): an
 * objective a client wrote through a state update (the goal endpoint bounds its own at 4,000 characters) is cut at
 * `MAX_OBJECTIVE_CHARS` in the evaluator's question and in each continuation. Held: the goal loop reads the objective
 * from the thread, and the gateway's store masks the key whole as it keeps it, before any cut; neither model, the
 * stream nor the thread's hidden continuation reads the key's beginning.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import { continuations, isEvaluator, verdict } from "../../support/goalScript.js"
import * as Support from "./support.js"

const SLOW = 120_000
// (the key of a second configured model: the evaluating model's adapter knows only its own)
const KEY = "sk-a29b-goal-0123456789abcdefghijkl"
const START = KEY.slice(0, 8)

const seen: Array<string> = []
let evaluated = 0
const script = (body: ChatRequestBody): Turn => {
  seen.push(JSON.stringify(body.messages))
  if (isEvaluator(body)) return verdict(evaluated++ > 0)
  return continuations(body) > 0 ? "Done now." : "I tried."
}

const { alice } = fileGateway(() => Support.startWithOtherKey(script, KEY), SLOW)

describe("Attack29b: the goal's objective cut inside one of the process's own secrets", () => {
  it("the evaluator, the agent and the thread read none of the key", async () => {
    const thread = "a29b-goal-objective"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const now = new Date().toISOString()
    const goal = {
      // (the key 3,990 characters in: the cut at 4,000 keeps 10 of it)
      objective: `${"o".repeat(3990)}${KEY} is the report's key`,
      status: "active",
      created_at: now,
      updated_at: now,
      continuation_count: 0,
      max_continuations: 8,
      no_progress_count: 0,
      max_no_progress_continuations: 2
    }
    const seeded = await alice("POST", `/api/threads/${thread}/state`, { values: { goal } })
    assert.strictEqual(seeded.status, 200, seeded.text)
    // (held: the store masks the key whole as it keeps the objective, before the goal loop reads and cuts it)
    const kept = (await alice("GET", `/api/threads/${thread}/goal`)).json().goal.objective
    assert.include(kept, "o[redacted] is the report's key")
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("fetch the report"),
      stream_mode: ["values", "updates", "custom"]
    })
    assert.strictEqual(stream.status, 200, stream.text.slice(0, 300))
    assert.strictEqual(evaluated, 2, "evaluated, continued, evaluated again")
    const asked = seen.filter((text) => text.includes("Active goal"))
    assert.isAtLeast(asked.length, 2, "the evaluator's question and the continuation")
    for (const text of asked) {
      assert.include(text, "oooo", "the objective is read")
      assert.notInclude(text, START, "what a model reads")
    }
    assert.notInclude(stream.text, START, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.include(state.text, "goal_continuation")
    assert.notInclude(state.text, START, "the thread")
  }, SLOW)
})
