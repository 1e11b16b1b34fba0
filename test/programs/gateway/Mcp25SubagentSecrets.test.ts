/**
 * A run's subagents and an MCP server that lists its tools only with a request secret (test/fixtures/
 * echo-secrets-mcp.mjs, `ECHO_LIST_NEEDS_AUTH=1`, a real HTTP server process refusing to list without the header). A
 * subagent gets its run's request secrets (docs/configuration.md): a subagent of a run given `ERP_TOKEN` is offered
 * the server's tools and its call gets the value (before: it was offered none and its call was refused), while the
 * value never shows in its events, its result, the parent's thread or what the model is sent. A subagent of a run
 * that did not give it has none of them, and its model's call of one is answered with why. The model is SCRIPTED (the
 * real `openai` client against a loopback server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import * as GatedErp from "../../support/gatedErp.js"
import { toolNames } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SECRET = "sk-mcp-sub-secrets-25ab-DO-NOT-LEAK"
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

const isSubagent = (body: ChatRequestBody) => JSON.stringify(body.messages).includes("general-purpose subagent")

/** The parent delegates; the subagent calls `erp_whoami` (offered or not), then quotes the result. */
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
  const started = await GatedErp.start(script, "antler-mcp25-sub-secrets-")
  gateway = started.gateway
  stop = started.stop
}, SLOW)
afterAll(() => stop?.())

/** A delegating run of alice's on a new thread with `context`. */
const delegate = async (context: Record<string, unknown>) => {
  const thread = (await alice("POST", "/threads", {})).json().thread_id as string
  const before = gateway.scripted.requests.length
  const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput("ask the ERP who I am, through a subagent"),
    context: { ...context, subagent_enabled: true },
    stream_mode: ["values", "custom", "messages-tuple"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  const requests = gateway.scripted.requests.slice(before)
  const state = (await alice("GET", `/threads/${thread}/state`)).json()
  const history = (await alice("POST", `/threads/${thread}/history`, { limit: 20 })).json()
  return {
    stream: stream.text,
    requests,
    parent: requests.filter((r) => !isSubagent(r)),
    sub: requests.filter(isSubagent),
    state,
    history,
    messages: state.values.messages as ReadonlyArray<any>
  }
}

const reversed = (text: string) => [...text].reverse().join("")

describe("a subagent of a run given an MCP server's request secret", () => {
  it("is offered the server's tools and calls them with the secret, which nothing it emits or stores holds",
    async () => {
    const run = await delegate({ secrets: { ERP_TOKEN: SECRET } })
    assert.isAbove(run.sub.length, 1)
    // listed for the subagent with the run's secret (the server refuses to list without it)
    assert.include(toolNames(run.sub[0]!), "erp_whoami")
    // its call reached the server with the header: the value arrived (reversed), itself masked
    const subResult = run.sub.at(-1)!.messages.at(-1)!
    assert.strictEqual(subResult.role, "tool")
    const said = contentText(subResult.content as never)
    assert.include(said, `rev:[${reversed(`Bearer ${SECRET}`)}]`)
    assert.notInclude(said, "Error")
    // the subagent's result reached the parent, and its answer
    assert.match(String(run.messages.at(-1).content), /^Parent saw: .*Sub saw: token:\[/s)
    assert.include(String(run.messages.at(-1).content), `rev:[${reversed(`Bearer ${SECRET}`)}]`)
    // its events (task_running with its messages, task_completed with its result) were sent, without the value
    assert.include(run.stream, "task_running")
    assert.include(run.stream, "task_completed")
    assert.include(run.stream, reversed(SECRET))
    assert.notInclude(run.stream, SECRET)
    // nor the parent's thread, its history, or anything the model was sent
    assert.notInclude(JSON.stringify(run.state), SECRET)
    assert.notInclude(JSON.stringify(run.history), SECRET)
    assert.notInclude(JSON.stringify(run.requests), SECRET)
  }, SLOW)

  it("after a subagent of a run given another secret, is still offered the server's tools (agents kept by name)",
    async () => {
    // (a subagent of a run given only OTHER_TOKEN: built without the server, which lists only with ERP_TOKEN)
    const other = await delegate({ secrets: { OTHER_TOKEN: "other-token-25-0123456789" } })
    for (const r of other.sub) assert.deepStrictEqual(toolNames(r).filter((n) => n.startsWith("erp_")), [])
    const run = await delegate({ secrets: { ERP_TOKEN: SECRET } })
    assert.include(toolNames(run.sub[0]!), "erp_whoami")
    const said = contentText(run.sub.at(-1)!.messages.at(-1)!.content as never)
    assert.include(said, `rev:[${reversed(`Bearer ${SECRET}`)}]`)
    assert.notInclude(JSON.stringify(run.requests), SECRET)
  }, SLOW)

  it("of a run without it, has none of its tools, and its call of one is answered with why", async () => {
    const run = await delegate({})
    assert.isAbove(run.sub.length, 0)
    for (const r of run.sub) assert.deepStrictEqual(toolNames(r).filter((n) => n.startsWith("erp_")), [])
    const said = contentText(run.sub.at(-1)!.messages.at(-1)!.content as never)
    assert.include(said, "Error: Tool 'erp_whoami' does not exist.")
    assert.include(
      said,
      "the subagent has no tool of MCP server 'erp': it lists its tools only with the request secret ERP_TOKEN, " +
        "which this run did not give (context.secrets, antler run --secret NAME)"
    )
    assert.notInclude(said, "rev:[")
  }, SLOW)
})
