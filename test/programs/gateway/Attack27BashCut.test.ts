/**
 * Attack round 27 on a bash command's long output in a run given request secrets: the command's output is masked
 * (the values its skills bound) before its middle is cut out, but a value of the run that no skill bound for the
 * command (in a file the user uploaded, printed by `cat`) was masked only after the cut, by the run's mask of whole
 * values: where the head's cut fell inside it, its beginning was read by the model and kept.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { catUpload, secretAtHeadEnd } from "../../support/bashCut.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const SECRET = "sk-erp-a27-bash-0123456789abcdefghij"
const MAX = 1000
const TOTAL = 5000

const seenByModel: Array<string> = []
const script = catUpload(seenByModel)

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: { gateway: Support.twoUsers, sandbox: { allow_host_bash: true, bash_output_max_chars: MAX } }
  })
}, SLOW)
afterAll(() => gateway?.stop())

describe("Attack27: a bash output cut inside a request secret no skill bound", () => {
  it("none of the value is read by the model or kept", async () => {
    const thread = "a27-bash-cut"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const form = new FormData()
    form.append("files", new Blob([secretAtHeadEnd(SECRET, MAX, TOTAL)]), "config.txt")
    const uploaded = await alice("POST", `/api/threads/${thread}/uploads`, form)
    assert.strictEqual(uploaded.status, 200, uploaded.text)
    const waited = await alice("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("read my config"),
      context: { secrets: { ERP_TOKEN: SECRET } }
    })
    assert.strictEqual(waited.status, 200, waited.text.slice(0, 300))
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "middle truncated", "the output was cut")
    assert.notInclude(seenByModel[0], SECRET.slice(0, 8), "what the model read")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.notInclude(state.text, SECRET.slice(0, 8), "the thread")
  }, SLOW)
})
