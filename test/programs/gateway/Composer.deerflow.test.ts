/**
 * DeerFlow's composer helpers switched off, and a draft at the length limit, against `antler serve`. Mirrors
 * test_suggestions_router.py (suggestions disabled: none, and no model call; the setting answered) and
 * test_input_polish_router.py (polishing disabled: 404 and no model call; a padded draft is measured and sent
 * stripped).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const script = (body: ChatRequestBody): Turn => {
  const system = JSON.stringify(body.messages.find((m) => m.role === "system") ?? "")
  if (system.includes("follow-up questions")) return JSON.stringify(["Why?", "How?"])
  if (system.includes("prompt optimizer")) return "Please summarize the report clearly."
  return "Here you go."
}

describe("suggestions and input polish switched off", () => {
  let gateway: TestGateway
  const request = Requests.as(() => gateway)

  beforeAll(async () => {
    gateway = await Support.start({
      script,
      config: { suggestions: { enabled: false, max_suggestions: 4 }, input_polish: { enabled: false } }
    })
    assert.strictEqual((await request("POST", "/api/threads", { thread_id: "chat" })).status, 200)
    const run = await request("POST", "/api/threads/chat/runs/wait", { input: Support.userInput("hi") })
    assert.strictEqual(run.status, 200, run.text)
  })
  afterAll(() => gateway?.stop())

  it("the app reads that suggestions are off, and asking for them answers none without calling a model", async () => {
    assert.deepStrictEqual((await request("GET", "/api/suggestions/config")).json(), {
      enabled: false,
      max_suggestions: 4
    })
    const calls = gateway.scripted.requests.length
    const messages = [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello" }]
    const answer = await request("POST", "/api/threads/chat/suggestions", { messages, n: 3 })
    assert.deepStrictEqual([answer.status, answer.json()], [200, { suggestions: [] }])
    assert.strictEqual(gateway.scripted.requests.length, calls)
  })

  it("polishing a draft is a 404 saying it is off, without calling a model", async () => {
    const calls = gateway.scripted.requests.length
    const answer = await request("POST", "/api/input-polish", { text: "hello" })
    assert.strictEqual(answer.status, 404)
    assert.include(answer.json().detail, "Input polishing is disabled")
    assert.strictEqual(gateway.scripted.requests.length, calls)
  })
})

describe("a draft at input_polish.max_chars", () => {
  let gateway: TestGateway
  const request = Requests.as(() => gateway)
  const draft = "summarize report"

  beforeAll(async () => {
    gateway = await Support.start({ script, config: { input_polish: { max_chars: draft.length } } })
  })
  afterAll(() => gateway?.stop())

  it("is measured without its padding, and the model reads it stripped", async () => {
    const answer = await request("POST", "/api/input-polish", { text: `   ${draft}   ` })
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), { rewritten_text: "Please summarize the report clearly.", changed: true })
    const sent = JSON.stringify(gateway.scripted.requests.at(-1)!.messages.at(-1))
    assert.include(sent, draft)
    assert.notInclude(sent, `   ${draft}   `)
    // one character more is refused before any model call, naming the limit
    const calls = gateway.scripted.requests.length
    const long = await request("POST", "/api/input-polish", { text: `${draft}!` })
    assert.strictEqual(long.status, 400)
    assert.include(long.json().detail, `exceeds ${draft.length} characters`)
    assert.strictEqual(gateway.scripted.requests.length, calls)
  })
})
