/**
 * The MCP error-cut attacks' parts (Attack27McpErrorCut, Attack29McpErrorCut, Attack29bMcpStartCut): stdio MCP servers
 * whose tool, listing or start fails saying a value where McpClient's cut of the error falls, and a scripted model that
 * calls the tool once and keeps what it read as the tool's result.
 */
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as Servers from "./mcpServers.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")

/**
 * The source of a stdio MCP server `erp` whose tool `report` fails saying the value of the JavaScript expression `said`
 * (evaluated in the server) 469 characters into its error, inside the cut at 500.
 */
export const failingReport = (said: string) => `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const server = new Server({ name: "erp", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "report", description: "Fetches the report", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => {
    throw new Error("refused: " + "x".repeat(460) + (${said}) + " is not valid here")
  })
  await server.connect(new StdioServerTransport())
`

/**
 * The source of a stdio MCP server `erp` whose tool `report` answers saying the value of the JavaScript expression
 * `said` (a credential it shares with another server), whole (Attack30ToolResultKey).
 */
export const answeringReport = (said: string) => `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const server = new Server({ name: "erp", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "report", description: "Fetches the report", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: "text", text: "report: upstream key " + (${said}) + " in use" }]
  }))
  await server.connect(new StdioServerTransport())
`

/** The `erp` server of `failingReport(said)` over stdio, as `extensions_config.json` names it. */
export const reportServer = (said: string) =>
  Servers.server({ type: "stdio", command: process.execPath, args: ["--input-type=module", "-e", failingReport(said)] })

/** A model that calls `erp_report` once, then ends; `seenByModel` holds each tool result it was sent, as JSON. */
export const reportCaller = () => {
  const seenByModel: Array<string> = []
  const script = (body: ChatRequestBody): Turn => {
    const last = body.messages.at(-1)
    if (last?.role === "tool") {
      seenByModel.push(JSON.stringify(last.content))
      return "The server failed."
    }
    return { toolCalls: [{ name: "erp_report", arguments: {} }] }
  }
  return { seenByModel, script }
}

/**
 * The source of a stdio MCP server whose listing fails saying the value of the JavaScript expression `said` 469
 * characters into its error, inside the cut at 500.
 */
export const failingListing = (said: string) => `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const server = new Server({ name: "lister", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    throw new Error("refused: " + "x".repeat(460) + (${said}) + " is not valid here")
  })
  await server.connect(new StdioServerTransport())
`

/**
 * The source of a process that says the value of `said` on its stderr 290 characters in, inside the cut of a failed
 * start's stderr tail at 300, and exits before any handshake.
 */
export const failingStart = (said: string) =>
  `process.stderr.write("y".repeat(290) + (${said}) + " is not valid here\\n"); process.exit(1)`
