/**
 * The tools whose descriptions Antler copies from DeerFlow's `@tool` docstrings are described to the model as
 * LangChain describes them under Python 3.12 (DeerFlow's): the raw docstring, dedented and stripped (so the
 * indentation of the lines after the first stays), or with `parse_docstring=True` the cleaned docstring's blocks
 * before `Args:` joined by a space. The fixture is rendered from DeerFlow's source by
 * test/fixtures/deerflow/prompts/render_tool_descriptions.py; the memory tools' descriptions, also in it, are checked
 * where the model reads them by test/middleware/MemoryTools.memory26.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolContext from "../../src/layers/sandbox/tools/ToolContext.js"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import * as McpTaskTools from "../../src/programs/McpTaskTools.js"
import * as ReviewSkillPackageTool from "../../src/programs/ReviewSkillPackageTool.js"
import * as UploadedFilesTool from "../../src/programs/UploadedFilesTool.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { McpTasks } from "../../src/services/McpTasks.js"
import { SandboxProvider } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const deerflow: Record<string, string> = JSON.parse(
  Fs.readFileSync(Path.join(fixtures, "tool_descriptions.json"), "utf8")
)

// (a description is read without calling the tool: nothing of the task runtime is reached)
const noTasks = new Proxy({}, { get: () => () => Effect.die("not called") }) as McpTasks["Type"]

const described = (tool: Tool.Tool) => Tool.definition(tool).description

describe("tool descriptions copied from DeerFlow's docstrings", () => {
  it("cancel_background_task keeps the indentation Python 3.12 leaves in its docstring", () => {
    assert.strictEqual(described(McpTaskTools.cancelTool(noTasks)), deerflow["cancel_background_task"])
    assert.include(deerflow["cancel_background_task"], "\n\n    If several tasks are active")
    assert.strictEqual(described(McpTaskTools.listTool(noTasks)), deerflow["list_background_tasks"])
  })

  it("tool_search and list_uploaded_files, plain @tool docstrings, keep it too", () => {
    const calc = { name: "mcp_calc", description: "Evaluate arithmetic.", parameters: { type: "object" } }
    const search = DeferredToolFilter.tool([calc], DeferredToolFilter.catalogHash([calc]))
    assert.strictEqual(described(search), deerflow["tool_search"])
    assert.strictEqual(described(UploadedFilesTool.tool("/nowhere")), deerflow["list_uploaded_files"])
  })

  it.effect("review_skill_package, a parse_docstring tool, keeps the line breaks within its paragraph", () =>
    Effect.gen(function*() {
      const base = defaults()
      const app = AppConfigService.of({ config: base, source: undefined, home: tempDir("antler-desc-"), ignored: [] })
      const context = yield* ToolContext.make.pipe(
        Effect.provideService(SandboxProvider, LocalSandbox.make(app, { bwrap: "off" })),
        Effect.provideService(AppConfigService, app)
      )
      assert.strictEqual(described(ReviewSkillPackageTool.tool(context)), deerflow["review_skill_package"])
    }))
})
