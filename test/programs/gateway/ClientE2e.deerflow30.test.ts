/**
 * DeerFlow's `test_client_e2e.py`: its embedded client (`DeerFlowClient`) end to end, each case through what an
 * Antler caller has for it: the gateway DeerFlow's client wraps (`stream` and `chat` are a thread's runs, the
 * client's uploads, artifacts, skills, models, MCP and memory calls are the gateway's routes, a `ValueError` or
 * `FileNotFoundError` is a 4xx naming what was wrong), over the real openai client against a SCRIPTED model, with a
 * skills folder and `extensions_config.json` of the test's own. The client's agent cache (`_agent`,
 * `_agent_config_key`, `reset_agent`) and its local-path checks (a file or folder on the caller's disk) are Python
 * machinery with no counterpart: an Antler caller sends bytes, as DeerFlow's app does.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { textForm } from "../../support/uploadForms.js"
import { as } from "../../support/requests.js"
import { zipOf } from "../../support/zip.js"
import * as Support from "./support.js"

const MODEL = "e2e-model"

/** The model: writes or reads what the question asks for through a tool, then answers; otherwise `pong`. */
const script = (body: ChatRequestBody) => {
  const last = body.messages[body.messages.length - 1]!
  if (last.role === "tool") return `Tool said: ${String(last.content).slice(0, 200)}`
  const asked = Support.lastUserText(body)
  if (asked.includes("write the result")) {
    return {
      toolCalls: [
        {
          name: "write_file",
          arguments: { description: "r", path: "/mnt/user-data/outputs/result.txt", content: "hello artifact" }
        },
        {
          name: "write_file",
          arguments: { description: "c", path: "/mnt/user-data/outputs/charts/data.json", content: "{\"x\": 1}" }
        }
      ]
    }
  }
  if (asked.includes("read_file")) {
    return {
      toolCalls: [{
        name: "read_file",
        arguments: { description: "read", path: "/mnt/user-data/workspace/nonexistent.txt" }
      }]
    }
  }
  return "pong"
}

let gateway: Support.TestGateway
let dir: string
const extensions = () => Path.join(dir, "extensions_config.json")
const skillsRoot = () => Path.join(dir, "skills")

beforeAll(async () => {
  dir = Support.tempDir("antler-client-e2e-")
  Fs.mkdirSync(Path.join(skillsRoot(), "public", "deep-research"), { recursive: true })
  Fs.writeFileSync(
    Path.join(skillsRoot(), "public", "deep-research", "SKILL.md"),
    "---\nname: deep-research\ndescription: Researches a question in depth\n---\n# Deep research\n"
  )
  Fs.mkdirSync(Path.join(skillsRoot(), "custom"), { recursive: true })
  Fs.writeFileSync(extensions(), JSON.stringify({ mcpServers: {}, skills: {}, middlewares: ["pkg:Middleware"] }))
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: (url) => ({
      models: [{
        name: MODEL,
        display_name: "E2E Test Model",
        model: "scripted",
        base_url: url,
        api_key: "sk-test-scripted-key-000000",
        supports_thinking: false,
        supports_vision: false
      }],
      // the middlewares of config.yaml, none: the file's `middlewares` are kept, never loaded
      extensions: { middlewares: [] }
    })
  })
})
afterAll(() => gateway?.stop())

const call = as(() => gateway)

/** A thread's streamed run of `content`: its SSE events, in order. */
const stream = async (threadId: string, content: string, more: Record<string, unknown> = {}) => {
  await call("POST", "/threads", { thread_id: threadId, if_exists: "do_nothing" })
  const response = await fetch(`${gateway.url}/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: Support.userInput(content),
      stream_mode: ["values", "messages-tuple"],
      ...more
    })
  })
  assert.strictEqual(response.status, 200, await response.clone().text())
  return (await Support.readSse(response)).events
}

/** The messages of a stream's `messages` events (LangGraph's `messages-tuple` mode: `[message, metadata]`). */
const tupleMessages = (events: ReadonlyArray<Support.SseEvent>): ReadonlyArray<any> =>
  events.filter((e) => e.event === "messages").map((e) => (e.data as [any, unknown])[0])

/** What the last answer of a waited run says (DeerFlow's `chat()`). */
const chat = async (threadId: string, content: string) => {
  await call("POST", "/threads", { thread_id: threadId, if_exists: "do_nothing" })
  const run = await call("POST", `/threads/${threadId}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(content)
  })
  assert.strictEqual(run.status, 200, run.text)
  const ai = Support.visible(run.json().messages).filter((m: any) => m.type === "ai")
  return ai[ai.length - 1]?.content as string
}

let threads = 0
const freshThread = () => `e2e-${++threads}-${Date.now()}`

const upload = (threadId: string, files: ReadonlyArray<readonly [string, string]>) =>
  call("POST", `/api/threads/${threadId}/uploads`, textForm(files))

describe("test_client_e2e.py TestBasicChat", () => {
  it("test_basic_chat: a waited run answers non-empty text", async () => {
    assert.strictEqual(await chat(freshThread(), "Say exactly: pong"), "pong")
  })

  it("test_stream_event_sequence: messages and values events, end last", async () => {
    const types = (await stream(freshThread(), "Say hi")).map((e) => e.event)
    assert.strictEqual(types[types.length - 1], "end", types.join())
    assert.include(types, "messages")
    assert.include(types, "values")
  })

  it("test_stream_event_data_format: an answer's message has content and id; values have messages and artifacts", async () => {
    const events = await stream(freshThread(), "Say hello")
    const ai = tupleMessages(events).filter((m) => m.type === "ai" || m.type === "AIMessageChunk")
    assert.isAbove(ai.length, 0)
    for (const message of ai) {
      assert.property(message, "content")
      assert.isString(message.id)
    }
    const values = events.filter((e) => e.event === "values").map((e) => e.data as any)
    assert.isAbove(values.length, 0)
    for (const value of values) {
      assert.isArray(value.messages)
      assert.isArray(value.artifacts)
    }
  })

  it("test_multi_turn_stateless: two stateless runs know nothing of each other", async () => {
    const first = await call("POST", "/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("Remember the number 42")
    })
    assert.strictEqual(first.status, 200, first.text)
    const before = gateway.scripted.requests.length
    const second = await call("POST", "/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("What number did I say?")
    })
    assert.strictEqual(second.status, 200, second.text)
    const asked = JSON.stringify(gateway.scripted.requests.slice(before).map((r) => r.messages))
    assert.include(asked, "What number did I say?")
    assert.notInclude(asked, "Remember the number 42")
  })
})

describe("test_client_e2e.py TestToolCallFlow", () => {
  it("test_tool_call_produces_events / test_tool_call_event_structure: the call (name, args, id), then its result", async () => {
    const events = await stream(freshThread(), "Use the read_file tool to read nonexistent.txt")
    assert.strictEqual(events[events.length - 1]!.event, "end")
    const messages = tupleMessages(events)
    const calls = messages.filter((m) => (m.tool_calls ?? []).length > 0)
    assert.isAbove(calls.length, 0, JSON.stringify(messages))
    const call = calls[calls.length - 1].tool_calls[0]
    assert.strictEqual(call.name, "read_file")
    assert.strictEqual(call.args.path, "/mnt/user-data/workspace/nonexistent.txt")
    assert.isString(call.id)
    const results = messages.filter((m) => m.type === "tool")
    assert.strictEqual(results.length, 1, JSON.stringify(messages))
    assert.strictEqual(results[0].tool_call_id, call.id)
  })
})

describe("test_client_e2e.py TestFileUploadIntegration", () => {
  it("test_upload_files: the file is described and stored in the thread's uploads", async () => {
    const threadId = freshThread()
    const answer = await upload(threadId, [["readme.txt", "Hello world"]])
    assert.strictEqual(answer.status, 200, answer.text)
    const body = answer.json()
    assert.strictEqual(body.success, true)
    assert.deepStrictEqual(body.files.map((f: any) => f.filename), ["readme.txt"])
    const stored = await call("GET", `/api/threads/${threadId}/artifacts/mnt/user-data/uploads/readme.txt`)
    assert.deepStrictEqual([stored.status, stored.text], [200, "Hello world"])
  })

  it("test_upload_duplicate_rename: a second file of one name is data_1.txt", async () => {
    const threadId = freshThread()
    const answer = await upload(threadId, [["data.txt", "content A"], ["data.txt", "content B"]])
    assert.strictEqual(answer.status, 200, answer.text)
    assert.strictEqual(answer.json().success, true)
    assert.sameMembers(answer.json().files.map((f: any) => f.filename), ["data.txt", "data_1.txt"])
    const second = await call("GET", `/api/threads/${threadId}/artifacts/mnt/user-data/uploads/data_1.txt`)
    assert.strictEqual(second.text, "content B")
  })

  it("test_upload_list_and_delete: upload, list, delete, list", async () => {
    const threadId = freshThread()
    assert.strictEqual((await upload(threadId, [["lifecycle.txt", "lifecycle test"]])).status, 200)
    const listed = (await call("GET", `/api/threads/${threadId}/uploads/list`)).json()
    assert.strictEqual(listed.count, 1)
    assert.strictEqual(listed.files[0].filename, "lifecycle.txt")
    const deleted = await call("DELETE", `/api/threads/${threadId}/uploads/lifecycle.txt`)
    assert.strictEqual(deleted.status, 200, deleted.text)
    assert.strictEqual(deleted.json().success, true)
    assert.strictEqual((await call("GET", `/api/threads/${threadId}/uploads/list`)).json().count, 0)
  })

  it("test_upload_then_chat: the model is told of the file the message names", async () => {
    const threadId = freshThread()
    assert.strictEqual((await upload(threadId, [["notes.txt", "The secret code is 7749."]])).status, 200)
    const before = gateway.scripted.requests.length
    // the file named on the message, as DeerFlow's app sends it (`additional_kwargs.files`)
    const run = await call("POST", `/threads/${threadId}/runs/wait`, {
      assistant_id: "lead_agent",
      input: {
        messages: [{
          role: "user",
          content: "What files are available?",
          additional_kwargs: { files: [{ filename: "notes.txt" }] }
        }]
      }
    })
    assert.strictEqual(run.status, 200, run.text)
    const asked = JSON.stringify(gateway.scripted.requests[before]!.messages)
    assert.include(asked, "<current_uploads>")
    assert.include(asked, "/mnt/user-data/uploads/notes.txt")
  })
})

describe("test_client_e2e.py TestLifecycleAndConfig", () => {
  it("test_plan_mode_config_key: is_plan_mode is the run's own, write_todos offered with it only", async () => {
    const offered = async (planMode: boolean) => {
      const before = gateway.scripted.requests.length
      await stream(freshThread(), "hi", { context: { is_plan_mode: planMode } })
      return (gateway.scripted.requests[before]!.tools ?? []).map((t: any) => t.function.name)
    }
    assert.notInclude(await offered(false), "write_todos")
    assert.include(await offered(true), "write_todos")
  })
})

describe("test_client_e2e.py TestMiddlewareChain", () => {
  it("test_thread_data_paths_in_state / test_stream_completes_without_middleware_errors", async () => {
    const threadId = freshThread()
    const events = await stream(threadId, "What is 1+1?")
    assert.strictEqual(events[events.length - 1]!.event, "end")
    assert.notInclude(events.map((e) => e.event), "error")
    assert.isAbove(tupleMessages(events).filter((m) => m.type === "ai" || m.type === "AIMessageChunk").length, 0)
    const values = events.filter((e) => e.event === "values").map((e) => e.data as any)
    assert.isAbove(values.length, 0)
    const run = (await call("GET", `/threads/${threadId}/runs`)).json()
    assert.deepStrictEqual(run.map((r: any) => r.status), ["success"])
  })
})

describe("test_client_e2e.py TestErrorAndBoundary", () => {
  it("test_delete_nonexistent_upload_raises: 404 naming the file", async () => {
    const threadId = freshThread()
    assert.strictEqual((await upload(threadId, [["kept.txt", "kept"]])).status, 200)
    const deleted = await call("DELETE", `/api/threads/${threadId}/uploads/ghost.txt`)
    assert.strictEqual(deleted.status, 404, deleted.text)
    assert.include(deleted.json().detail, "ghost.txt")
  })

  it("test_artifact_path_traversal_blocked: a path outside /mnt/user-data is refused", async () => {
    const threadId = freshThread()
    await call("POST", "/threads", { thread_id: threadId })
    const answer = await fetch(`${gateway.url}/api/threads/${threadId}/artifacts/..%2F..%2Fetc%2Fpasswd`)
    assert.include([400, 403, 404], answer.status)
    assert.notInclude(await answer.text(), "root:")
  })

  it("test_empty_message_still_gets_response: a blank message's stream ends with end", async () => {
    const events = await stream(freshThread(), " ")
    assert.strictEqual(events[events.length - 1]!.event, "end", JSON.stringify(events.map((e) => e.event)))
  })
})

describe("test_client_e2e.py TestArtifactAccess", () => {
  let threadId: string
  beforeAll(async () => {
    threadId = freshThread()
    assert.include(await chat(threadId, "write the result"), "Tool said")
  })

  it("test_get_artifact_happy_path: the output's bytes, a text type", async () => {
    const answer = await fetch(`${gateway.url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/result.txt`)
    assert.strictEqual(answer.status, 200)
    assert.include(answer.headers.get("content-type") ?? "", "text")
    assert.strictEqual(await answer.text(), "hello artifact")
  })

  it("test_get_artifact_nested_path: an output in a folder, a JSON type", async () => {
    const path = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/charts/data.json`
    const answer = await fetch(`${gateway.url}${path}`)
    assert.strictEqual(answer.status, 200)
    assert.include(answer.headers.get("content-type") ?? "", "json")
    assert.include(await answer.text(), "\"x\"")
  })

  it("test_get_artifact_nonexistent_raises: 404", async () => {
    const answer = await call("GET", `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/ghost.txt`)
    assert.strictEqual(answer.status, 404)
  })

  it("test_get_artifact_traversal_within_prefix_blocked: outputs/../../etc/passwd is refused", async () => {
    const path = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/..%2F..%2F..%2F..%2Fetc%2Fpasswd`
    const answer = await fetch(`${gateway.url}${path}`)
    assert.include([400, 403, 404], answer.status)
    assert.notInclude(await answer.text(), "root:")
  })
})

describe("test_client_e2e.py TestSkillInstallation", () => {
  const skillMd = (name: string) => `---\nname: ${name}\ndescription: E2E test skill\n---\n\nTest content.\n`
  const install = async (threadId: string, name: string, bytes: Uint8Array) => {
    const form = new FormData()
    form.append("files", new Blob([bytes]), name)
    assert.strictEqual((await call("POST", `/api/threads/${threadId}/uploads`, form)).status, 200)
    return call("POST", "/api/skills/install", { thread_id: threadId, path: `mnt/user-data/uploads/${name}` })
  }

  it("test_install_skill_success / test_install_skill_duplicate_rejected", async () => {
    const threadId = freshThread()
    const archive = await zipOf({ "test-e2e-skill/SKILL.md": skillMd("test-e2e-skill") })
    const installed = await install(threadId, "test-e2e-skill.skill", archive)
    assert.strictEqual(installed.status, 200, installed.text)
    assert.strictEqual(installed.json().success, true)
    assert.strictEqual(installed.json().skill_name, "test-e2e-skill")
    assert.isTrue(Fs.existsSync(Path.join(skillsRoot(), "custom", "test-e2e-skill", "SKILL.md")))
    const again = await call("POST", "/api/skills/install", {
      thread_id: threadId,
      path: "mnt/user-data/uploads/test-e2e-skill.skill"
    })
    assert.strictEqual(again.status, 409, again.text)
    assert.include(again.json().detail, "already exists")
  })

  it("test_install_skill_invalid_extension: not a .skill file", async () => {
    const answer = await install(freshThread(), "not_a_skill.zip", new Uint8Array([0x50, 0x4b, 3, 4]))
    assert.strictEqual(answer.status, 400, answer.text)
    assert.include(answer.json().detail, ".skill extension")
  })

  it("test_install_skill_missing_frontmatter: Invalid skill", async () => {
    const archive = await zipOf({ "bad-skill/SKILL.md": "No frontmatter here." })
    const answer = await install(freshThread(), "bad-skill.skill", archive)
    assert.strictEqual(answer.status, 400, answer.text)
    assert.include(answer.json().detail, "Invalid skill")
    assert.isFalse(Fs.existsSync(Path.join(skillsRoot(), "custom", "bad-skill")))
  })

  it("test_install_skill_nonexistent_file: 404 Skill file not found", async () => {
    const threadId = freshThread()
    await call("POST", "/threads", { thread_id: threadId })
    const answer = await call("POST", "/api/skills/install", {
      thread_id: threadId,
      path: "mnt/user-data/uploads/nonexistent.skill"
    })
    assert.strictEqual(answer.status, 404, answer.text)
    assert.strictEqual(answer.json().detail, "Skill file not found: /mnt/user-data/uploads/nonexistent.skill")
  })
})

describe("test_client_e2e.py TestConfigManagement", () => {
  it("test_list_models_returns_injected_config / test_get_model_found / test_get_model_not_found", async () => {
    const models = (await call("GET", "/api/models")).json().models
    assert.deepStrictEqual(models.map((m: any) => [m.name, m.display_name]), [[MODEL, "E2E Test Model"]])
    const model = await call("GET", `/api/models/${MODEL}`)
    assert.strictEqual(model.status, 200)
    assert.strictEqual(model.json().name, MODEL)
    assert.strictEqual(model.json().supports_thinking, false)
    assert.strictEqual((await call("GET", "/api/models/nonexistent-model")).status, 404)
  })

  it("test_list_skills_returns_list / test_get_skill_found / test_get_skill_not_found", async () => {
    const skills = (await call("GET", "/api/skills")).json().skills
    assert.include(skills.map((s: any) => s.name), "deep-research")
    const skill = (await call("GET", "/api/skills/deep-research")).json()
    assert.strictEqual(skill.name, "deep-research")
    assert.strictEqual(skill.description, "Researches a question in depth")
    assert.strictEqual(skill.enabled, true)
    assert.strictEqual((await call("GET", "/api/skills/nonexistent-skill-xyz")).status, 404)
  })

  it("test_get_mcp_config_returns_dict / test_update_mcp_config_writes_and_invalidates", async () => {
    const shown = await call("GET", "/api/mcp/config")
    assert.strictEqual(shown.status, 200, shown.text)
    assert.deepStrictEqual(shown.json().mcp_servers, {})
    const put = await call("PUT", "/api/mcp/config", {
      mcp_servers: { "test-server": { enabled: false, type: "stdio", command: "npx", args: ["some-server"] } }
    })
    assert.strictEqual(put.status, 200, put.text)
    assert.property(put.json().mcp_servers, "test-server")
    const written = JSON.parse(Fs.readFileSync(extensions(), "utf8"))
    assert.property(written.mcpServers, "test-server")
    assert.deepStrictEqual(written.middlewares, ["pkg:Middleware"])
  })

  it("test_update_skill_writes_and_invalidates: the switch is written, the next run has the skill disabled", async () => {
    const updated = await call("PUT", "/api/skills/deep-research", { enabled: false })
    assert.strictEqual(updated.status, 200, updated.text)
    assert.strictEqual(updated.json().name, "deep-research")
    assert.strictEqual(updated.json().enabled, false)
    const written = JSON.parse(Fs.readFileSync(extensions(), "utf8"))
    assert.strictEqual(written.skills["deep-research"].enabled, false)
    assert.deepStrictEqual(written.middlewares, ["pkg:Middleware"])
    const before = gateway.scripted.requests.length
    await chat(freshThread(), "hi")
    const system = String(gateway.scripted.requests[before]!.messages[0]!.content)
    assert.match(system, /<disabled_skills>[^<]*- deep-research \(public\)[^<]*<\/disabled_skills>/)
    assert.strictEqual((await call("PUT", "/api/skills/deep-research", { enabled: true })).status, 200)
  })

  it("test_update_skill_nonexistent_raises: 404 not found", async () => {
    const answer = await call("PUT", "/api/skills/nonexistent-skill-xyz", { enabled: true })
    assert.strictEqual(answer.status, 404, answer.text)
    assert.include(answer.json().detail, "not found")
  })
})

describe("test_client_e2e.py TestMemoryAccess", () => {
  it("test_get_memory_returns_dict / test_reload_memory_returns_dict", async () => {
    const memory = await call("GET", "/api/memory")
    assert.strictEqual(memory.status, 200, memory.text)
    assert.isArray(memory.json().facts)
    const reloaded = await call("POST", "/api/memory/reload")
    assert.strictEqual(reloaded.status, 200, reloaded.text)
    assert.deepStrictEqual(reloaded.json().facts, memory.json().facts)
  })

  it("test_get_memory_config_fields / test_get_memory_status_combines_config_and_data", async () => {
    const config = (await call("GET", "/api/memory/config")).json()
    for (const field of ["enabled", "injection_enabled", "manager_class", "backend_config", "mode"]) {
      assert.property(config, field)
    }
    const status = (await call("GET", "/api/memory/status")).json()
    assert.deepStrictEqual(status.config, config)
    assert.isArray(status.data.facts)
  })
})
