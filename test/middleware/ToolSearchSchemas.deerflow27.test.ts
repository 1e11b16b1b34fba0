/**
 * What `tool_search` answers about MCP tools is what DeerFlow's answers (LangChain's `convert_to_openai_function`
 * over the MCP adapter's tool): `title` keys dropped but a property's named so, `$ref`s resolved (a recursive one
 * cut), `$defs` dropped, the schema's own description standing in for a tool that has none; and its catalog hash,
 * taken over the same schemas, is DeerFlow's, so a server renaming a schema's titles keeps the thread's promotions.
 * The fixture is rendered with LangChain's own conversion by test/fixtures/deerflow/prompts/render_tool_search.py.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Decode from "../../src/layers/mcp/Decode.js"
import * as McpTools from "../../src/layers/McpTools.js"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import type { Mcp } from "../../src/services/Mcp.js"
import * as Tool from "../../src/services/Tool.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"

const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const deerflow: {
  tools: Array<{ name: string; description: string; inputSchema: JsonObject }>
  answer: string
  catalog_hash: string
} = JSON.parse(Fs.readFileSync(Path.join(fixtures, "tool_search.json"), "utf8"))

// (definitions are read without calling a server)
const noMcp = new Proxy({}, { get: () => () => Effect.die("not called") }) as Mcp["Type"]

/** The MCP tools as Antler decodes a server's listing and offers them to the model. */
const definitions = (tools: typeof deerflow.tools) =>
  tools.map(({ name, description, inputSchema }) => {
    const schema = Decode.inputSchemaOf(inputSchema)
    assert.isTrue(Either.isRight(schema), name)
    const spec = {
      server: "srv",
      name,
      original: name,
      description: Decode.description(description),
      inputSchema: Either.getOrThrow(schema),
      routing: { mode: "off" as const, priority: 0, keywords: [] }
    }
    return Tool.definition(McpTools.tool(noMcp, spec))
  })

const search = (catalog: ReturnType<typeof definitions>, query: string) =>
  Tool.invoke(
    DeferredToolFilter.tool(catalog, DeferredToolFilter.catalogHash(catalog)),
    { id: "call-1", name: "tool_search", args: { query } }
  ).pipe(Effect.provide(inRun().context))

describe("tool_search's answer and catalog hash, as DeerFlow's", () => {
  it.effect("the model reads each MCP tool's schema as LangChain converts it", () =>
    Effect.gen(function*() {
      const catalog = definitions(deerflow.tools)
      const result = yield* search(catalog, `select:${deerflow.tools.map((t) => t.name).join(",")}`)
      assert.strictEqual(M.contentText(result.message.content), deerflow.answer)
      // the tool with no description of its own is described by its schema's, in the request too
      assert.strictEqual(catalog[1]!.description, "Create a ticket in the tracker.")
      assert.notInclude(JSON.stringify(catalog.map((d) => d.parameters)), "\"$ref\"")
    }))

  it("the catalog hash is DeerFlow's, and a title-only change to a schema keeps it (and the promotions)", () => {
    const catalog = definitions(deerflow.tools)
    assert.strictEqual(DeferredToolFilter.catalogHash(catalog), deerflow.catalog_hash)
    const retitled = deerflow.tools.map((t) => ({ ...t, inputSchema: { ...t.inputSchema, title: "Renamed" } }))
    assert.strictEqual(DeferredToolFilter.catalogHash(definitions(retitled)), deerflow.catalog_hash)
  })
})
