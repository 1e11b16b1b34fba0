/**
 * DeerFlow's durable MCP tasks (mcp/tasks/ordinary.py, mcp_tasks/service.py, tools/builtins/background_tasks_tool.py,
 * routers/mcp_tasks.py; tests test_mcp_task_ordinary_e2e.py, test_background_tasks_tool.py, test_mcp_tasks_router.py)
 * end to end: a real stdio MCP server whose `task_toolsets` entry is a submit/status/cancel contract, the gateway
 * with `mcp_tasks.enabled`, the scripted model calling the tools through the real `openai` client.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"

const SLOW = 120_000
const SECRET = "sk-mcp-task-secret-0123456789"

/** A stdio MCP server with a long-running task contract (its tasks live in its process) and a plain tool. */
const SERVER = reportTaskServer({
  status: `if (task === undefined) {
      return answer({ task_id: args.task_id, status: "failed", error_code: "task_not_found" })
    }
    if (task.topic === "slow" || task.state !== "running") {
      return answer({ task_id: args.task_id, status: task.state })
    }
    if (task.topic === "broken") return answer({ nothing: true })
    const result = task.topic === "big"
      ? "x".repeat(5000)
      : task.topic === "env"
      ? { report: "key " + process.env.SERVICE_API_KEY }
      : { report: "Report on " + task.topic }
    return answer({ task_id: args.task_id, status: "completed", result })`,
  tools: `{ name: "echo", description: "Echoes its text", inputSchema: object({ text: { type: "string" } }) }`,
  other: `return { content: [{ type: "text", text: "echo " + args.text }] }`
})

let gateway: TestGateway
allowNodeServers()
const call = Requests.api(() => gateway)

/** A gateway over the task server, with `mcp_tasks` as given. */
const startWith = (mcp_tasks: Record<string, unknown>): Promise<TestGateway> => {
  const source = writeTaskExtensions(Support.tempDir("antler-mcp-tasks-"), SERVER, { env: { SERVICE_API_KEY: SECRET } })
  return Support.start({
    script: (body) => {
      if (body.messages.at(-1)?.role === "tool") return "Done."
      // (the prompt: the line of the last user message inside the sanitizer's markers)
      const text = Support.lastUserText(body).split("\n").find((line) => line !== "" && !line.startsWith("---")) ?? ""
      const start = /^start (\w+)$/.exec(text)
      if (start !== null) return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: start[1] } }] }
      if (text === "list") return { toolCalls: [{ name: "list_background_tasks", arguments: { active_only: true } }] }
      if (text === "cancel") return { toolCalls: [{ name: "cancel_background_task", arguments: {} }] }
      return "Hello."
    },
    source,
    config: { gateway: Support.twoUsers, mcp_tasks }
  })
}

beforeAll(async () => {
  gateway = await startWith({
    enabled: true,
    poll_interval_seconds: 1,
    max_result_bytes: 1024,
    result_preview_max_chars: 64
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
})

const newThread = async (token: string) =>
  (await Requests.ok(await call(token, "/threads", { method: "POST", body: {} }))).thread_id as string

/**
 * Runs `prompt` on the thread; the text of the last tool message the run added. (Queued behind a run the gateway
 * started to tell of a task that ended, rather than refused.)
 */
const toolAnswer = async (token: string, threadId: string, prompt: string, through = call): Promise<string> => {
  const answer = await through(token, `/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: {
      assistant_id: "lead_agent",
      input: { messages: [{ role: "user", content: prompt }] },
      multitask_strategy: "enqueue"
    }
  })
  assert.strictEqual(answer.status, 200, await answer.clone().text())
  const state = await Requests.ok(await through(token, `/threads/${threadId}/state`))
  const tools = state.values.messages.filter((m: { type: string }) => m.type === "tool")
  return String(tools.at(-1)?.content)
}

const taskOf = (token: string, threadId: string, taskId: string) =>
  call(token, `/threads/${threadId}/mcp-tasks/${taskId}`)

/** The task once its status is `status` (polled in the background by the gateway). */
const ended = (threadId: string, taskId: string, status: string) =>
  eventually(async () => {
    const detail = await Requests.ok(await taskOf(Support.ALICE, threadId, taskId))
    return detail.status === status ? detail : undefined
  }, `task ${taskId} ${status}`, { tries: 200, everyMs: 100 })

describe("durable MCP tasks (mcp_tasks.enabled)", () => {
  it("are a feature; the model gets the submit tool (status and cancel hidden) and the two task tools", async () => {
    assert.isTrue((await Requests.ok(await call(Support.ALICE, "/features"))).mcp_tasks.enabled)
    const threadId = await newThread(Support.ALICE)
    await toolAnswer(Support.ALICE, threadId, "hello")
    const request = gateway.scripted.requests.at(-1)!
    const tools = (request.tools ?? []).map((t: any) => t.function)
    const names = tools.map((t: any) => t.name)
    for (const name of ["tasks_start_report", "tasks_echo", "list_background_tasks", "cancel_background_task"]) {
      assert.include(names, name)
    }
    assert.notInclude(names, "tasks_report_status")
    assert.notInclude(names, "tasks_report_cancel")
    const submit = tools.find((t: any) => t.name === "tasks_start_report")
    assert.include(submit.description, "Writes a report on a topic")
    assert.include(submit.description, "Submitted as durable background task 'Report'")
    assert.deepStrictEqual(submit.parameters.properties, { topic: { type: "string" } })
  }, SLOW)

  it("start in the background: the model gets the task id at once, the result is polled and kept", async () => {
    const threadId = await newThread(Support.ALICE)
    const started = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start otters"))
    assert.match(started.task_id, /^mcp-task-[0-9a-f]{32}$/)
    assert.deepStrictEqual({ ...started, task_id: "" }, {
      task_id: "",
      task_name: "Report",
      status: "submitted",
      message: "Task is running in the background."
    })
    const done = await ended(threadId, started.task_id, "completed")
    assert.deepStrictEqual(done.result, { report: "Report on otters" })
    assert.isFalse(done.result_truncated)
    assert.isString(done.last_polled_at)
    assert.notInclude(JSON.stringify(done), "remote-")
    const listed = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/mcp-tasks?limit=5`))
    assert.deepStrictEqual(listed.map((t: any) => [t.task_id, t.task_name, t.status, t.tracking_degraded]), [
      [started.task_id, "Report", "completed", false]
    ])
  }, SLOW)

  it("keep a preview of a result over max_result_bytes; fail a task whose server breaks the contract", async () => {
    const threadId = await newThread(Support.ALICE)
    const big = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start big"))
    const done = await ended(threadId, big.task_id, "completed")
    assert.isNull(done.result)
    assert.isTrue(done.result_truncated)
    assert.strictEqual(done.result_preview, "x".repeat(64))
    const broken = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start broken"))
    const failed = await ended(threadId, broken.task_id, "failed")
    assert.include(failed.error, "Invalid structuredContent from MCP task tool 'report_status'")
    // (a server's env secret it echoes in a result is not kept)
    const env = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start env"))
    const echoed = await ended(threadId, env.task_id, "completed")
    assert.deepStrictEqual(echoed.result, { report: "key [redacted]" })
  }, SLOW)

  it("are another user's to nobody: bob lists none of alice's, reads and cancels none (404)", async () => {
    const threadId = await newThread(Support.ALICE)
    const started = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start slow"))
    assert.deepStrictEqual(await Requests.ok(await call(Support.BOB, `/threads/${threadId}/mcp-tasks`)), [])
    assert.strictEqual((await taskOf(Support.BOB, threadId, started.task_id)).status, 404)
    const path = `/threads/${threadId}/mcp-tasks/${started.task_id}/cancel`
    const refused = await call(Support.BOB, path, { method: "POST" })
    assert.strictEqual(refused.status, 404)
    // (bob's own thread of another id does not reach it either)
    const own = await newThread(Support.BOB)
    assert.strictEqual((await taskOf(Support.BOB, own, started.task_id)).status, 404)
    // (polled on, never cancelled)
    const still = await ended(threadId, started.task_id, "working")
    assert.isFalse(still.cancel_requested)
    assert.strictEqual(still.cancel_attempt_count, 0)
  }, SLOW)

  it("are listed and cancelled by the model's tools, and cancelled through the endpoint", async () => {
    const threadId = await newThread(Support.ALICE)
    const first = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start slow"))
    const listed = JSON.parse(await toolAnswer(Support.ALICE, threadId, "list"))
    assert.strictEqual(listed.count, 1)
    assert.strictEqual(listed.tasks[0].task_id, first.task_id)
    assert.strictEqual(listed.tasks[0].task_name, "Report")
    assert.isFalse(listed.tasks[0].cancel_requested)

    const cancelled = JSON.parse(await toolAnswer(Support.ALICE, threadId, "cancel"))
    assert.strictEqual(cancelled.task.task_id, first.task_id)
    assert.isTrue(cancelled.task.cancel_requested)
    assert.strictEqual(
      cancelled.message,
      "Cancellation requested. DeerFlow will keep retrying safely if the remote server is temporarily unavailable."
    )
    await ended(threadId, first.task_id, "cancelled")
    const none = JSON.parse(await toolAnswer(Support.ALICE, threadId, "cancel"))
    assert.deepStrictEqual(none, { cancelled: false, message: "No active background task matches this request" })

    const second = JSON.parse(await toolAnswer(Support.ALICE, threadId, "start slow"))
    const asked = await Requests.ok(
      await call(Support.ALICE, `/threads/${threadId}/mcp-tasks/${second.task_id}/cancel`, { method: "POST" })
    )
    assert.isTrue(asked.cancel_requested)
    const gone = await ended(threadId, second.task_id, "cancelled")
    assert.isString(gone.updated_at)
  }, SLOW)
})

describe("durable MCP tasks without the runtime (mcp_tasks.enabled off, DeerFlow's default)", () => {
  it("the gateway refuses to start: task_toolsets are never run as plain calls (DeerFlow's start-up check)", async () => {
    const started = await startWith({}).then((gateway) => gateway.stop().then(() => "started"), String)
    assert.include(started, "GatewayStartError")
    assert.include(started, "MCP task_toolsets are configured, so mcp_tasks.enabled=true is required")
    assert.include(started, "mcpServers 'tasks' configure task_toolsets")
  }, SLOW)
})
