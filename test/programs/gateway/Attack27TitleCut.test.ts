/**
 * Attack round 27 on the thread's title made by the title model (`title.model_name`): the model's title is cut at
 * `title.max_chars` (60) before the thread keeps it, and the store's mask finds whole values only. A title model
 * repeating the user's words, a request secret they typed among them, where the cut falls had the secret's beginning
 * kept as the thread's title and listed (the local title was masked before its cut in round 26).
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000
const SECRET = "ERPSECRET-a27title-0123456789"

/** The title call repeats the user's words (the secret 50 characters in: cut at 60); a run's call answers. */
const script = (body: ChatRequestBody): Turn =>
  Support.lastUserText(body).startsWith("Generate a concise title")
    ? `${"Report".padEnd(50, " of the day")}${SECRET} deploy`
    : "Done."

const { alice } = fileGateway(() =>
  Support.start({
    script,
    config: (url) => ({
      models: [Support.scriptedModel("scripted", url), Support.scriptedModel("small", url)],
      title: { enabled: true, model_name: "small" },
      gateway: Support.twoUsers
    })
  }), SLOW)

describe("Attack27: the title model's title cut inside a request secret", () => {
  it("the thread's title keeps none of it", async () => {
    const thread = "a27-title"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const waited = await alice("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput(`deploy the report with ${SECRET}`),
      context: { secrets: { ERP_TOKEN: SECRET } }
    })
    assert.strictEqual(waited.status, 200, waited.text.slice(0, 300))
    const state = await alice("GET", `/threads/${thread}/state`)
    const title = String(state.json().values.title)
    assert.include(title, "Report of the day", "the title model's title is kept")
    assert.notInclude(title, SECRET.slice(0, 6))
    const searched = await alice("POST", "/threads/search", { limit: 10 })
    assert.notInclude(searched.text, SECRET.slice(0, 6), "the threads listed")
  }, SLOW)
})
