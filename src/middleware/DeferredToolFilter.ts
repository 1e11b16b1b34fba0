/**
 * Deferred tools (SPEC §5.25, §7.14): with `tool_search.enabled`, MCP tools are withheld from the model until
 * `tool_search` promotes them. The middleware contributes `tool_search`, removes every deferred tool that is
 * not promoted for this catalog from each model request, and refuses a call to one with DeerFlow's message.
 *
 * Promotions live in thread state (`promoted = { catalog_hash, names }`, merged by `Reducers.mergePromoted`)
 * and count only for the catalog hash of this agent's deferred set: a thread promoted under another set of
 * tools starts over. `tool_search` writes its promotion with its result, so a tool it finds is visible from
 * the next model call on.
 */
import { createHash } from "node:crypto"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as OnDemand from "../internal/OnDemand.js"
import type { ToolDefinition } from "../services/ModelService.js"
import { RunState } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import type { Promoted } from "../state/ThreadState.js"
import * as M from "../state/Message.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Json from "../state/Json.js"
import * as Chain from "./Chain.js"

export const TOOL_NAME = "tool_search"

/** Tools returned by one search at most. */
export const MAX_RESULTS = 5

/** A tool as OpenAI's function schema (`{ name, description, parameters }`), which `tool_search` returns. */
export const functionSchema = (tool: ToolDefinition) => ({
  name: tool.name,
  description: tool.description,
  parameters: tool.parameters
})

/** The catalog hash: the first 16 hex digits of sha256 over the sorted `(name, schema)` list (SPEC §7.14). */
export const catalogHash = (tools: ReadonlyArray<ToolDefinition>): string => {
  const sorted = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  // (the same text DeerFlow hashes)
  const blob = Json.pythonDumps(sorted.map((tool) => ({ name: tool.name, schema: functionSchema(tool) })))
  return createHash("sha256").update(blob, "utf8").digest("hex").slice(0, 16)
}

const compile = (pattern: string) => {
  const { RE2JS } = OnDemand.re2js()
  try {
    return RE2JS.compile(RE2JS.translateRegExp(pattern), RE2JS.CASE_INSENSITIVE)
  } catch {
    return RE2JS.compile(RE2JS.quote(pattern), RE2JS.CASE_INSENSITIVE)
  }
}

const hits = (regex: ReturnType<typeof compile>, text: string): number => {
  const matcher = regex.matcher(text)
  let count = 0
  while (count < 1000 && matcher.find()) count++
  return count
}

/**
 * The tools a query finds (SPEC §7.14): `select:a,b` by exact name (all of them: the model named each); `+term
 * rest` among names containing `term`, ranked by hits of `rest`; otherwise a case-insensitive regular expression
 * (linear-time RE2; an invalid one is taken literally) over name and description, name hits first. The ranked
 * forms return at most 5.
 */
export const search = (catalog: ReadonlyArray<ToolDefinition>, raw: string): ReadonlyArray<ToolDefinition> => {
  const query = raw.trim()
  if (query === "") return []
  if (query.startsWith("select:")) {
    const wanted = new Set(query.slice(7).split(",").map((name) => name.trim()))
    return catalog.filter((tool) => wanted.has(tool.name))
  }
  if (query.startsWith("+")) {
    const [required, ...rest] = query.slice(1).trim().split(/\s+/)
    if (required === undefined || required === "") return []
    const candidates = catalog.filter((tool) => tool.name.toLowerCase().includes(required.toLowerCase()))
    if (rest.length === 0) return candidates.slice(0, MAX_RESULTS)
    const regex = compile(rest.join(" "))
    return candidates
      .map((tool, index) => ({ tool, index, score: hits(regex, `${tool.name} ${tool.description}`) }))
      .sort((a, b) => b.score - a.score || a.index - b.index)
      .slice(0, MAX_RESULTS)
      .map((entry) => entry.tool)
  }
  const regex = compile(query)
  const scored: Array<{ tool: ToolDefinition; index: number; score: number }> = []
  catalog.forEach((tool, index) => {
    if (hits(regex, `${tool.name} ${tool.description}`) > 0) {
      scored.push({ tool, index, score: hits(regex, tool.name) > 0 ? 2 : 1 })
    }
  })
  return scored.sort((a, b) => b.score - a.score || a.index - b.index).slice(0, MAX_RESULTS).map((entry) => entry.tool)
}

/** The deferred names still hidden: deferred minus those promoted for this catalog. */
export const hidden = (deferred: ReadonlySet<string>, promoted: Promoted | null, hash: string): ReadonlySet<string> => {
  if (promoted === null || promoted.catalog_hash !== hash) return deferred
  const out = new Set(deferred)
  for (const name of promoted.names) out.delete(name)
  return out
}

/** DeerFlow's refusal of a call to a deferred tool that was not promoted. */
export const refusal = (name: string): string =>
  `Error: Tool '${name}' is deferred and has not been promoted yet. Call tool_search first to expose and promote ` +
  "this tool's schema, then retry."

/** The arguments of `tool_search`. */
export const Arguments = Schema.Struct({
  query: Schema.String.annotations({
    description: "Which deferred tools to load: \"select:name1,name2\" for exact names, \"+term more words\" for " +
      "names containing term ranked by the other words, or keywords / a regular expression matched against " +
      "names and descriptions."
  })
})

/**
 * `tool_search`'s description, DeerFlow's docstring as LangChain's `@tool` hands it to the model (the indentation of
 * the lines after the first kept, as Python 3.12 leaves it).
 */
export const DESCRIPTION = [
  "Fetches full schema definitions for deferred tools so they can be called.",
  "",
  "        Deferred tools appear by name in <available-deferred-tools> in the system",
  "        prompt. Until fetched, only the name is known. This tool matches a query",
  "        against the deferred tools and returns the matched tools complete schemas;",
  "        once returned, a tool becomes callable.",
  "",
  "        Query forms:",
  "          - \"select:Read,Edit\" -- fetch these exact tools by name",
  "          - \"notebook jupyter\" -- keyword search, up to max_results best matches",
  "          - \"+slack send\" -- require \"slack\" in the name, rank by remaining terms"
].join("\n")

/** The `tool_search` tool over a deferred catalog. */
export const tool = (catalog: ReadonlyArray<ToolDefinition>, hash: string): Tool.Tool =>
  Tool.make({
    name: TOOL_NAME,
    description: DESCRIPTION,
    parameters: Arguments,
    handler: (args, call) => {
      const matched = search(catalog, args.query)
      const content = matched.length === 0
        ? `No tools found matching: ${args.query}`
        : JSON.stringify(matched.map(functionSchema), null, 2)
      return Effect.succeed({
        message: M.tool(content, call.id, { name: TOOL_NAME, status: "success" }),
        update: { promoted: { catalog_hash: hash, names: matched.map((t) => t.name) } }
      })
    }
  })

/** Options of the middleware. */
export interface Options {
  /** The deferred tools (their definitions as the model would see them once promoted). */
  readonly deferred: ReadonlyArray<ToolDefinition>
}

/** The middleware: contributes `tool_search`, hides unpromoted deferred tools, refuses calls to them. */
export const layer = (options: Options): Middleware => {
  const hash = catalogHash(options.deferred)
  const names: ReadonlySet<string> = new Set(options.deferred.map((t) => t.name))
  const stillHidden = Effect.flatMap(RunState, (holder) =>
    Effect.map(holder.get, (state) => hidden(names, state.promoted, hash)))
  return MW.make({
    tools: [tool(options.deferred, hash)],
    model: (request, next) =>
      Effect.flatMap(stillHidden, (hide) =>
        next(hide.size === 0 ? request : { ...request, tools: request.tools.filter((t) => !hide.has(t.name)) })),
    tool: (call, next) =>
      names.has(call.name)
        ? Effect.flatMap(stillHidden, (hide) =>
          hide.has(call.name) ? Effect.succeed(Tool.errorResult(call, refusal(call.name))) : next(call))
        : next(call)
  })
}

/** Its chain entry: hides deferred tools until promoted, inside the retries and error handling. */
export const entry = (options: Options) =>
  Chain.entry("DeferredToolFilter", () => layer(options), [
    { inside: "ToolErrorHandling", reason: "a refused call to a deferred tool is still a result with tool metadata" },
    { inside: "LLMErrorHandling", reason: "every attempt of a retried call sees the current promotions" }
  ])
