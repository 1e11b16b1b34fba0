/**
 * What the model reads about delegation besides the lead prompt is DeerFlow's word for word: the `task` tool's
 * description and parameter descriptions (DeerFlow's docstring as LangChain's `@tool(parse_docstring=True)` gives it
 * to the model) and the built-in subagents' system prompts and descriptions. The fixtures are rendered from
 * DeerFlow's source by test/fixtures/deerflow/prompts/render_subagent_texts.py. Checked where the model reads them:
 * the requests the real `openai` client sends to the loopback scripted server.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import * as Subagents from "../../src/programs/Subagents.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const fixture = (name: string) => Fs.readFileSync(Path.join(fixtures, name), "utf8")

const GP_PROMPT = fixture("subagent_general_purpose.system_prompt.txt")
const BASH_PROMPT = fixture("subagent_bash_agent.system_prompt.txt")

interface WireTool {
  readonly function: {
    readonly name: string
    readonly description: string
    readonly parameters: { readonly properties: Record<string, { readonly description?: string }> }
  }
}

const systemOf = (body: ScriptedChatServer.ChatRequestBody) => String(body.messages[0]?.content ?? "")

describe("SubagentTexts: DeerFlow's task tool and built-in subagents, as the model reads them", () => {
  it.scoped("the task tool's description and parameters, each built-in subagent's system prompt and description", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start((body) => {
        const system = systemOf(body)
        if (system === GP_PROMPT || system === BASH_PROMPT) return "Subtask done."
        if (body.messages.some((m) => m.role === "tool")) return "All done."
        return {
          toolCalls: [
            {
              id: "call-gp",
              name: "task",
              arguments: { description: "Look around", prompt: "List the workspace.", subagent_type: "general-purpose" }
            },
            {
              id: "call-bash",
              name: "task",
              arguments: { description: "Run a command", prompt: "Run `echo hi`.", subagent_type: "bash" }
            }
          ]
        }
      })
      const home = tempDir("antler-fid25b-task-")
      const skills = Path.join(home, "no-skills")
      Fs.mkdirSync(skills)
      const app = yield* ConfigFile.fromObject({
        models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-fid25b" }],
        memory: { enabled: false },
        skills: { path: skills },
        sandbox: { allow_host_bash: true }
      }, { home })
      const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
      const context = yield* Layer.build(App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer)))
      const factory = Context.get(context, Factory.AgentFactory)
      const events = yield* Stream.runCollect(factory.run({
        threadId: "fid25b-task",
        prompt: "Look around and run a command",
        settings: { model_name: "scripted", subagent_enabled: true }
      }))
      assert.deepInclude(Array.from(events).at(-1), { type: "run_end", status: "success" })

      // the lead agent's task tool
      const task = (server.requests[0]!.tools as ReadonlyArray<WireTool>).find((t) => t.function.name === "task")!
      assert.strictEqual(task.function.description, fixture("task_description.txt"))
      const args = JSON.parse(fixture("task_args.json")) as Record<string, string>
      for (const name of ["description", "prompt", "subagent_type"]) {
        assert.strictEqual(task.function.parameters.properties[name]?.description, args[name], name)
      }

      // each subagent's system message is its DeerFlow prompt (no skills, no deferred tools: nothing appended)
      const systems = server.requests.map(systemOf)
      assert.isTrue(systems.includes(GP_PROMPT), "the general-purpose subagent got DeerFlow's prompt")
      assert.isTrue(systems.includes(BASH_PROMPT), "the bash subagent got DeerFlow's prompt")
      const gp = server.requests.find((r) => systemOf(r) === GP_PROMPT)!
      assert.isTrue(gp.messages.some((m) => m.role === "user" && String(m.content).includes("List the workspace.")))

      // and their descriptions
      const registry = Subagents.registry(app.config, { bash: true })
      assert.strictEqual(
        registry.get("general-purpose")?.description,
        fixture("subagent_general_purpose.description.txt")
      )
      assert.strictEqual(registry.get("bash")?.description, fixture("subagent_bash_agent.description.txt"))
    }))

})
