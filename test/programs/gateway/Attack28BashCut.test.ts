/**
 * Attack round 28 on a bash command's long output holding one of the process's own secrets (a configured model's API
 * key, in a file the user uploaded, printed by `cat`): the output was masked before its middle was cut out for the
 * run's values only, and the process's key only after the cut, by the stream's and the store's masks of whole values:
 * where the head's cut fell inside it, its beginning was read by the model, streamed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { catUpload, secretAtHeadEnd } from "../../support/bashCut.js"
import { fileGateway } from "../../support/fileGateway.js"
import { uploadThenRun } from "../../support/uploadRun.js"
import * as Support from "./support.js"

const SLOW = 120_000
const KEY = "sk-a28-bash-0123456789abcdefghijkl"
const MAX = 1000
const TOTAL = 5000

const seenByModel: Array<string> = []
const script = catUpload(seenByModel)

const { alice } = fileGateway(() =>
  Support.start({
    script,
    config: (url) => ({
      models: [{ ...Support.scriptedModel("scripted", url), api_key: KEY }],
      gateway: Support.twoUsers,
      sandbox: { allow_host_bash: true, bash_output_max_chars: MAX }
    })
  }), SLOW)

describe("Attack28: a bash output cut inside one of the process's own secrets", () => {
  it("none of the key is read by the model, streamed or kept", async () => {
    const file = secretAtHeadEnd(KEY, MAX, TOTAL)
    const { run: stream, state } = await uploadThenRun(alice, "a28-bash-cut", file, "stream", {
      input: Support.userInput("read my config"),
      stream_mode: ["values", "messages-tuple", "custom"]
    })
    const start = KEY.slice(0, 8)
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "middle truncated", "the output was cut")
    assert.include(seenByModel[0], "a[redacted]", "masked, then cut")
    assert.notInclude(seenByModel[0], start, "what the model read")
    assert.notInclude(stream.text, start, "the stream")
    assert.notInclude(state.text, start, "the thread")
  }, SLOW)
})
