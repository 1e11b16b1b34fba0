/**
 * A model's secrets written in the request fields it sends (`model_kwargs`, `extra_body`, `when_thinking_enabled`:
 * a provider that takes its key in the body) are secrets as its `api_key` is: a server that echoes them (in an
 * answer, as a validation error echoes the field it refused) does not put them in what the run streams, answers
 * and stores. The model is SCRIPTED and echoes the fields it was sent.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const IN_KWARGS = "sk-kwargs-secret-0123456789"
const IN_BODY = "tok-extra-body-secret-9876543210"

let gateway: TestGateway
let client: Client

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => `The server got ${JSON.stringify({ api_key: body.api_key, auth: body.auth })}`,
    config: (url) => ({
      models: [{
        name: "scripted",
        model: "scripted",
        base_url: url,
        api_key: "sk-test-scripted-key-000000",
        model_kwargs: { api_key: IN_KWARGS },
        extra_body: { auth: { access_token: IN_BODY, region: "eu-west-1" } }
      }]
    })
  })
  client = new Client({ apiUrl: gateway.url })
})
afterAll(() => gateway?.stop())

describe("a model's secret in its request fields", () => {
  it("echoed by its server, is hidden from what the run streams, answers and stores", async () => {
    const thread = await client.threads.create()
    const parts: Array<unknown> = []
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ role: "user", content: "hello" }] },
      streamMode: ["values", "messages-tuple"]
    })) parts.push(part)
    // (the fields were sent: the server saw them)
    assert.strictEqual(gateway.scripted.requests[0]!.api_key, IN_KWARGS)
    const streamed = JSON.stringify(parts)
    const state = JSON.stringify(await client.threads.getState(thread.thread_id))
    const stored = JSON.stringify(await gateway.store.load(thread.thread_id))
    assert.include(state, "eu-west-1")
    for (const seen of [streamed, state, stored]) {
      assert.notInclude(seen, IN_KWARGS)
      assert.notInclude(seen, IN_BODY)
    }
  })
})
