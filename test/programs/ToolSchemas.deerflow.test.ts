/**
 * DeerFlow's `test_tool_args_schema_no_pydantic_warning.py`, the parts a model sees: every parameter of every tool
 * the lead agent offers has a description (`test_model_facing_tool_parameters_have_descriptions`), `write_file`'s
 * `append` is described and false by default, and `list_uploaded_files` shows only `include_outline` and
 * `max_results` (no runtime internals). The agents are built by the real factory in the shapes that add tools:
 * vision, plan mode, subagents, a custom agent, the bootstrap agent. (The Pydantic warning
 * itself is Python's; `test_local_bash_tool_loading.py` is ToolAssembly.test's "bash is left out".)
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as CustomAgents from "../../src/programs/CustomAgents.js"
import * as Factory from "../../src/programs/Factory.js"
import type { ToolDefinition } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

type Property = { readonly description?: unknown; readonly default?: unknown }
const properties = (tool: ToolDefinition) =>
  ((tool.parameters as { properties?: Record<string, Property> }).properties ?? {}) as Record<string, Property>

describe("test_tool_args_schema_no_pydantic_warning.py: the tools as the model sees them", () => {
  it.scoped("every tool parameter is described; write_file's append and list_uploaded_files' are DeerFlow's", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-df-schemas-")
      const layer = Factory.layer().pipe(
        Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(() => "ok"))),
        Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({
          models: [{ name: "eyes", use: "langchain_openai:ChatOpenAI", model: "m", supports_vision: true }]
        }, { home })),
        Layer.provide(NodeFileSystem.layer)
      )
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      yield* CustomAgents.save(home, "default", "ada", { config: { description: "Ada" }, soul: "I am Ada." })
      const shapes = [
        { subagent_enabled: true, is_plan_mode: true },
        { agent_name: "ada" },
        { is_bootstrap: true, agent_name: "newbie" }
      ]
      const tools = new Map<string, ToolDefinition>()
      for (const settings of shapes) {
        for (const tool of (yield* factory.agent(yield* factory.resolve(settings))).tools) tools.set(tool.name, tool)
      }
      // the shapes reach the tools DeerFlow's test lists (bash too where commands can run here)
      assert.includeMembers([...tools.keys()], [
        "ls",
        "glob",
        "grep",
        "read_file",
        "write_file",
        "str_replace",
        "list_uploaded_files",
        "present_files",
        "view_image",
        "task",
        "setup_agent",
        "update_agent",
        "ask_clarification",
        "write_todos",
        "review_skill_package"
      ])
      for (const tool of tools.values()) {
        const undescribed = Object.entries(properties(tool))
          .filter(([, schema]) => typeof schema.description !== "string" || schema.description.trim() === "")
          .map(([name]) => name)
        assert.deepStrictEqual(undescribed, [], `${tool.name}: parameters without a description`)
      }
      // append: optional (false unless given), and the tool's description says when to use it
      assert.include(String(properties(tools.get("write_file")!).append!.description), "append")
      assert.notInclude((tools.get("write_file")!.parameters as { required?: Array<string> }).required ?? [], "append")
      assert.include(tools.get("write_file")!.description, "append")
      assert.sameMembers(Object.keys(properties(tools.get("list_uploaded_files")!)), ["include_outline", "max_results"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
