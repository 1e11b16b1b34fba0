/**
 * A run whose role may not use the model it asks for runs on the first model the role may use (`authorization`);
 * its stream then names that model, the one the run really used, in each `messages` frame's `ls_model_name` (and
 * the `events` mode's), not the one it asked for. Before, the frames named the model of the request. Real parts:
 * the gateway over HTTP, the real `openai` client against the scripted Chat Completions server on loopback.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const GUEST = "guest-token-0123456789abcdef"
const SLOW = 60_000

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Hello there.",
    config: (url: string) => ({
      models: [Support.scriptedModel("deep", url), Support.scriptedModel("scripted", url)],
      gateway: {
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      authorization: {
        enabled: true,
        provider: {
          use: "deerflow.authz.rbac:RbacAuthorizationProvider",
          config: { roles: { user: {}, guest: { models: { allow: ["scripted"] } } } }
        }
      }
    })
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

/** Streams a run of `token` asking for `model`: the model names its frames give, and the model the server got. */
const streamAs = async (token: string, model: string) => {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
  const thread = await (await fetch(`${gateway.url}/threads`, { method: "POST", headers, body: "{}" })).json() as any
  const before = gateway.scripted.requests.length
  const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: Support.userInput("hi"),
      stream_mode: ["messages-tuple", "events"],
      context: { model_name: model }
    })
  })
  assert.strictEqual(response.status, 200)
  const { events } = await Support.readSse(response)
  const named = new Set<string>()
  for (const frame of events) {
    if (frame.event.startsWith("messages")) named.add((frame.data as any)[1]?.ls_model_name)
    if (frame.event === "events") {
      const name = (frame.data as any)?.metadata?.ls_model_name
      if (name !== undefined) named.add(name)
    }
  }
  const asked = gateway.scripted.requests.slice(before).map((r) => r.model)
  return { named: [...named], asked: [...new Set(asked)] }
}

describe("a run's stream names the model the run used", () => {
  it("a guest asking for a model its role may not use: the frames name the substitute", async () => {
    const { named, asked } = await streamAs(GUEST, "deep")
    assert.deepStrictEqual(asked, ["model-scripted"])
    assert.deepStrictEqual(named, ["scripted"])
  }, SLOW)

  it("a user whose role may use the model asked for: the frames name it", async () => {
    const { named, asked } = await streamAs(Support.ALICE, "deep")
    assert.deepStrictEqual(asked, ["model-deep"])
    assert.deepStrictEqual(named, ["deep"])
  }, SLOW)
})
