/**
 * Antler as a library with MCP servers and `authorization.enabled`: an app that gives the lead agent MCP tools
 * (`McpTools.tools`) for a role, without naming each tool's server, must still ask the role's `mcp_servers` policy.
 * Before, the server of a tool was known only from `LeadAgent.Options.mcpServers` (which the factory fills from its
 * tool assembly): a library's agent for a `guest` denied the `secret` server offered that server's tools, listed
 * them in `tool_search`, and ran a call of them.
 * Real parts: two stdio MCP server processes (server-everything), the real `openai` client against the scripted
 * Chat Completions server on loopback.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as McpClient from "../../src/layers/McpClient.js"
import * as McpTools from "../../src/layers/McpTools.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import * as Tool from "../../src/services/Tool.js"
import { tempDir } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"
import { messageText, toolNames } from "../support/modelRequests.js"
import { rbac } from "../support/rbac.js"

const SLOW = 60_000

const authorization = rbac({ user: {}, guest: { mcp_servers: { deny: ["secret"] } } })

/** The tool results the model was sent back, by tool call id. */
const results = (requests: ReadonlyArray<ChatRequestBody>) =>
  new Map(requests.flatMap((r) => r.messages).filter((m) => m.role === "tool").map((m) => [
    String(m.tool_call_id),
    messageText(m)
  ]))

/** The MCP tools a request offered. */
const echoes = (body: ChatRequestBody) => toolNames(body).filter((name) => name.endsWith("_echo")).sort()

/** A hostile model: it calls `secret_echo` (and `open_echo`) whatever it was offered, or `tool_search` first. */
const script = (search: boolean) => (body: ChatRequestBody): Turn => {
  if (body.messages.at(-1)?.role === "tool") return "Done."
  if (search) return { toolCalls: [{ name: "tool_search", arguments: { query: "echo" }, id: "call_search" }] }
  return {
    toolCalls: [
      { name: "secret_echo", arguments: { message: "SECRET-RAN" }, id: "call_secret" },
      { name: "open_echo", arguments: { message: "OPEN-RAN" }, id: "call_open" }
    ]
  }
}

/** A library agent built for `role` over two MCP servers' tools, given without their servers; one turn of it. */
const turn = (role: string, search: boolean) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(script(search))
    const mcp = yield* McpClient.make({ servers: { open: Servers.everything(), secret: Servers.everything() } })
    const specs = (yield* mcp.catalog).tools.filter((t) => t.original === "echo")
    const tools = McpTools.tools(mcp, specs)
    const config = {
      models: [{ name: "scripted", model: "scripted", base_url: server.url, api_key: "sk-test-library-000000" }],
      tool_search: { enabled: search },
      memory: { enabled: false },
      authorization
    }
    const layer = LeadAgent.layer({
      sandboxTools: false,
      systemPrompt: "You are a test agent.",
      tools,
      role,
      ...(search ? { deferred: { tools: tools.map(Tool.definition) } } : {})
    }).pipe(
      Layer.provide(OpenAiModel.layerFromAppConfig()),
      Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
      Layer.provide(ConfigFile.layerFromObject(config, { home: tempDir("antler-library-mcp-") }))
    )
    const agent = Context.get(yield* Layer.build(layer), LeadAgent.LeadAgent)
    const end = yield* agent.turn({ prompt: "echo something", options: { extra: { user_role: role } } })
    return { end, agent, requests: server.requests }
  })

describe("a library's lead agent given MCP tools for a role", () => {
  it.scopedLive("a guest denied the `secret` server is never offered its tools, and a call of one does not run", () =>
    Effect.gen(function*() {
      const { agent, end, requests } = yield* turn("guest", false)
      assert.strictEqual(end.status, "success")
      assert.deepStrictEqual(echoes(requests[0]!), ["open_echo"])
      assert.notInclude(agent.systemPrompt, "secret_echo")
      const sent = results(requests)
      assert.include(sent.get("call_open"), "OPEN-RAN")
      assert.notInclude(sent.get("call_secret"), "SECRET-RAN")
      assert.include(sent.get("call_secret"), "role 'guest' is denied 'secret' on resource 'mcp_server'")
      // a role the policy leaves alone: both servers' tools, both calls run
      const user = yield* turn("user", false)
      assert.deepStrictEqual(echoes(user.requests[0]!), ["open_echo", "secret_echo"])
      assert.include(results(user.requests).get("call_secret"), "SECRET-RAN")
    }), SLOW)

  it.scopedLive("deferred behind tool_search, the denied server's tools are not in its catalog", () =>
    Effect.gen(function*() {
      const { requests } = yield* turn("guest", true)
      const found = results(requests).get("call_search") ?? ""
      assert.include(found, "open_echo")
      assert.notInclude(found, "secret_echo")
      const user = yield* turn("user", true)
      assert.include(results(user.requests).get("call_search"), "secret_echo")
    }), SLOW)
})
