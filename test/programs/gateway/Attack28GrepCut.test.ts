/**
 * Attack round 28 on `grep`'s long lines and one of the process's own secrets (a configured model's API key, in a file
 * the user uploaded): a matching line longer than 200 characters is cut to 197 and `...`, and the key was masked only
 * after the cut, by the stream's and the store's masks of whole values: where the cut fell inside it, its beginning was
 * read by the model, streamed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import { uploadThenRun } from "../../support/uploadRun.js"
import * as Support from "./support.js"

const SLOW = 120_000
const KEY = "sk-a28-grep-0123456789abcdefghijkl"

/** The file: a line with the key 187 characters in (the line's cut keeps 197). */
const content = () => `first line\n${"a".repeat(187)}${KEY}${"b".repeat(100)}\nlast line\n`

const seenByModel: Array<string> = []
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") {
    seenByModel.push(JSON.stringify(last.content))
    return "Read it."
  }
  const args = { description: "search the upload", pattern: "aaaa", path: "/mnt/user-data/uploads" }
  return { toolCalls: [{ name: "grep", arguments: args }] }
}

const { alice } = fileGateway(() =>
  Support.start({
    script,
    config: (url) => ({
      models: [{ ...Support.scriptedModel("scripted", url), api_key: KEY }],
      gateway: Support.twoUsers
    })
  }), SLOW)

describe("Attack28: a grep line cut inside one of the process's own secrets", () => {
  it("none of the key is read by the model, streamed or kept", async () => {
    const { run: stream, state } = await uploadThenRun(alice, "a28-grep-cut", content(), "stream", {
      input: Support.userInput("search my config"),
      stream_mode: ["values", "messages-tuple", "custom"]
    })
    const start = KEY.slice(0, 8)
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "config.txt:2: aaaa", "the model read the line")
    assert.include(seenByModel[0], "a[redacted]...", "masked, then cut")
    assert.notInclude(seenByModel[0], start, "what the model read")
    assert.notInclude(stream.text, start, "the stream")
    assert.notInclude(state.text, start, "the thread")
  }, SLOW)
})
