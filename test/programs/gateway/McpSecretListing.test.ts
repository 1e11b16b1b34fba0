/**
 * An MCP server whose header names a request secret (`Authorization: Bearer ${secret:ERP_TOKEN}`) and that lists
 * its tools only with it (test/fixtures/echo-secrets-mcp.mjs, `ECHO_LIST_NEEDS_AUTH=1`, a real HTTP server
 * process): a gateway run given the secret (`context.secrets`) has the server's tools, listed with its value on a
 * connection of its own, and its call gets the value; a run without it has none of them and a `warning` naming the
 * missing secret (never a value); another user's run never has the tools the first user's listing found. Before, the
 * server was listed once, without the secret: no run ever had its tools. The model is SCRIPTED (the real `openai`
 * client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import * as GatedErp from "../../support/gatedErp.js"
import { toolNames } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SECRET = "sk-mcp-listing-7c1e-DO-NOT-LEAK"
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

/** The model calls `erp_whoami` when it has it, then quotes its result; without it, it says so. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") return `It said: ${contentText(last.content as never)}`
  if (!toolNames(body).includes("erp_whoami")) return "No ERP tool."
  return { toolCalls: [{ name: "erp_whoami", arguments: {} }] }
}

let stop: (() => Promise<void>) | undefined
beforeAll(async () => {
  const started = await GatedErp.start(script, "antler-mcp-secret-list-")
  gateway = started.gateway
  stop = started.stop
}, SLOW)
afterAll(() => stop?.())

/** A run of `user` on a new thread with `context`: its SSE text, its warnings, its answer, the model's tools. */
const run = async (user: typeof alice, context: Record<string, unknown>) => {
  const thread = (await user("POST", "/threads", {})).json().thread_id as string
  const before = gateway.scripted.requests.length
  const stream = await user("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput("who am I at the ERP?"),
    context,
    stream_mode: ["values", "custom"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  const warnings = [...stream.text.matchAll(/"message":"([^"]*)"/g)].map((m) => m[1]!)
  const state = (await user("GET", `/threads/${thread}/state`)).json()
  const messages = state.values.messages as ReadonlyArray<any>
  const tools = gateway.scripted.requests.slice(before).map((r) => toolNames(r).filter((n) => n.startsWith("erp_")))
  return { text: stream.text, warnings, answer: String(messages.at(-1).content), messages, tools }
}

describe("an MCP server listing its tools only with a run's request secret", () => {
  it("a run given the secret has its tools, listed with it, and its call gets it", async () => {
    const given = await run(alice, { secrets: { ERP_TOKEN: SECRET } })
    assert.deepStrictEqual(given.tools[0], ["erp_whoami"])
    const calls = given.messages.filter((m) => m.type === "ai").flatMap((m) => m.tool_calls ?? [])
    const results = given.messages.filter((m) => m.type === "tool")
    assert.lengthOf(calls, 1)
    assert.strictEqual(results[0].tool_call_id, calls[0].id)
    assert.include(String(results[0].content), `rev:[${[...`Bearer ${SECRET}`].reverse().join("")}]`)
    assert.notInclude(given.text, SECRET)
  }, SLOW)

  it("a run without it has none of its tools and a warning naming the missing secret", async () => {
    const without = await run(alice, {})
    assert.deepStrictEqual(without.tools, [[]])
    assert.strictEqual(without.answer, "No ERP tool.")
    assert.include(
      without.warnings.join("\n"),
      "MCP server 'erp' did not list its tools without the request secret ERP_TOKEN, which this run did not give"
    )
  }, SLOW)

  it("another user's run after a listing with the first user's secret has none of the tools", async () => {
    await run(alice, { secrets: { ERP_TOKEN: SECRET } })
    const other = await run(bob, {})
    assert.deepStrictEqual(other.tools, [[]])
    assert.strictEqual(other.answer, "No ERP tool.")
    assert.notInclude(other.text, SECRET)
  }, SLOW)
})
