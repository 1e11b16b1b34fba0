/**
 * Attack round 29 on the run journal's cuts (DeerFlow's `STEP_MAX_CHARS`, 8,192 characters: a subagent's step, its
 * tool calls' arguments, its result; a message's content at `MAX_CONTENT_CHARS`, a run's error) and one of the
 * process's own secrets (a configured model's API key): the journal cut the text, and the gateway's mask of whole
 * values ran only after it, on the events it kept. A subagent saying the key where a cut fell had the key's beginning
 * kept in `GET /api/threads/{id}/runs/{run_id}/events`.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as RunJournal from "../../../src/programs/gateway/RunJournal.js"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000
// (the key of a second configured model: the running model's adapter masks only its own)
const KEY = "sk-a29-journal-0123456789abcdefghij"
const START = KEY.slice(0, 8)
/** A text with the key where a cut at `max` falls (12 characters of it before the cut). */
const across = (max: number) => `${"x".repeat(max - 12)}${KEY} said back\n`

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  const last = body.messages.at(-1)
  // the subagent: a call whose arguments are cut, then an answer whose step and result are cut
  if (text.includes("general-purpose subagent")) {
    if (last?.role === "tool") return across(RunJournal.STEP_MAX_CHARS)
    // (its arguments as the journal writes them: `{"description": "` before the text)
    const description = across(RunJournal.STEP_MAX_CHARS - 17)
    return { toolCalls: [{ name: "ls", arguments: { description, path: "/mnt" } }] }
  }
  if (last?.role === "tool") return "Delegated."
  const args = { description: "look around", prompt: "list the workspace", subagent_type: "general-purpose" }
  return { toolCalls: [{ name: "task", arguments: args }] }
}

const { alice } = fileGateway(() => Support.startWithOtherKey(script, KEY), SLOW)

describe("Attack29: the run journal's cuts inside one of the process's own secrets", () => {
  it("a subagent's steps, calls and result keep none of the key", async () => {
    const thread = "a29-journal-cut"
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: thread })).status, 200)
    const run = await alice("POST", `/api/threads/${thread}/runs/wait`, {
      input: Support.userInput("delegate it"),
      context: { subagent_enabled: true }
    })
    assert.strictEqual(run.status, 200, run.text.slice(0, 300))
    const runs = (await alice("GET", `/api/threads/${thread}/runs`)).json()
    const runId = runs[0].run_id
    const events = await alice("GET", `/api/threads/${thread}/runs/${runId}/events`)
    const steps = events.json().filter((e: any) => e.event_type === "subagent.step")
    const call = steps.find((e: any) => e.content.kind === "ai" && e.content.tool_calls.length > 0)
    assert.isTrue(call.content.tool_calls[0].args_truncated, "the call's arguments were cut")
    assert.include(call.content.tool_calls[0].args, "x[redacted]", "masked, then cut")
    const answer = steps.find((e: any) => e.content.kind === "ai" && e.content.text.startsWith("xxx"))
    assert.isTrue(answer.content.truncated, "the answer's step was cut")
    assert.include(answer.content.text, "x[redacted]", "masked, then cut")
    const end = events.json().find((e: any) => e.event_type === "subagent.end")
    assert.include(end.content.result, "x[redacted]", "the result: masked, then cut")
    assert.notInclude(events.text, START, "the journal")
  }, SLOW)
})
