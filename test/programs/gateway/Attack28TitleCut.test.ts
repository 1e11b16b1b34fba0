/**
 * Attack round 28 on the thread's title and one of the process's own secrets (a configured model's API key): the
 * local title (the user's words cut at 50 characters, when the title model fails) and the title model's title (cut at
 * `title.max_chars`) were masked for the run's request secrets only before their cut, and the store's and the stream's
 * masks find whole values only. A user pasting the key where the cut fell (or a title model saying it there) had the
 * key's beginning kept as the thread's title, streamed and listed.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000
const KEY = "sk-a28title-0123456789abcdefghij"
const START = KEY.slice(0, 8)
/** The user's words: the key 40 characters in (the local title keeps 50). */
const WORDS = `${"Deploy the report".padEnd(40, " now")}${KEY} please`

/**
 * The title call fails for the thread asking for a local title, and says the key back 50 characters in (cut at 60)
 * for the other; a run's call answers.
 */
const script = (body: ChatRequestBody): Turn => {
  if (!Support.lastUserText(body).startsWith("Generate a concise title")) return "Done."
  return JSON.stringify(body).includes("local title")
    ? { status: 400 }
    : `${"Report".padEnd(50, " of the day")}${KEY} deploy`
}

const { alice } = fileGateway(() =>
  Support.start({
    script,
    config: (url) => ({
      models: [{ ...Support.scriptedModel("scripted", url), api_key: KEY }, Support.scriptedModel("small", url)],
      title: { enabled: true, model_name: "small" },
      gateway: Support.twoUsers
    })
  }), SLOW)

/** A run on a new thread asked with `words`, streamed: the stream's text and the thread's title. */
const titled = async (thread: string, words: string) => {
  assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(words),
    stream_mode: ["values"]
  })
  assert.strictEqual(stream.status, 200, stream.text.slice(0, 300))
  const state = await alice("GET", `/threads/${thread}/state`)
  return { stream: stream.text, title: String(state.json().values.title) }
}

describe("Attack28: a title cut inside one of the process's own secrets", () => {
  it("the local title and the title model's title keep none of it, streamed, kept or listed", async () => {
    const local = await titled("a28-title-local", `${WORDS} (local title)`)
    assert.include(local.title, "Deploy the report now", "the local title")
    assert.include(local.title, "[redacted]", "masked, then cut")
    assert.notInclude(local.title, START)
    assert.notInclude(local.stream, START, "the stream")
    const model = await titled("a28-title-model", WORDS)
    assert.include(model.title, "Report of the day", "the title model's title")
    assert.notInclude(model.title, START)
    assert.notInclude(model.stream, START, "the stream")
    const searched = await alice("POST", "/threads/search", { limit: 10 })
    assert.include(searched.text, "Deploy the report now")
    assert.notInclude(searched.text, START, "the threads listed")
  }, SLOW)
})
