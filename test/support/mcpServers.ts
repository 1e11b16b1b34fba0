/**
 * MCP servers for tests: the npm reference servers run from node_modules (never `npx -y`), and a streamable
 * HTTP server started in the test process (the SDK's own server on 127.0.0.1), which records the headers of
 * every request it gets.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { z } from "zod"
import { McpServerConfig } from "../../src/services/Extensions.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")

/** `@modelcontextprotocol/server-everything`'s entry point. */
export const EVERYTHING = Path.join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

/** `@modelcontextprotocol/server-filesystem`'s entry point. */
export const FILESYSTEM = Path.join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")

/** A decoded server entry, written as in `extensions_config.json`. */
export const server = (fields: Record<string, unknown>): McpServerConfig =>
  Schema.decodeUnknownSync(McpServerConfig)(fields)

/** server-everything over stdio. */
export const everything = (extra: Record<string, unknown> = {}) =>
  server({ type: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], ...extra })

/** A process that starts and then never says anything (its MCP handshake never finishes). */
export const silent = (extra: Record<string, unknown> = {}) =>
  server({ type: "stdio", command: process.execPath, args: ["-e", "process.stdin.resume(); setInterval(() => {}, 1e6)"], ...extra })

/**
 * A stdio MCP server (the SDK's low-level `Server`) that lists `tools` as given (name, description, input schema),
 * each answering with its own name: a hostile server's listing, as it sends it.
 */
export const listing = (tools: ReadonlyArray<Record<string, unknown>>) => {
  // (base64: a server's arguments are read for `$VARIABLE`s, and a schema holds `$ref`s)
  const base64 = Buffer.from(JSON.stringify(tools)).toString("base64")
  const sdk = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
  const script = `
    import { Server } from ${JSON.stringify(`${sdk}/server/index.js`)}
    import { StdioServerTransport } from ${JSON.stringify(`${sdk}/server/stdio.js`)}
    import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${sdk}/types.js`)}
    const tools = JSON.parse(Buffer.from(${JSON.stringify(base64)}, "base64").toString("utf8"))
    const server = new Server({ name: "listing", version: "1.0.0" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
    server.setRequestHandler(CallToolRequestSchema, async (request) => ({
      content: [{ type: "text", text: "called " + request.params.name }]
    }))
    await server.connect(new StdioServerTransport())
  `
  return server({ type: "stdio", command: process.execPath, args: ["--input-type=module", "-e", script] })
}

/** A server like `listing`'s whose tools have the names given: a hostile server's names, as it sends them. */
export const named = (names: ReadonlyArray<string>) =>
  listing(names.map((name) => ({ name, description: "Query internal data", inputSchema: { type: "object" } })))

/** A running streamable HTTP MCP server. */
export interface HttpMcp {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string
  /** Headers of every HTTP request it got (lower-cased names). */
  readonly headers: ReadonlyArray<Http.IncomingHttpHeaders>
}

/**
 * A stateless streamable HTTP MCP server with two tools: `add(a, b)` and `lookup(key)` (a text answer plus
 * an image). It closes with the scope.
 */
export const httpServer = Effect.acquireRelease(
  Effect.async<{ readonly http: Http.Server; readonly info: HttpMcp }>((resume) => {
    const headers: Array<Http.IncomingHttpHeaders> = []
    const http = Http.createServer((req, res) => {
      headers.push(req.headers)
      const mcp = new McpServer({ name: "test-http", version: "1.0.0" })
      mcp.registerTool("add", {
        description: "Adds two numbers",
        inputSchema: { a: z.number(), b: z.number() }
      }, async ({ a, b }) => ({ content: [{ type: "text", text: `${a} + ${b} = ${a + b}` }] }))
      mcp.registerTool("lookup", {
        description: "Looks a key up in the warehouse inventory",
        inputSchema: { key: z.string() }
      }, async ({ key }) => ({
        content: [
          { type: "text", text: `inventory[${key}] = 42 crates` },
          { type: "image", data: Buffer.from("not really a png").toString("base64"), mimeType: "image/png" }
        ]
      }))
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined } as {})
      res.on("close", () => {
        void transport.close()
        void mcp.close()
      })
      void mcp.connect(transport).then(() => transport.handleRequest(req, res))
    })
    http.listen(0, "127.0.0.1", () => {
      const port = (http.address() as AddressInfo).port
      resume(Effect.succeed({ http, info: { url: `http://127.0.0.1:${port}/mcp`, headers } }))
    })
  }),
  ({ http }) =>
    Effect.async<void>((resume) => {
      http.closeAllConnections()
      http.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ info }) => info))

/** An SSE MCP server (the SDK's older transport) with one tool, `shout(text)`; it records request headers. */
export const sseServer = Effect.acquireRelease(
  Effect.async<{ readonly http: Http.Server; readonly info: HttpMcp }>((resume) => {
    const headers: Array<Http.IncomingHttpHeaders> = []
    const sessions = new Map<string, SSEServerTransport>()
    const http = Http.createServer((req, res) => {
      headers.push(req.headers)
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      if (req.method === "GET" && url.pathname === "/sse") {
        const transport = new SSEServerTransport("/messages", res)
        sessions.set(transport.sessionId, transport)
        const mcp = new McpServer({ name: "test-sse", version: "1.0.0" })
        mcp.registerTool("shout", { description: "Says it louder", inputSchema: { text: z.string() } }, async ({ text }) => ({
          content: [{ type: "text", text: text.toUpperCase() }]
        }))
        res.on("close", () => sessions.delete(transport.sessionId))
        void mcp.connect(transport)
        return
      }
      const transport = sessions.get(url.searchParams.get("sessionId") ?? "")
      if (req.method === "POST" && transport !== undefined) return void transport.handlePostMessage(req, res)
      res.writeHead(404).end()
    })
    http.listen(0, "127.0.0.1", () => {
      const port = (http.address() as AddressInfo).port
      resume(Effect.succeed({ http, info: { url: `http://127.0.0.1:${port}/sse`, headers } }))
    })
  }),
  ({ http }) =>
    Effect.async<void>((resume) => {
      http.closeAllConnections()
      http.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ info }) => info))
