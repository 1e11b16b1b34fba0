/**
 * ACP agents (`acp_agents`, `invoke_acp_agent`) through the whole lead chain, as an app runs them: the factory
 * over the real `openai` client talking to the scripted Chat Completions server, the local sandbox (bubblewrap
 * where installed), and a small ACP agent on the SDK's agent side (test/fixtures/acp-agent.mjs) started by the
 * tool as a child process over stdio.
 *
 * - The model calls the agent; the agent writes a file in the thread's ACP workspace through the client and
 *   answers; the model sees the answer (no thoughts, secrets redacted, host paths masked, Antler's environment
 *   not passed on); read_file reads the file at /mnt/acp-workspace; write_file and bash cannot write there.
 * - An agent that crashes, one that hangs (stopped at its timeout), a missing command and an unknown agent
 *   each end as a readable tool error, and the run ends normally.
 * - The prompt section and the tool are there only when acp_agents are configured.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Factory from "../../src/programs/Factory.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { processAlive } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import * as Bwrap from "../support/bwrap.js"
import { tempDirs } from "../support/fixtures.js"
import { toolNames } from "../support/modelRequests.js"

const tempDir = tempDirs()
const SLOW = 120_000
const AGENT = fileURLToPath(new URL("../fixtures/acp-agent.mjs", import.meta.url))
const SECRET = "acp-secret-value-0123456789"
const bwrapInstalled = await Bwrap.installed()

/** An `acp_agents` entry running the test agent in `mode`. */
const testAgent = (mode: string, extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [AGENT, mode],
  description: `The test agent (${mode})`,
  ...extra
})

const app = (script: ScriptedChatServer.Script, config: Record<string, unknown>) =>
  Effect.gen(function*() {
    const home = tempDir("antler-acp-")
    const chat = yield* ScriptedChatServer.start(script)
    const models = [Schema.decodeUnknownSync(ModelConfig)({ name: "main", model: "scripted", base_url: chat.url, api_key: "sk-test" })]
    const layer = ConfigFile.layerFromObject({ models: [{ name: "main", model: "scripted", base_url: chat.url }], ...config }, {
      home
    })
    const context = yield* Layer.build(
      Factory.layer({ models }).pipe(
        Layer.provideMerge(OpenAiModel.layerFromConfig(models)),
        Layer.provideMerge(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
        Layer.provideMerge(layer),
        Layer.provide(NodeFileSystem.layer)
      )
    )
    return { chat, home, factory: Context.get(context, Factory.AgentFactory) }
  })

const turn = (factory: Factory.Service, threadId: string, prompt: string) =>
  Effect.map(Stream.runCollect(factory.run({ threadId, prompt, settings: {} })), Chunk.toReadonlyArray)

/** The tool results of a run, by call id. */
const toolResults = (events: ReadonlyArray<RunEvent>) =>
  new Map(events.flatMap((e) =>
    e.type === "message" && e.message.type === "tool"
      ? [[e.message.tool_call_id, { text: M.contentText(e.message.content), status: e.message.status }] as const]
      : []
  ))

const systemOf = (body: ScriptedChatServer.ChatRequestBody) => String(body.messages[0]!.content)

const workspaceOf = (home: string, threadId: string) => Path.join(home, "users", "default", "threads", threadId, "acp-workspace")

describe("invoke_acp_agent through the lead chain (a real ACP agent over stdio)", () => {
  it.scopedLive("the agent writes a file in its workspace and answers; the lead reads it but cannot write there", () =>
    Effect.gen(function*() {
      process.env.ANTLER_LEAK_CANARY = "antler-environment-must-not-reach-the-agent"
      const { chat, factory, home } = yield* app([
        { toolCalls: [{ id: "call_acp", name: "invoke_acp_agent", arguments: { agent: "coder", prompt: "write a greeting" } }] },
        {
          toolCalls: [
            { id: "call_read", name: "read_file", arguments: { description: "read", path: "/mnt/acp-workspace/hello.txt" } },
            {
              id: "call_write",
              name: "write_file",
              arguments: { description: "write", path: "/mnt/acp-workspace/evil.txt", content: "x" }
            }
          ]
        },
        ...(bwrapInstalled
          ? [{
            toolCalls: [{
              id: "call_bash",
              name: "bash",
              arguments: {
                description: "copy",
                command: "echo x > /mnt/acp-workspace/evil2.txt; " +
                  "cp /mnt/acp-workspace/hello.txt /mnt/user-data/outputs/hello.txt && echo copied"
              }
            }]
          }]
          : []),
        "The agent wrote hello.txt."
      ], { acp_agents: { coder: testAgent("write", { env: { ACP_TEST_SECRET: SECRET }, model: "test-model" }) } })
      const events = yield* turn(factory, "t-acp", "Have the coder write a greeting.")
      delete process.env.ANTLER_LEAK_CANARY
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })

      // the first request offers the tool, its description names the agent, the prompt has the ACP section
      const first = chat.requests[0]!
      assert.include(toolNames(first), "invoke_acp_agent")
      const tool = (first.tools as ReadonlyArray<any>).find((t) => t.function.name === "invoke_acp_agent")
      assert.include(tool.function.description, "- coder: The test agent (write)")
      assert.deepStrictEqual(Object.keys(tool.function.parameters.properties).sort(), ["agent", "prompt"])
      assert.include(systemOf(first), "ACP Agent Tasks (invoke_acp_agent)")
      assert.include(systemOf(first), "/mnt/acp-workspace")

      const results = toolResults(events)
      const answer = results.get("call_acp")!
      assert.strictEqual(answer.status, "success")
      assert.include(answer.text, `Wrote hello.txt (read back: "made by the ACP agent for: write a greeting\\n")`)
      assert.notInclude(answer.text, "secret reasoning", "thoughts are not part of the answer")
      assert.include(answer.text, "Escape: refused")
      assert.include(answer.text, "Outside: refused")
      assert.include(answer.text, "Etc: refused")
      assert.include(answer.text, "Permission: cancelled", "permissions are refused unless auto_approve_permissions")
      assert.include(answer.text, "Model: test-model")
      assert.include(answer.text, "Cwd: /mnt/acp-workspace.", "the workspace's host path is masked")
      assert.notInclude(answer.text, home)
      assert.include(answer.text, "Secret: [redacted]")
      assert.notInclude(answer.text, SECRET)
      assert.include(answer.text, "Leaked: (none)", "Antler's own environment is not passed on")
      // the model sees the answer in its next request
      assert.include(JSON.stringify(chat.requests[1]!.messages), "Wrote hello.txt")

      // the file is in the thread's ACP workspace on the host, and nowhere outside it
      const workspace = workspaceOf(home, "t-acp")
      assert.strictEqual(Fs.readFileSync(Path.join(workspace, "hello.txt"), "utf8"), "made by the ACP agent for: write a greeting\n")
      assert.isFalse(Fs.existsSync(Path.join(Path.dirname(workspace), "escape.txt")))

      assert.include(results.get("call_read")!.text, "made by the ACP agent for: write a greeting")
      const write = results.get("call_write")!
      assert.strictEqual(write.status, "error")
      assert.match(write.text, /^Error: \/mnt\/acp-workspace\/evil\.txt is read-only/)
      assert.isFalse(Fs.existsSync(Path.join(workspace, "evil.txt")))
      if (bwrapInstalled) {
        const bash = results.get("call_bash")!.text
        assert.match(bash, /Read-only file system/)
        assert.include(bash, "copied", "files can be copied out of the workspace")
        assert.isFalse(Fs.existsSync(Path.join(workspace, "evil2.txt")))
        const outputs = Path.join(home, "users", "default", "threads", "t-acp", "user-data", "outputs", "hello.txt")
        assert.isTrue(Fs.existsSync(outputs))
      }
    }), SLOW)

  it.scopedLive("permission requests are approved with auto_approve_permissions (allow_once first)", () =>
    Effect.gen(function*() {
      const { factory } = yield* app([
        { toolCalls: [{ id: "call_acp", name: "invoke_acp_agent", arguments: { agent: "coder", prompt: "go" } }] },
        "done"
      ], { acp_agents: { coder: testAgent("write", { auto_approve_permissions: true }) } })
      const events = yield* turn(factory, "t-approve", "go")
      assert.include(toolResults(events).get("call_acp")!.text, "Permission: once.")
    }), SLOW)

  it.scopedLive("a crashing agent, a hanging one, a missing command and an unknown agent are tool errors", () =>
    Effect.gen(function*() {
      const { chat, factory, home } = yield* app([
        {
          toolCalls: [
            { id: "call_crash", name: "invoke_acp_agent", arguments: { agent: "crasher", prompt: "go" } },
            { id: "call_hang", name: "invoke_acp_agent", arguments: { agent: "hanger", prompt: "go" } },
            { id: "call_missing", name: "invoke_acp_agent", arguments: { agent: "missing", prompt: "go" } },
            { id: "call_unknown", name: "invoke_acp_agent", arguments: { agent: "nobody", prompt: "go" } }
          ]
        },
        "They all failed."
      ], {
        acp_agents: {
          crasher: testAgent("crash"),
          hanger: testAgent("hang", { timeout_seconds: 3 }),
          missing: { command: "antler-no-such-acp-agent", description: "not installed" }
        }
      })
      const events = yield* turn(factory, "t-fail", "try them")
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
      assert.lengthOf(chat.requests, 2, "the model got the errors and answered")
      const results = toolResults(events)
      for (const id of ["call_crash", "call_hang", "call_missing", "call_unknown"]) {
        assert.strictEqual(results.get(id)!.status, "error", id)
      }
      assert.strictEqual(
        results.get("call_crash")!.text,
        "Error: ACP agent 'crasher' ended before answering: it exited with code 3 " +
          "(its stderr: test agent: something went badly wrong)"
      )
      assert.match(results.get("call_hang")!.text, /^Error: ACP agent 'hanger' timed out after 3 seconds/)
      assert.include(results.get("call_hang")!.text, "acp_agents.hanger.timeout_seconds")
      assert.match(results.get("call_missing")!.text, /^Error: .*'antler-no-such-acp-agent' was not found on PATH/)
      assert.strictEqual(results.get("call_unknown")!.text, "Error: Unknown agent 'nobody'. Available: crasher, hanger, missing")

      // the hanging agent was stopped
      const pidFile = Path.join(workspaceOf(home, "t-fail"), "pid")
      if (Fs.existsSync(pidFile)) {
        const pid = Number(Fs.readFileSync(pidFile, "utf8"))
        assert.isFalse(processAlive(pid), "the hanging agent was stopped")
      }
    }), SLOW)

  it.scopedLive("without acp_agents there is no tool, no prompt section and no /mnt/acp-workspace", () =>
    Effect.gen(function*() {
      const { chat, factory } = yield* app([
        { toolCalls: [{ id: "call_ls", name: "ls", arguments: { description: "look", path: "/mnt/acp-workspace" } }] },
        "nothing there"
      ], {})
      const events = yield* turn(factory, "t-none", "look")
      const first = chat.requests[0]!
      assert.notInclude(toolNames(first), "invoke_acp_agent")
      assert.notInclude(systemOf(first), "acp")
      assert.match(toolResults(events).get("call_ls")!.text, /^Error: Access denied/)
    }), SLOW)
})
