/**
 * Attack round 27 on the cuts of a model server's error text: the OpenAI adapter keeps at most 2,000 characters of
 * what the server said, and the run records at most 2,000 of its error, before any mask of whole values sees them. A
 * server saying a secret back where a cut falls (its own API key, or a request secret the user typed, quoted from the
 * request) had the secret's beginning kept in the thread, the run's error and its answer.
 */
import { assert, describe, it } from "@effect/vitest"
import { fileGateway } from "../../support/fileGateway.js"
import * as Support from "./support.js"

const SLOW = 120_000
const API_KEY = "sk-test-scripted-key-000000"
const REQUEST_SECRET = "ERPSECRET-0123456789abcdefghij"

// what the server says next: a probe (to learn where its words start in the run's error), then the cut one; or a body
// that is not JSON, sent as JSON with status 200 (the run's error quotes its first 120 characters)
let said = "PROBE"
let body: string | undefined
const { alice } = fileGateway(() =>
  Support.start({
    script: () =>
      body !== undefined
        ? { raw: body, contentType: "application/json" }
        : { status: 400, body: { error: { message: said, type: "invalid_request_error", code: null } } },
    config: { gateway: Support.twoUsers }
  }), SLOW)

const run = async (thread: string) => {
  assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
  return alice("POST", `/threads/${thread}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(`use ${REQUEST_SECRET} now`),
    context: { secrets: { ERP_TOKEN: REQUEST_SECRET } }
  })
}

/** Where the server's words start in the run's error. */
const offset = async (thread: string) => {
  said = "PROBE"
  await run(thread)
  const runs = await alice("GET", `/threads/${thread}/runs`)
  const error = String(runs.json()[0]?.error ?? "")
  const at = error.indexOf("PROBE")
  assert.isAtLeast(at, 0, error)
  return at
}

describe("Attack27: a model server's error cut inside a secret", () => {
  for (const [what, secret] of [["its API key", API_KEY], ["a request secret", REQUEST_SECRET]] as const) {
    it(`${what} said back where the 2,000 characters end: none of it is kept`, async () => {
      const thread = `a27-cut-${what.replace(/\W+/g, "-")}`
      const at = await offset(`${thread}-probe`)
      // (the cut at 2,000 falls 12 characters into the secret)
      said = "x".repeat(2000 - at - 12) + secret + " and more words after it"
      const waited = await run(thread)
      const start = secret.slice(0, 10)
      assert.notInclude(waited.text, start, "the run's answer")
      const state = await alice("GET", `/threads/${thread}/state`)
      assert.notInclude(state.text, start, "the thread")
      const runs = await alice("GET", `/threads/${thread}/runs`)
      assert.notInclude(runs.text, start, "the run's record")
    }, SLOW)
  }

  it("a body that is not JSON quoting the API key where its first 120 characters end: none of it is kept", async () => {
    const thread = "a27-cut-body"
    body = "not json: " + "y".repeat(120 - 10 - 12) + API_KEY + " and more"
    try {
      const waited = await run(thread)
      assert.include(waited.text, "not json: yyy", "the run's answer quotes the body")
      assert.notInclude(waited.text, API_KEY.slice(0, 10), "the run's answer")
      const runs = await alice("GET", `/threads/${thread}/runs`)
      assert.include(runs.text, "not json: yyy")
      assert.notInclude(runs.text, API_KEY.slice(0, 10), "the run's record")
    } finally {
      body = undefined
    }
  }, SLOW)
})
