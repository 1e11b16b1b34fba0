/**
 * Attack round 22 on MCP results, as a hostile MCP server: a tool's `structuredContent` and a durable task's
 * `result` nested deeper than the recursive readers of a value (JSON.stringify, the redactor) can walk. The
 * server writes its JSON-RPC by hand, as a hostile one may, so no library of its own refuses the depth. A plain
 * call must end as a paired, readable error result and the run end; a task must end `failed`, saying why,
 * rather than be polled for ever with nothing said.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { allowNodeServers } from "../../support/mcpTaskServer.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const DEPTH = 50_000

/** A stdio MCP server writing its answers by hand: `deep` and a task whose status answers a deep result. */
const SERVER = `
  import * as Readline from "node:readline"
  const deep = "[".repeat(${DEPTH}) + '"x"' + "]".repeat(${DEPTH})
  const send = (id, result) => process.stdout.write('{"jsonrpc":"2.0","id":' + JSON.stringify(id) + ',"result":' +
    result + '}\\n')
  const object = (properties) => ({ type: "object", properties })
  const tools = [
    { name: "deep", description: "Answers a deep value", inputSchema: object({}) },
    { name: "start_job", description: "Starts a job", inputSchema: object({}) },
    { name: "job_status", description: "A job's status", inputSchema: object({ task_id: { type: "string" } }) },
    { name: "job_cancel", description: "Cancels a job", inputSchema: object({ task_id: { type: "string" } }) }
  ]
  Readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const message = JSON.parse(line)
    if (message.id === undefined) return
    const structured = (text) => '{"content":[],"structuredContent":' + text + '}'
    switch (message.method) {
      case "initialize":
        return send(message.id, JSON.stringify({ protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} }, serverInfo: { name: "deep", version: "1.0.0" } }))
      case "tools/list":
        return send(message.id, JSON.stringify({ tools }))
      case "tools/call":
        switch (message.params.name) {
          case "deep": return send(message.id, structured('{"value":' + deep + '}'))
          case "start_job": return send(message.id, structured('{"task_id":"job-1","status":"running"}'))
          case "job_status":
            return send(message.id, structured('{"task_id":"job-1","status":"completed","result":' + deep + '}'))
          default: return send(message.id, structured('{"task_id":"job-1","status":"cancelled"}'))
        }
      default:
        return send(message.id, "{}")
    }
  })
`

let gateway: TestGateway
allowNodeServers()
const call = Requests.api(() => gateway)

beforeAll(async () => {
  const dir = Support.tempDir("antler-attack22-mcp-")
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
    mcpServers: {
      hostile: {
        type: "stdio",
        command: "node",
        args: ["--input-type=module", "-e", SERVER],
        task_toolsets: [{ name: "Job", submit_tool: "start_job", status_tool: "job_status", cancel_tool: "job_cancel" }]
      }
    }
  }))
  gateway = await Support.start({
    script: (body) => {
      if (body.messages.at(-1)?.role === "tool") return "Done."
      const text = Support.lastUserText(body)
      if (text.includes("DEEP")) return { toolCalls: [{ name: "hostile_deep", arguments: {} }] }
      if (text.includes("JOB")) return { toolCalls: [{ name: "hostile_start_job", arguments: {} }] }
      return "Hello."
    },
    source: Path.join(dir, "config.yaml"),
    config: { gateway: Support.twoUsers, mcp_tasks: { enabled: true, poll_interval_seconds: 1 } }
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
})

const newThread = async () =>
  (await Requests.ok(await call(Support.ALICE, "/threads", { method: "POST", body: {} }))).thread_id as string

/** Runs `prompt` on a new thread: the thread and its messages after the run. */
const run = async (prompt: string) => {
  const threadId = await newThread()
  const answer = await call(Support.ALICE, `/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: prompt }] } }
  })
  assert.strictEqual(answer.status, 200, await answer.clone().text())
  const state = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/state`))
  return { threadId, messages: state.values.messages as Array<any> }
}

describe("a hostile MCP server's deeply nested results", () => {
  it("a plain tool's deep structuredContent is a paired error result the model reads, and the run ends", async () => {
    const { messages } = await run("call DEEP")
    const calls = messages.filter((m) => m.type === "ai").flatMap((m) => m.tool_calls ?? [])
    const results = messages.filter((m) => m.type === "tool")
    assert.lengthOf(calls, 1)
    assert.lengthOf(results, 1)
    assert.strictEqual(results[0].tool_call_id, calls[0].id)
    assert.strictEqual(results[0].status, "error")
    // (held before this round: the defect is the tool's error result, paired, and the run goes on)
    assert.include(String(results[0].content), "Error: Tool 'hostile_deep' failed")
    assert.strictEqual(messages.at(-1).content, "Done.")
  }, SLOW)

  it("a task whose status answers a deep result ends failed, saying why", async () => {
    const { threadId, messages } = await run("start a JOB")
    const started = JSON.parse(String(messages.filter((m) => m.type === "tool").at(-1).content))
    const detail = await eventually(async () => {
      const task = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/mcp-tasks/${started.task_id}`))
      return task.status === "failed" ? task : undefined
    }, "the task failed", { tries: 100, everyMs: 100 })
    assert.include(detail.error, "MCP task tool 'job_status' returned structuredContent nested deeper than 100 levels")
    assert.isNull(detail.result)
  }, SLOW)
})
