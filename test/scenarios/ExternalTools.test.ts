/**
 * Tools from outside through the whole lead chain, as an app runs them: the factory over the real `openai`
 * client talking to the scripted Chat Completions server (which records every request body), real MCP servers
 * (server-everything over stdio, an HTTP server started here), the SQLite-free in-memory store and the local
 * sandbox.
 *
 * - `tool_search` end to end: a deferred MCP tool is absent from request 1 (its schema nowhere in the body),
 *   found by `tool_search`, present in request 2 and called; the promotion is saved in the thread.
 * - A deferred tool called before it is promoted is refused with DeerFlow's message.
 * - Without deferral MCP tools are plain tools; a killed server is started again within the next run; a call
 *   that hangs ends as a readable tool error with one warning, and the run ends normally.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as McpClient from "../../src/layers/McpClient.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import * as Factory from "../../src/programs/Factory.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import type { McpServerConfig } from "../../src/services/Extensions.js"
import { Mcp } from "../../src/services/Mcp.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"
import { toolNames } from "../support/modelRequests.js"

const tempDir = tempDirs()
const SLOW = 180_000

interface Setup {
  readonly script: ScriptedChatServer.Script
  readonly servers: Readonly<Record<string, McpServerConfig>>
  readonly config?: Record<string, unknown>
}

/** The factory of an app over the scripted server and the given MCP servers; returns it with the server. */
const app = (setup: Setup) =>
  Effect.gen(function*() {
    const chat = yield* ScriptedChatServer.start(setup.script)
    const models = [Schema.decodeUnknownSync(ModelConfig)({ name: "main", model: "scripted", base_url: chat.url, api_key: "sk-test" })]
    const config = ConfigFile.layerFromObject({ models: [{ name: "main", model: "scripted", base_url: chat.url }], ...setup.config }, {
      home: tempDir("antler-external-")
    })
    const context = yield* Layer.build(
      Factory.layer({ models }).pipe(
        Layer.provideMerge(McpClient.layer({ servers: setup.servers })),
        Layer.provideMerge(OpenAiModel.layerFromConfig(models)),
        Layer.provideMerge(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provideMerge(config),
        Layer.provide(NodeFileSystem.layer)
      )
    )
    return { chat, factory: Context.get(context, Factory.AgentFactory), context, models }
  })

const turn = (factory: Factory.Service, threadId: string, prompt: string) =>
  Effect.map(Stream.runCollect(factory.run({ threadId, prompt, settings: {} })), Chunk.toReadonlyArray)

const toolResults = (events: ReadonlyArray<RunEvent>) =>
  events.flatMap((e) => (e.type === "message" && e.message.type === "tool" ? [M.contentText(e.message.content)] : []))

describe("tool_search end to end (real MCP server, real openai client, scripted server)", () => {
  it.scopedLive("a deferred MCP tool is invisible in request 1, found by tool_search, visible and called in request 2", () =>
    Effect.gen(function*() {
      const { chat, context, factory } = yield* app({
        servers: { everything: Servers.everything() },
        config: { tool_search: { enabled: true } },
        script: [
          { toolCalls: [{ id: "call_search", name: "tool_search", arguments: { query: "select:everything_get-sum" } }] },
          { toolCalls: [{ id: "call_sum", name: "everything_get-sum", arguments: { a: 2, b: 3 } }] },
          "2 and 3 make 5."
        ]
      })
      const events = yield* turn(factory, "t-search", "What is 2 + 3? Use the sum tool.")
      const end = events.at(-1)!
      assert.deepInclude(end, { type: "run_end", status: "success" })
      assert.lengthOf(chat.requests, 3)

      const [first, second, third] = chat.requests.map((r) => JSON.stringify(r))
      const names1 = toolNames(chat.requests[0]!)
      assert.include(names1, "tool_search")
      assert.isFalse(names1.some((n) => n.startsWith("everything_")), "no MCP tool is offered before it is found")
      assert.notInclude(first!, "First number", "the deferred tool's schema is nowhere in request 1")
      const system = String(chat.requests[0]!.messages[0]!.content)
      assert.match(system, /<available-deferred-tools>\n(.+\n)*everything_get-sum\n/)

      const names2 = toolNames(chat.requests[1]!)
      assert.include(names2, "everything_get-sum")
      assert.notInclude(names2, "everything_echo", "only the promoted tool becomes visible")
      const sum = (chat.requests[1]!.tools as ReadonlyArray<any>).find((t) => t.function.name === "everything_get-sum")
      assert.deepStrictEqual(sum.function.parameters.required, ["a", "b"])
      assert.include(second!, "\\\"name\\\": \\\"everything_get-sum\\\"", "tool_search's result carries the schema")
      assert.include(third!, "The sum of 2 and 3 is 5.")

      const store = Context.get(context, ThreadStore)
      const saved = (yield* store.load("t-search")).pipe((o) => (o._tag === "Some" ? o.value.state : undefined))!
      assert.deepStrictEqual(saved.promoted?.names, ["everything_get-sum"])
      const catalog = yield* Context.get(context, Mcp).catalog
      const deferred = catalog.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.inputSchema }))
      assert.strictEqual(saved.promoted?.catalog_hash, DeferredToolFilter.catalogHash(deferred))
    }), SLOW)

  it.scopedLive("a deferred tool called before it is promoted is refused with DeerFlow's message", () =>
    Effect.gen(function*() {
      const { factory } = yield* app({
        servers: { everything: Servers.everything() },
        config: { tool_search: { enabled: true } },
        script: [
          { toolCalls: [{ id: "call_echo", name: "everything_echo", arguments: { message: "hi" } }] },
          "I will search first next time."
        ]
      })
      const events = yield* turn(factory, "t-early", "echo hi")
      assert.deepStrictEqual(toolResults(events), [
        "Error: Tool 'everything_echo' is deferred and has not been promoted yet. Call tool_search first to expose " +
        "and promote this tool's schema, then retry."
      ])
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
    }), SLOW)
})

describe("MCP routing hints in the system prompt (DeerFlow test_mcp_routing_prompt.py)", () => {
  const routed = (url: string) =>
    Servers.server({
      type: "http",
      url,
      tools: {
        lookup: { routing: { mode: "prefer", priority: 10, keywords: ["inventory", "stock"] } },
        add: { routing: { mode: "prefer", priority: 50, keywords: ["sum"] } }
      }
    })
  const systemText = (body: ScriptedChatServer.ChatRequestBody) => {
    const first = body.messages[0]!
    return first.role === "system" && typeof first.content === "string" ? first.content : ""
  }

  it.scopedLive("with tool_search off, the prompt tells the model which tool to prefer, by priority then name", () =>
    Effect.gen(function*() {
      const http = yield* Servers.httpServer
      const { chat, factory } = yield* app({ servers: { warehouse: routed(http.url) }, script: () => "done" })
      yield* turn(factory, "t-hints", "how much stock is left?")
      const prompt = systemText(chat.requests[0]!)
      assert.include(
        prompt,
        "<mcp_routing_hints>\n" +
          "When the user's request involves sum:\n  prefer the `warehouse_add` tool.\n" +
          "When the user's request involves inventory, or stock:\n  prefer the `warehouse_lookup` tool.\n" +
          "</mcp_routing_hints>"
      )
    }), SLOW)

  it.scopedLive("with tool_search on, the hints say to fetch the deferred tool first", () =>
    Effect.gen(function*() {
      const http = yield* Servers.httpServer
      const { chat, factory } = yield* app({
        servers: { warehouse: routed(http.url) },
        config: { tool_search: { enabled: true } },
        script: () => "done"
      })
      yield* turn(factory, "t-hints-deferred", "hello")
      assert.include(
        systemText(chat.requests[0]!),
        "use `tool_search` to fetch `warehouse_lookup`, then prefer that MCP tool."
      )
    }), SLOW)
})

describe("MCP tools through the lead chain", () => {
  it.scopedLive("plain MCP tools (stdio and HTTP) are called; a killed server is started again in the next run", () =>
    Effect.gen(function*() {
      const http = yield* Servers.httpServer
      let step = 0
      const { chat, context, factory } = yield* app({
        servers: {
          everything: Servers.everything(),
          warehouse: Servers.server({ type: "http", url: http.url })
        },
        script: () => {
          step++
          if (step === 1) {
            return {
              toolCalls: [
                { id: "c1", name: "everything_echo", arguments: { message: "first" } },
                { id: "c2", name: "warehouse_add", arguments: { a: 40, b: 2 } }
              ]
            }
          }
          if (step === 3) return { toolCalls: [{ id: "c3", name: "everything_echo", arguments: { message: "after the crash" } }] }
          return "done"
        }
      })
      const first = yield* turn(factory, "t-mcp", "echo and add")
      assert.deepStrictEqual(toolResults(first), ["Echo: first", "40 + 2 = 42"])
      const names = toolNames(chat.requests[0]!)
      assert.includeMembers(names, ["everything_echo", "warehouse_add", "warehouse_lookup"])
      assert.notInclude(names, "tool_search", "no deferral without tool_search.enabled")

      const mcp = Context.get(context, Mcp)
      const pid = (yield* mcp.status).find((s) => s.name === "everything")!.pid!
      process.kill(pid, "SIGKILL")
      while ((yield* mcp.status).find((s) => s.name === "everything")!.state === "running") yield* Effect.sleep("20 millis")
      const second = yield* turn(factory, "t-mcp", "echo again")
      assert.deepStrictEqual(toolResults(second), ["Echo: after the crash"])
      assert.deepInclude(second.at(-1)!, { type: "run_end", status: "success" })
      assert.strictEqual((yield* mcp.status).find((s) => s.name === "everything")!.starts, 2)
    }), SLOW)

  it.scopedLive("a call that hangs is a readable tool error and one warning; the run ends normally", () =>
    Effect.gen(function*() {
      const { factory } = yield* app({
        servers: { everything: Servers.everything({ tool_call_timeout: 1 }) },
        script: [
          { toolCalls: [{ id: "c1", name: "everything_trigger-long-running-operation", arguments: { duration: 30, steps: 1 } }] },
          "The operation timed out; I will not retry it."
        ]
      })
      const events = yield* turn(factory, "t-hang", "run the long operation")
      assert.deepStrictEqual(toolResults(events), [
        "Error: everything_trigger-long-running-operation could not run: MCP server 'everything' did not answer within 1 s."
      ])
      const warnings = events.filter((e) => e.type === "custom" && e.name === "warning")
      assert.lengthOf(warnings, 1)
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
    }), SLOW)

  it.scopedLive("a server that cannot start: its tools are missing, each run says so once, the run still works", () =>
    Effect.gen(function*() {
      const { factory } = yield* app({
        servers: { mute: Servers.silent({ session_init_timeout: 1 }), everything: Servers.everything() },
        script: ["Hello."]
      })
      const events = yield* turn(factory, "t-mute", "hi")
      const warnings = events.flatMap((e) => (e.type === "custom" && e.name === "warning" ? [(e.data as any).message] : []))
      assert.deepStrictEqual(warnings, ["MCP server 'mute' did not finish starting within 1 s"])
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
    }), SLOW)
})

// DeerFlow's test_tool_deduplication (issue #1803): a tool whose name is taken is left out, with a warning
describe("an MCP tool named as one of the agent's own tools", () => {
  it.scopedLive("is left out with a warning in the report and in the run; the model gets the agent's own", () =>
    Effect.gen(function*() {
      const { chat, factory, models } = yield* app({
        servers: { srv: { ...Servers.named(["ask_clarification", "lookup"]), tool_name_prefix: false } },
        script: ["Done."]
      })
      const told = "MCP server 'srv': a second tool named ask_clarification is left out (the agent's own comes first)"
      const assembly = yield* factory.tools(Factory.resolve(models, {}))
      assert.include(assembly.warnings, told)
      const entries = assembly.entries.filter((e) => e.source === "mcp").map((e) => [e.name, e.state])
      assert.deepStrictEqual(entries, [["ask_clarification", "missing"], ["lookup", "available"]])
      const events = yield* turn(factory, "t-shadow", "hi")
      const warnings = events.flatMap((e) =>
        e.type === "custom" && e.name === "warning" ? [(e.data as any).message] : []
      )
      assert.deepStrictEqual(warnings, [told])
      const offered = (chat.requests[0]!.tools as ReadonlyArray<any>)
        .filter((t) => t.function.name === "ask_clarification")
      assert.lengthOf(offered, 1)
      assert.notStrictEqual(offered[0].function.description, "Query internal data")
      assert.include(toolNames(chat.requests[0]!), "lookup")
    }), SLOW)
})
