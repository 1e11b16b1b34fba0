/**
 * What an MCP server sends about its tools, decoded: tool names checked, made safe for model APIs and namespaced, input
 * schemas checked to be JSON object schemas of reasonable size, descriptions cleaned and clipped, and tool
 * results decoded leniently. All of it is untrusted.
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { McpServerConfig } from "../../services/Extensions.js"
import { routingOf } from "../../services/Extensions.js"
import type { McpContent, McpResult, McpTool } from "../../services/Mcp.js"
import * as Json from "../../state/Json.js"
import type { JsonObject } from "../../state/Message.js"
import { clean } from "../SearchProviders.js"
import * as FunctionSchema from "./FunctionSchema.js"

const MAX_NAME = 64
const MAX_DESCRIPTION = 4000
const MAX_SCHEMA_CHARS = 100_000

/** A description a server wrote, as the model may read it: cleaned and clipped. */
export const description = (text: string): string => clean(text, MAX_DESCRIPTION)

/** The most tools kept of one server's listing (over all its pages); the rest are left out, saying so. */
export const MAX_TOOLS = 1000

/** A model-safe tool name: characters outside `[A-Za-z0-9_-]` become `_`, at most 64 characters. */
export const safeName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, MAX_NAME)

/**
 * A tool name a server may give: letters, digits, `_`, `-` (DeerFlow's `_VALID_MCP_TOOL_NAME`) and `.` (the MCP
 * spec allows it; it becomes `_`). Anything else (spaces, newlines, markup) could write text of the server's
 * choosing into the prompt's list of deferred tools, so such a tool is left out, as DeerFlow drops it.
 */
const VALID_TOOL_NAME = /^[A-Za-z0-9_.-]+$/

/** The name the model sees for a server's tool (DeerFlow: `<server>_<tool>` unless `tool_name_prefix: false`). */
export const exposedName = (server: string, tool: string, prefix: boolean): string =>
  safeName(prefix ? `${server}_${tool}` : tool)

const ToolListing = Schema.Struct({
  name: Schema.String,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  inputSchema: Schema.optional(Schema.Unknown)
})

/** A server's input schema as the model gets it: an object schema, `$schema` dropped; or why it cannot be used. */
export const inputSchemaOf = (raw: unknown): Either.Either<JsonObject, string> => {
  if (raw === undefined || raw === null) return Either.right({ type: "object", properties: {} })
  if (!Json.isRecord(raw)) return Either.left("its input schema is not an object")
  const { $schema: _, ...rest } = raw
  if (rest.type !== undefined && rest.type !== "object") {
    return Either.left("its input schema does not describe an object")
  }
  let text: string
  try {
    text = JSON.stringify(rest)
  } catch {
    return Either.left("its input schema is not JSON")
  }
  if (text.length > MAX_SCHEMA_CHARS) return Either.left(`its input schema is over ${MAX_SCHEMA_CHARS} characters`)
  // (in the server's order, as DeerFlow's model reads it; an object schema naming no type gets one)
  const schema = Json.parse(text) as JsonObject
  // (the model gets it with its references resolved: a few definitions referring to each other twice over resolve
  // to gigabytes)
  if (FunctionSchema.dereferenced(schema) === undefined) {
    return Either.left(
      `its input schema's $refs resolve to more than ${FunctionSchema.MAX_RESOLVED_VALUES} values`
    )
  }
  return Either.right(schema.type === undefined ? { type: "object", ...schema } : schema)
}

const Block = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
  Schema.Struct({ type: Schema.Literal("image", "audio"), data: Schema.String, mimeType: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("resource"),
    resource: Schema.Struct({
      uri: Schema.String,
      mimeType: Schema.optional(Schema.String),
      text: Schema.optional(Schema.String),
      blob: Schema.optional(Schema.String)
    })
  }),
  Schema.Struct({
    type: Schema.Literal("resource_link"),
    uri: Schema.String,
    name: Schema.optional(Schema.String),
    description: Schema.optional(Schema.String),
    mimeType: Schema.optional(Schema.String)
  })
)
const decodeBlock = Schema.decodeUnknownOption(Block, { onExcessProperty: "ignore" })

/**
 * A tool result as a server sent it, decoded leniently (a block of an unknown kind is kept as `other`), without
 * `__proto__` keys (the blocks kept as they are reach the thread's state: see `Json.parse`).
 */
export const resultOf = (given: unknown): McpResult => {
  const raw = Json.withoutProto(given)
  const record = Json.isRecord(raw) ? raw : {}
  const content = Array.isArray(record.content) ? record.content : []
  return {
    content: content.map((block): McpContent =>
      Option.getOrElse(decodeBlock(block) as Option.Option<McpContent>, () => ({ type: "other", value: block }))
    ),
    isError: record.isError === true,
    ...(record.structuredContent !== undefined ? { structuredContent: record.structuredContent } : {})
  }
}

/**
 * The tools of a server's listing as the model gets them, and why any were left out (no name, an input schema
 * that cannot be used).
 */
export const toolsOf = (
  server: string,
  config: McpServerConfig,
  raw: ReadonlyArray<unknown>
): { readonly tools: ReadonlyArray<McpTool>; readonly problems: ReadonlyArray<string> } => {
  const tools: Array<McpTool> = []
  const problems: Array<string> = []
  for (const item of raw) {
    const decoded = Schema.decodeUnknownEither(ToolListing, { onExcessProperty: "ignore" })(item)
    if (Either.isLeft(decoded)) {
      problems.push(`a tool of MCP server '${server}' was left out: it has no name`)
      continue
    }
    const tool = decoded.right
    if (!VALID_TOOL_NAME.test(tool.name)) {
      problems.push(
        `${server}: tool '${clean(tool.name, 100)}' was left out: its name has characters other than letters, ` +
          "digits, _, - and ."
      )
      continue
    }
    const schema = inputSchemaOf(tool.inputSchema)
    if (Either.isLeft(schema)) {
      problems.push(`${server}: tool '${clean(tool.name, 100)}' was left out: ${schema.left}`)
      continue
    }
    tools.push({
      server,
      name: exposedName(server, tool.name, config.tool_name_prefix),
      original: tool.name,
      // (none: "", as langchain-mcp-adapters gives DeerFlow's model; a task's submit tool then has its contract alone)
      description: description(tool.description ?? ""),
      inputSchema: schema.right,
      routing: routingOf(config, tool.name)
    })
  }
  return { tools, problems }
}
