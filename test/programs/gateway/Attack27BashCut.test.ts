/**
 * Attack round 27 on a bash command's long output in a run given request secrets: the command's output is masked
 * (the values its skills bound) before its middle is cut out, but a value of the run that no skill bound for the
 * command (in a file the user uploaded, printed by `cat`) was masked only after the cut, by the run's mask of whole
 * values: where the head's cut fell inside it, its beginning was read by the model and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { catUpload, secretAtHeadEnd } from "../../support/bashCut.js"
import { fileGateway } from "../../support/fileGateway.js"
import { uploadThenRun } from "../../support/uploadRun.js"
import * as Support from "./support.js"

const SLOW = 120_000
const SECRET = "sk-erp-a27-bash-0123456789abcdefghij"
const MAX = 1000
const TOTAL = 5000

const seenByModel: Array<string> = []
const script = catUpload(seenByModel)

const { alice } = fileGateway(() =>
  Support.start({
    script,
    config: { gateway: Support.twoUsers, sandbox: { allow_host_bash: true, bash_output_max_chars: MAX } }
  }), SLOW)

describe("Attack27: a bash output cut inside a request secret no skill bound", () => {
  it("none of the value is read by the model or kept", async () => {
    const { state } = await uploadThenRun(alice, "a27-bash-cut", secretAtHeadEnd(SECRET, MAX, TOTAL), "wait", {
      input: Support.userInput("read my config"),
      context: { secrets: { ERP_TOKEN: SECRET } }
    })
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "middle truncated", "the output was cut")
    assert.notInclude(seenByModel[0], SECRET.slice(0, 8), "what the model read")
    assert.notInclude(state.text, SECRET.slice(0, 8), "the thread")
  }, SLOW)
})
