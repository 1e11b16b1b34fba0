/**
 * MCP tools as Antler tools: the server's own JSON Schema is what the model sees, arguments go to the server
 * as given (the server validates them), and results become tool messages: text as text, images as image
 * blocks with a line saying what they are, embedded resources as their text (or a line for binary data),
 * resource links as a line with their URI, structured content as JSON when nothing else says it. A failing
 * server is a readable `Error: ...` result and one `warning` event per outage, never a failed run.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Decode from "./mcp/Decode.js"
import * as FunctionSchema from "./mcp/FunctionSchema.js"
import type { Mcp, McpResult, McpTool } from "../services/Mcp.js"
import { RunContext } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import * as Tool from "../services/Tool.js"
import type { ContentBlock, JsonObject } from "../state/Message.js"
import * as M from "../state/Message.js"

/** Images larger than this are described, not kept in the thread. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024

const Args = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const base64Bytes = (data: string) => Math.floor((data.replace(/=+$/, "").length * 3) / 4)

const sizeText = (bytes: number) =>
  bytes >= 1024 * 1024
    ? `${(bytes / 1024 / 1024).toFixed(1)} MiB`
    : bytes >= 1024
    ? `${(bytes / 1024).toFixed(1)} KiB`
    : `${bytes} bytes`

/** The content and status of a tool message. */
export interface ToolContent {
  readonly content: string | ReadonlyArray<ContentBlock>
  readonly status: "success" | "error"
}

/** The tool message content of an MCP result (see the module header). */
export const contentOf = (result: McpResult): ToolContent => {
  const blocks: Array<ContentBlock> = []
  const text = (value: string) => blocks.push({ type: "text", text: value })
  for (const block of result.content) {
    switch (block.type) {
      case "text":
        text(block.text)
        break
      case "image": {
        const bytes = base64Bytes(block.data)
        if (bytes <= MAX_IMAGE_BYTES && /^image\/[a-z0-9.+-]+$/i.test(block.mimeType)) {
          text(`[image: ${block.mimeType}, ${sizeText(bytes)}]`)
          blocks.push({ type: "image_url", image_url: { url: `data:${block.mimeType};base64,${block.data}` } })
        } else {
          text(`[image: ${block.mimeType}, ${sizeText(bytes)}, not kept]`)
        }
        break
      }
      case "audio":
        text(`[audio: ${block.mimeType}, ${sizeText(base64Bytes(block.data))}, not kept]`)
        break
      case "resource": {
        const r = block.resource
        const kind = r.mimeType !== undefined ? ` (${r.mimeType})` : ""
        if (r.text !== undefined) text(`Resource ${r.uri}${kind}:\n${r.text}`)
        else text(`[resource ${r.uri}: ${r.mimeType ?? "binary data"}, ${sizeText(base64Bytes(r.blob ?? ""))}]`)
        break
      }
      case "resource_link":
        text(
          `Resource link: ${block.name ?? block.uri} <${block.uri}>` +
            (block.mimeType !== undefined ? ` (${block.mimeType})` : "") +
            (block.description !== undefined ? ` - ${block.description}` : "")
        )
        break
      case "other":
        text(JSON.stringify(block.value) ?? "")
        break
    }
  }
  const said = blocks.some((b) => b.type === "text" && String(b.text).trim() !== "")
  if (!said && result.structuredContent !== undefined) {
    text(JSON.stringify(result.structuredContent, null, 2))
  }
  if (result.isError) {
    const first = blocks.findIndex((b) => b.type === "text")
    const message = first < 0 ? "" : (blocks[first] as { text: string }).text
    if (!message.startsWith("Error:")) {
      if (first < 0) blocks.unshift({ type: "text", text: "Error: the tool failed without saying why." })
      else blocks[first] = { type: "text", text: `Error: ${message}` }
    }
  }
  const status = result.isError ? "error" : "success"
  if (blocks.every((b) => b.type === "text")) {
    return { content: blocks.map((b) => (b as { text: string }).text).join("\n"), status }
  }
  return { content: blocks, status }
}

/** An Antler tool for an MCP tool, calling it through the app's MCP service. */
export const tool = (mcp: Mcp["Type"], spec: McpTool): Tool.Tool => ({
  name: spec.name,
  description: spec.description,
  parameters: Args,
  definition: FunctionSchema.definition(spec.name, spec.description, spec.inputSchema, Decode.description),
  mcpServer: spec.server,
  handler: (args, call) =>
    Effect.flatMap(RunContext, (run) =>
      mcp.call(spec.server, spec.original, args as JsonObject, {
        userId: run.userId,
        threadId: run.threadId,
        ...(run.options.secrets === undefined ? {} : { secrets: run.options.secrets })
      })).pipe(
      Effect.map((result) => {
        const { content, status } = contentOf(result)
        return { message: M.tool(content, call.id, { name: call.name, status }) }
      }),
      Effect.catchTag("McpError", (error) =>
        Effect.as(
          error.firstInOutage
            ? emitCustom("warning", { message: error.message, source: "mcp", server: error.server })
            : Effect.void,
          `Error: ${spec.name} could not run: ${error.message}.`
        ))
    )
})

/** The Antler tools of an MCP catalog. */
export const tools = (mcp: Mcp["Type"], specs: ReadonlyArray<McpTool>): ReadonlyArray<Tool.Tool> =>
  specs.map((spec) => tool(mcp, spec))
