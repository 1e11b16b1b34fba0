/**
 * A run's subagents and an MCP server that lists its tools only with a request secret (test/fixtures/
 * echo-secrets-mcp.mjs, `ECHO_LIST_NEEDS_AUTH=1`, a real HTTP server process). A subagent's calls get none of the
 * run's request secrets (docs/configuration.md), so a subagent of a run given `ERP_TOKEN` neither lists nor calls
 * the server: its model is offered none of the server's tools, and a call the model makes anyway is answered with an
 * error saying why the tool is not there (before: only "does not exist"), never the server's answer, and the secret
 * is never sent or shown. The parent
 * run itself has the tools. The model is SCRIPTED (the real `openai` client against a loopback server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import * as GatedErp from "../../support/gatedErp.js"
import { toolNames } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SECRET = "sk-mcp-sub-listing-91ab-DO-NOT-LEAK"
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

const isSubagent = (body: ChatRequestBody) => JSON.stringify(body.messages).includes("general-purpose subagent")

/** The parent delegates; the subagent calls `erp_whoami` even though it is not offered, then quotes the result. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (isSubagent(body)) {
    if (last?.role === "tool") return `Sub saw: ${contentText(last.content as never)}`
    return { toolCalls: [{ name: "erp_whoami", arguments: {} }] }
  }
  if (last?.role === "tool") return `Parent saw: ${contentText(last.content as never)}`
  const args = { description: "ask the ERP", prompt: "who am I at the ERP?", subagent_type: "general-purpose" }
  return { toolCalls: [{ name: "task", arguments: args }] }
}

let stop: (() => Promise<void>) | undefined
beforeAll(async () => {
  const started = await GatedErp.start(script, "antler-mcp-secret-sub-")
  gateway = started.gateway
  stop = started.stop
}, SLOW)
afterAll(() => stop?.())

describe("a subagent of a run given an MCP server's request secret", () => {
  it("is offered none of the server's tools, and its call of one is refused readably, without the secret", async () => {
    const thread = (await alice("POST", "/threads", {})).json().thread_id as string
    const before = gateway.scripted.requests.length
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("ask the ERP who I am, through a subagent"),
      context: { secrets: { ERP_TOKEN: SECRET }, subagent_enabled: true },
      stream_mode: ["values", "custom"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const requests = gateway.scripted.requests.slice(before)
    const parent = requests.filter((r) => !isSubagent(r))
    const sub = requests.filter(isSubagent)
    // the parent run has the server's tools (listed with its secret); its subagent has none of them
    assert.include(toolNames(parent[0]!), "erp_whoami")
    assert.isAbove(sub.length, 0)
    for (const r of sub) assert.deepStrictEqual(toolNames(r).filter((n) => n.startsWith("erp_")), [])
    // the subagent's call of the tool it was not offered is an error result naming the tool, not the server's answer
    const subResult = sub.at(-1)!.messages.at(-1)!
    assert.strictEqual(subResult.role, "tool")
    const said = contentText(subResult.content as never)
    assert.include(said, "Error: Tool 'erp_whoami' does not exist.")
    assert.include(
      said,
      "a subagent gets none of its run's request secrets, so it has no tool of MCP server 'erp', which lists its " +
        "tools only with the request secret ERP_TOKEN: ask the lead agent to call it"
    )
    assert.notInclude(said, "rev:[")
    const state = (await alice("GET", `/threads/${thread}/state`)).json()
    const messages = state.values.messages as ReadonlyArray<any>
    assert.match(String(messages.at(-1).content), /^Parent saw: /)
    assert.notInclude(stream.text, SECRET)
    assert.notInclude(JSON.stringify(state), SECRET)
  }, SLOW)
})
