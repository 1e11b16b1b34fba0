/**
 * DeerFlow's test_serialization, the cases a client sees: the pixels of an image the agent viewed (base64 in a hidden
 * message) reach the model but never the state a client reads (`GET /threads/{id}/state`) nor the `values` events
 * of a run's stream (test_serialize_values_mode_strips_base64_from_hidden_messages,
 * test_serialize_channel_values_for_api_strips_base64, test_strip_data_url_removes_base64_from_hidden_messages).
 * DeerFlow keeps the hidden message in the thread and strips its `data:` blocks on the way out; Antler never
 * stores it (ViewImage's message is request-only), so there is nothing to strip. A hidden message a client sent
 * with a `data:` image keeps it for the model, and its text, but its pixels are left out of every answer
 * (test_strip_data_url_mixed_messages): they were all sent back. A visible message comes back as sent
 * (test_strip_data_url_preserves_non_hidden_messages, ..._preserves_https_image_urls).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "ada-token-hidden-images-0000"
// A 1x1 PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64"
)
const DATA_URL = `data:image/png;base64,${PNG.toString("base64")}`

let gateway: TestGateway
const ada = Requests.as(() => gateway, TOKEN)

const answered = (body: ChatRequestBody) => body.messages.some((m: any) => m.role === "tool")

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn =>
      JSON.stringify(body).includes("look at the dot") && !answered(body)
        ? { toolCalls: [{ name: "view_image", arguments: { image_path: "/mnt/user-data/uploads/dot.png" } }] }
        : "I saw a dot.",
    config: (url) => ({
      models: [{
        name: "scripted",
        model: "scripted",
        base_url: url,
        api_key: "sk-test-scripted-key-000000",
        supports_vision: true
      }],
      gateway: { auth: { tokens: [{ token: TOKEN, user: "ada" }] } }
    })
  })
})
afterAll(() => gateway?.stop())

describe("test_serialization: images in hidden messages", () => {
  it("the model gets the viewed image's pixels; the state and the values stream never carry them", async () => {
    assert.strictEqual((await ada("POST", "/api/threads", { thread_id: "dot" })).status, 200)
    const form = new FormData()
    form.append("files", new Blob([PNG], { type: "image/png" }), "dot.png")
    const uploaded = await ada("POST", "/api/threads/dot/uploads", form)
    assert.strictEqual(uploaded.status, 200, uploaded.text)
    const streamed = await ada("POST", "/api/threads/dot/runs/stream", {
      input: { messages: [{ type: "human", content: "look at the dot" }] },
      stream_mode: ["values"]
    })
    assert.strictEqual(streamed.status, 200, streamed.text)
    assert.include(streamed.text, "I saw a dot.")
    assert.include(streamed.text, "event: values")
    // the model's request after the view_image turn carried the image
    const requests = gateway.scripted.requests
    assert.include(JSON.stringify(requests.at(-1)), DATA_URL)
    assert.notInclude(streamed.text, "data:image/png;base64")
    const state = await ada("GET", "/api/threads/dot/state")
    assert.strictEqual(state.status, 200, state.text)
    assert.notInclude(state.text, "data:image/png;base64")
    const messages = state.json().values.messages
    // (the date reminder DynamicContext keeps is the only hidden message; no message holds an image block)
    assert.deepStrictEqual(messages.map((m: any) => m.type), ["system", "human", "ai", "tool", "ai"])
    assert.isFalse(messages.some((m: any) => JSON.stringify(m.content).includes("image_url")))
  })

  it("an image the user sent (a data: URL or an https one) comes back as sent", async () => {
    const content = [
      { type: "text", text: "Check this out" },
      { type: "image_url", image_url: { url: DATA_URL } },
      { type: "image_url", image_url: { url: "https://example.com/img.png" } }
    ]
    const run = await ada("POST", "/api/threads/sent/runs/wait", {
      input: { messages: [{ type: "human", content }] },
      if_not_exists: "create"
    })
    assert.strictEqual(run.status, 200, run.text)
    const state = await ada("GET", "/api/threads/sent/state")
    const sent = state.json().values.messages.find((m: any) => m.type === "human" && Array.isArray(m.content))
    assert.deepStrictEqual(sent?.content, content)
  })
  it("a hidden message a client sent keeps its image for the model; no answer sends its pixels back", async () => {
    const hidden = [
      { type: "text", text: "Here are the images:" },
      { type: "image_url", image_url: { url: DATA_URL } },
      { type: "image_url", image_url: { url: "https://example.com/img.png" } }
    ]
    const before = gateway.scripted.requests.length
    const waited = await ada("POST", "/api/threads/mixed/runs/wait", {
      input: {
        messages: [
          { type: "human", content: "Please analyze this image" },
          { type: "human", content: hidden, additional_kwargs: { hide_from_ui: true } }
        ]
      },
      if_not_exists: "create"
    })
    assert.strictEqual(waited.status, 200, waited.text)
    assert.include(JSON.stringify(gateway.scripted.requests.slice(before)), DATA_URL)
    const streamed = await ada("POST", "/api/threads/mixed/runs/stream", {
      input: { messages: [{ type: "human", content: "And now?" }] },
      stream_mode: ["values"]
    })
    const history = await ada("POST", "/api/threads/mixed/history", { limit: 10 })
    const state = await ada("GET", "/api/threads/mixed/state")
    const answers = { wait: waited, stream: streamed, history, state }
    for (const [name, answer] of Object.entries(answers)) {
      assert.strictEqual(answer.status, 200, `${name}: ${answer.text}`)
      assert.notInclude(answer.text, "data:image/png;base64", name)
    }
    const messages = state.json().values.messages
    assert.deepStrictEqual(messages.find((m: any) => m.additional_kwargs?.hide_from_ui === true && m.type === "human")
      ?.content, [hidden[0], hidden[2]])
    assert.strictEqual(messages.find((m: any) => m.type === "human").content, "Please analyze this image")
  })
})
