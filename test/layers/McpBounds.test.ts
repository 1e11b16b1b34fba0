/**
 * One message from an MCP server is bounded as it arrives, not after it was held whole: a real server process
 * (test/fixtures/mcp-flood.mjs) answers a call with a 50 MiB stdio line, a 50 MiB HTTP body or a 50 MiB event (of a
 * streamable HTTP response, or on the older SSE transport's stream).
 * The model's call fails with an error naming the server and the 16 MiB limit while the server is still writing
 * (it never gets to hand the whole message over), and the next call works. A `tools/list` past the bound is a
 * readable problem of that server's. The stdio read buffer alone: lines split over chunks, several in one chunk,
 * a long line skipped up to its end and the next one kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as McpClient from "../../src/layers/McpClient.js"
import * as McpTools from "../../src/layers/McpTools.js"
import { LineBuffer } from "../../src/layers/mcp/Bounds.js"
import { processAlive } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"
import { until } from "../support/poll.js"

const tempDir = tempDirs()
const SLOW = 120_000
const FLOOD = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/mcp-flood.mjs")

const invoke = (tool: Tool.Tool) => {
  const run = inRun()
  return Tool.invoke(tool, { id: "call_1", name: tool.name, args: {} }).pipe(
    Effect.provide(run.context),
    Effect.map((result) => ({ status: result.message.status, text: M.contentText(result.message.content) }))
  )
}

/** The model's tools of `mcp`, by name. */
const toolsOf = (mcp: Effect.Effect.Success<ReturnType<typeof McpClient.make>>) =>
  Effect.map(mcp.catalog, (catalog) => new Map(McpTools.tools(mcp, catalog.tools).map((t) => [t.name, t])))

/** The flood server over HTTP, started as a process of its own: its URL and what it printed. */
const httpFlood = (kind: "http" | "sse" = "http") => Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly child: Child.ChildProcess; readonly url: string; readonly out: () => string }>(
      (resolve, reject) => {
        const child = Child.spawn(process.execPath, [FLOOD, kind], { stdio: ["ignore", "pipe", "inherit"] })
        let out = ""
        child.stdout.setEncoding("utf8")
        child.stdout.on("data", (text: string) => {
          out += text
          const port = /listening (\d+)/.exec(out)?.[1]
          const path = kind === "http" ? "mcp" : "sse"
          if (port !== undefined) resolve({ child, url: `http://127.0.0.1:${port}/${path}`, out: () => out })
        })
        child.once("exit", () => reject(new Error(`the flood server exited: ${out}`)))
      }
    )
  ),
  ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
)

describe("a message from an MCP server is bounded as it arrives", () => {
  it.scopedLive("stdio: a 50 MiB line fails the call readably before it is all sent; the next call works", () =>
    Effect.gen(function*() {
      const marker = Path.join(tempDir("antler-mcp-flood-"), "marker")
      const mcp = yield* McpClient.make({
        servers: {
          flood: Servers.server({ command: process.execPath, args: [FLOOD, "stdio"], env: { FLOOD_MARKER: marker } })
        }
      })
      const tools = yield* toolsOf(mcp)
      const first = (yield* mcp.status)[0]!
      const failed = yield* invoke(tools.get("flood_flood")!)
      assert.strictEqual(failed.status, "error")
      assert.include(failed.text, "MCP server 'flood' sent a line over the 16 MiB limit on one message")
      assert.include(failed.text, "started again on the next call")
      // the server never handed the whole line over: it was ended while writing it
      yield* Effect.promise(() => until(() => !processAlive(first.pid!), "the server ended"))
      assert.isFalse(Fs.existsSync(marker), "the server wrote all 50 MiB")
      const next = yield* invoke(tools.get("flood_ping")!)
      assert.deepStrictEqual(next, { status: "success", text: "pong" })
      assert.strictEqual((yield* mcp.status)[0]!.starts, 2)
    }), SLOW)

  it.scopedLive("HTTP: a 50 MiB body, and a 50 MiB event, fail their calls while being written; the next works", () =>
    Effect.gen(function*() {
      const server = yield* httpFlood()
      const mcp = yield* McpClient.make({ servers: { flood: Servers.server({ type: "http", url: server.url }) } })
      const tools = yield* toolsOf(mcp)
      const body = yield* invoke(tools.get("flood_flood")!)
      assert.strictEqual(body.status, "error")
      assert.include(body.text, "MCP server 'flood' sent a response body over the 16 MiB limit on one message")
      yield* Effect.promise(() => until(() => server.out().includes("closed-early"), "the body was cut off"))
      assert.deepStrictEqual((yield* invoke(tools.get("flood_ping")!)), { status: "success", text: "pong" })
      const event = yield* invoke(tools.get("flood_bigevent")!)
      assert.strictEqual(event.status, "error")
      assert.include(event.text, "MCP server 'flood' sent an event over the 16 MiB limit on one message")
      yield* Effect.promise(() =>
        until(() => server.out().split("closed-early").length === 3, "the event stream was cut off")
      )
      assert.notInclude(server.out(), "sent-all")
      assert.deepStrictEqual((yield* invoke(tools.get("flood_ping")!)), { status: "success", text: "pong" })
    }), SLOW)

  it.scopedLive("SSE: a 50 MiB event on the stream fails the call while the server writes; then a call works", () =>
    Effect.gen(function*() {
      const server = yield* httpFlood("sse")
      const mcp = yield* McpClient.make({ servers: { flood: Servers.server({ type: "sse", url: server.url }) } })
      const tools = yield* toolsOf(mcp)
      const event = yield* invoke(tools.get("flood_flood")!)
      assert.strictEqual(event.status, "error")
      assert.include(event.text, "MCP server 'flood' sent an event over the 16 MiB limit on one message")
      yield* Effect.promise(() => until(() => server.out().includes("closed-early"), "the event stream was cut off"))
      assert.notInclude(server.out(), "sent-all")
      assert.deepStrictEqual((yield* invoke(tools.get("flood_ping")!)), { status: "success", text: "pong" })
    }), SLOW)

  it.scopedLive("of a server listing 3000 tools, the first 1000 are kept, saying the rest are left out", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: {
          many: Servers.server({ command: process.execPath, args: [FLOOD, "stdio"], env: { FLOOD_TOOLS: "3000" } })
        }
      })
      const catalog = yield* mcp.catalog
      assert.strictEqual(catalog.tools.length, 1000)
      assert.deepStrictEqual(catalog.tools.slice(0, 4).map((t) => t.name), [
        "many_flood",
        "many_bigevent",
        "many_ping",
        "many_tool_0"
      ])
      assert.deepStrictEqual(catalog.problems, [
        { server: "many", message: "MCP server 'many' lists more than 1000 tools: the rest are left out" }
      ])
    }), SLOW)

  it.scopedLive("a tool listing past the bound leaves that server's tools out, saying why", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: {
          many: Servers.server({ command: process.execPath, args: [FLOOD, "stdio"], env: { FLOOD_TOOLS: "5000" } })
        },
        maxMessageBytes: 256 * 1024
      })
      const catalog = yield* mcp.catalog
      assert.deepStrictEqual(catalog.tools, [])
      assert.deepStrictEqual(catalog.problems.map((p) => p.server), ["many"])
      assert.include(
        catalog.problems[0]!.message,
        "MCP server 'many' did not list its tools: MCP server 'many' sent a line over the 256 KiB limit"
      )
    }), SLOW)
})

describe("the stdio read buffer", () => {
  const limit = (told: Array<string>) => ({ server: "s", bytes: 16, onOversize: (m: string) => void told.push(m) })
  const drain = (buffer: LineBuffer) => {
    const out: Array<unknown> = []
    for (let m = buffer.readMessage(); m !== null; m = buffer.readMessage()) out.push(m)
    return out
  }

  it("joins a line split over chunks and splits a chunk of several lines", () => {
    const told: Array<string> = []
    const buffer = new LineBuffer(limit(told), (line) => JSON.parse(line))
    buffer.append(Buffer.from("{\"a\":"))
    assert.deepStrictEqual(drain(buffer), [])
    buffer.append(Buffer.from("1}\r\n[2]\n[3"))
    assert.deepStrictEqual(drain(buffer), [{ a: 1 }, [2]])
    buffer.append(Buffer.from("]\n"))
    assert.deepStrictEqual(drain(buffer), [[3]])
    assert.deepStrictEqual(told, [])
  })

  it("skips a line past the bound up to its end, tells once, and keeps the next line", () => {
    const told: Array<string> = []
    const buffer = new LineBuffer(limit(told), (line) => JSON.parse(line))
    buffer.append(Buffer.from("[\"" + "x".repeat(20)))
    buffer.append(Buffer.from("y".repeat(40)))
    buffer.append(Buffer.from("\"]\n[1]\n"))
    assert.deepStrictEqual(drain(buffer), [[1]])
    assert.deepStrictEqual(told, [
      "MCP server 's' sent a line over the 16 bytes limit on one message; it was dropped unread and the connection " +
      "closed (the server is started again on the next call)"
    ])
  })
})
