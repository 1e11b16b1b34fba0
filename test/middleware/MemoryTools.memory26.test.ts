/**
 * The memory tools as the model reads them in tool mode (DeerFlow test_memory_tools.py; its tools.py docstrings
 * through LangChain's `@tool(parse_docstring=True)`: the paragraphs before `Args:` joined by a space, each
 * argument's lines joined by a space). Word for word, but where Antler's tool does otherwise: `memory_search`
 * matches words (not one phrase) and its `limit` is 1 to 50 (docs/deerflow.md).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as MemoryMW from "../../src/middleware/Memory.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService, type ToolDefinition } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()

/** DeerFlow's descriptions (rendered from backend/packages/harness/deerflow/agents/memory/tools.py). */
const DEERFLOW = {
  memory_search: {
    description: "Search existing facts by natural language query. Use this when you need to check what you " +
      "already know about the user\n- their preferences, past corrections, context, or any stored facts.",
    args: {
      query: "Natural language query to match against fact content. Case-insensitive substring matching.",
      category: "Optional category filter (e.g. \"preference\", \"correction\", \"context\"). Only facts with this " +
        "exact category are returned.",
      limit: "Maximum results to return (default 10)."
    }
  },
  memory_add: {
    description: "Store a new fact about the user or conversation context. Use this when the user shares " +
      "something worth remembering for future\nconversations - preferences, corrections, personal details, work " +
      "context.\nThe fact persists across sessions and will be available via memory_search\nand automatic context " +
      "injection.",
    args: {
      content: "The fact text to remember. Be specific and factual.",
      category: "Category label for organization (default \"context\"). e.g. \"preference\", \"correction\", " +
        "\"behavior\", \"personal\".",
      confidence: "How certain you are about this fact, 0.0-1.0 (default 0.7). Use higher values for explicit user " +
        "statements, lower for inferences."
    }
  },
  memory_update: {
    description: "Update an existing fact. Only provided fields are changed; omitted\nfields stay as-is. Use this " +
      "when a stored fact is outdated, incorrect, or needs refinement.\nFirst use memory_search to find the " +
      "fact_id, then update it.",
    args: {
      fact_id: "Fact ID from memory_search results (required).",
      content: "New fact text (unchanged if omitted).",
      category: "New category (unchanged if omitted).",
      confidence: "New confidence score 0.0-1.0 (unchanged if omitted)."
    }
  },
  memory_delete: {
    description: "Delete a fact by its ID. Use this when a fact is no longer accurate or relevant. First use\n" +
      "memory_search to find the fact_id, then delete it.",
    args: { fact_id: "Fact ID to delete (from memory_search results)." }
  }
} as const

/** Where Antler's memory_search does otherwise, its words say what it does. */
const ANTLER_SEARCH_ARGS = {
  ...DEERFLOW.memory_search.args,
  query: "Natural language query to match against fact content and category. Case-insensitive; a fact holding any " +
    "of its words matches, those holding more first.",
  limit: "Maximum results to return (default 10), 1 to 50."
}

const toolsSeen = Effect.gen(function*() {
  const home = tempDir("antler-memtools-")
  const context = yield* Layer.build(FileMemory.layer().pipe(
    Layer.provide(Layer.succeed(ModelService, ScriptedModel.make([]))),
    Layer.provide(MemoryThreadStore.layer()),
    Layer.provide(ConfigFile.layerFromObject({ memory: { mode: "tool" } }, { home })),
    Layer.provide(NodeFileSystem.layer)
  ))
  const memory = context.unsafeMap.get(Memory.key) as Memory["Type"]
  const outcome = yield* H.run({ input: "hi", script: ["hello"], middlewares: () => [MemoryMW.layer({ memory })] })
  return new Map((outcome.requests[0]!.tools ?? []).map((t: ToolDefinition) => [t.name, t]))
})

const argDescriptions = (tool: ToolDefinition) =>
  Object.fromEntries(
    Object.entries((tool.parameters as { properties: Record<string, { description?: string }> }).properties)
      .map(([name, schema]) => [name, schema.description])
  )

describe("the memory tools the model reads (tool mode)", () => {
  it.scoped("have DeerFlow's descriptions and argument descriptions", () =>
    Effect.gen(function*() {
      const tools = yield* toolsSeen
      assert.deepStrictEqual([...tools.keys()].filter((n) => n.startsWith("memory_")).sort(), [
        "memory_add",
        "memory_delete",
        "memory_search",
        "memory_update"
      ])
      for (const name of ["memory_add", "memory_update", "memory_delete", "memory_search"] as const) {
        const tool = tools.get(name)!
        assert.strictEqual(tool.description, DEERFLOW[name].description, name)
        assert.deepStrictEqual(
          argDescriptions(tool),
          name === "memory_search" ? ANTLER_SEARCH_ARGS : DEERFLOW[name].args,
          name
        )
      }
    }).pipe(H.withStore))
})
