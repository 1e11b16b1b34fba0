/**
 * DeerFlow's long-running MCP tasks under `antler run` (`mcp_tasks.enabled`): a real stdio MCP server process
 * whose `task_toolsets` entry is a submit/status/cancel contract, the CLI as a process, the scripted model called
 * through the real `openai` client. The model's submit call answers at once with a task id; the CLI then waits
 * for the task, polled on its server, and shows how it ended (a line, or a `background_task` JSON object); a
 * later run of the thread has the task tools and sees the task's outcome. Without `mcp_tasks.enabled` the CLI
 * refuses to start, as DeerFlow's gateway does.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as ChildProcess from "node:child_process"
import { antlerCommand, runAntler } from "../support/cli.js"
import { until } from "../support/poll.js"
import { cliHome, reportTaskServer } from "../support/mcpTaskServer.js"

const SLOW = 180_000
const SECRET = "sk-mcp-task-cli-secret-0123456789"

/**
 * A stdio MCP server with a long-running task contract (its tasks live in its process): a report is `running` at
 * its first status call and `completed` at its second; topic `broken` answers a status without its fields, topic
 * `flaky` fails every status call, topic `forever` never ends.
 */
const SERVER = reportTaskServer({
  status: `if (task === undefined) {
      return answer({ task_id: args.task_id, status: "failed", error_code: "task_not_found" })
    }
    if (task.topic === "broken") return answer({ nothing: true })
    if (task.topic === "forever") return answer({ task_id: args.task_id, status: "running" })
    if (task.topic === "flaky") return { isError: true, content: [{ type: "text", text: "backend unavailable" }] }
    if (++task.polls < 2) return answer({ task_id: args.task_id, status: "running" })
    return answer({ task_id: args.task_id, status: "completed",
      result: { report: "Report on " + task.topic + " (key " + process.env.SERVICE_API_KEY + ")" } })`,
  cancel: `if (task !== undefined) task.topic = "cancelled"
    return answer({ task_id: args.task_id, status: "cancelled" })`
})

/** The line of the last user message (inside the sanitizer's markers). */
const lastUserLine = (body: ScriptedChatServer.ChatRequestBody): string => {
  const last = body.messages.filter((m) => m.role === "user").at(-1)
  const content = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "")
  return content.split("\n").find((line) => line !== "" && !line.startsWith("---")) ?? ""
}

/** The model: `start <topic>` submits a report, `list` lists the thread's tasks; after a tool's answer, `Ok.`. */
const model = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn => {
  if (body.messages.at(-1)?.role === "tool") return "Ok."
  const text = lastUserLine(body)
  const start = /start (\w+)/.exec(text)
  if (start !== null) return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: start[1] } }] }
  if (text.includes("list")) return { toolCalls: [{ name: "list_background_tasks", arguments: {} }] }
  return "Hello."
}

/** A data directory whose config has the scripted model at `url`, `mcp_tasks` as given and the task server. */
const home = (url: string, mcpTasks: Record<string, unknown>) => {
  const { dir, env } = cliHome("antler-mcp-tasks-cli-", url, SERVER, {
    config: { mcp_tasks: mcpTasks },
    server: { env: { SERVICE_API_KEY: SECRET } }
  })
  const antler = (args: ReadonlyArray<string>) => Effect.promise(() => runAntler(args, { cwd: dir, env }))
  return { dir, antler, env }
}

/** The text of the last tool message the model was sent. */
const lastToolText = (server: ScriptedChatServer.ScriptedChatServer): string =>
  String(server.requests.at(-1)?.messages.filter((m) => m.role === "tool").at(-1)?.content)

describe("antler run with long-running MCP tasks", () => {
  it.scoped("waits for the task the run submitted and shows how it ended; a later run lists it", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { antler } = home(server.url, { enabled: true, poll_interval_seconds: 1 })
      const ran = yield* antler(["run", "--thread", "t1", "start otters"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      const submitted = JSON.parse(lastToolText(server))
      assert.match(submitted.task_id, /^mcp-task-[0-9a-f]{32}$/)
      assert.strictEqual(submitted.message, "Task is running in the background.")
      assert.include(ran.stdout, "waiting for background task Report (at most 600s; Ctrl-C stops waiting;")
      assert.include(ran.stdout, "background task Report completed: {\"report\":\"Report on otters (key [redacted])\"}")
      assert.notInclude(ran.stdout + ran.stderr, SECRET)
      // the outcome is shown after the answer: the CLI waited for the second poll
      assert.isAbove(ran.stdout.indexOf("background task Report completed"), ran.stdout.indexOf("Ok."))

      const listed = yield* antler(["run", "--thread", "t1", "list my tasks"])
      assert.strictEqual(listed.code, 0, listed.stderr)
      const tools = (server.requests.at(-1)?.tools ?? [])
        .map((t) => (t as { readonly function: { readonly name: string } }).function.name)
      assert.includeMembers(tools, ["tasks_start_report", "list_background_tasks", "cancel_background_task"])
      assert.notInclude(tools, "tasks_report_status")
      const seen = lastToolText(server)
      assert.include(seen, submitted.task_id)
      assert.include(seen, "completed")
      assert.notInclude(listed.stdout, "waiting for", "a run that submitted nothing waits for nothing")
    }), SLOW)

  it.scoped("--json: one background_task object per task; a task whose server breaks the contract failed", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { antler } = home(server.url, { enabled: true, poll_interval_seconds: 1 })
      const ran = yield* antler(["run", "--json", "--thread", "t2", "start broken"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      const lines = ran.stdout.trim().split("\n").map((line) => JSON.parse(line))
      const types = lines.map((line) => line.type)
      assert.strictEqual(types.at(-1), "background_task")
      assert.isBelow(types.indexOf("run_end"), types.indexOf("background_task"))
      const task = lines.at(-1)
      assert.strictEqual(task.task_name, "Report")
      assert.strictEqual(task.status, "failed")
      assert.strictEqual(task.thread_id, "t2")
      assert.include(task.error, "report_status")
    }), SLOW)

  it.scoped("a task whose server fails its polls is shown as no longer followed, not waited for without end", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { antler } = home(server.url, {
        enabled: true,
        poll_interval_seconds: 1,
        tracking_degraded_after_errors: 1
      })
      const ran = yield* antler(["run", "--thread", "t4", "start flaky"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(
        ran.stdout,
        "background task Report submitted, no longer followed here: its server does not answer: MCP task tool " +
          "'report_status' returned an error: backend unavailable"
      )
    }), SLOW)

  it.scopedLive("Ctrl-C stops the waiting and ends the CLI; a later run of the thread follows the task's record", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { antler, dir, env } = home(server.url, { enabled: true, poll_interval_seconds: 1 })
      const child = ChildProcess.spawn(process.execPath, [...antlerCommand, "run", "--thread", "t5", "start forever"], {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
      yield* Effect.promise(() => until(() => out.includes("waiting for background task Report"), () => out))
      const submitted = JSON.parse(lastToolText(server))
      // (polled at least once: the task is working on its server)
      yield* Effect.sleep("1500 millis")
      child.kill("SIGINT")
      const code = yield* Effect.promise(() => exited)
      assert.strictEqual(code, 130, out)
      assert.notInclude(out, "background task Report working")
      // the stdio server held the task in its process, which ended with the CLI: a later run's poll finds it gone
      // (the poll goes on beside the run's turn: under load the model may list the task before it, still submitted or
      // working, so a few runs)
      let seen: { tasks: Array<{ task_id: string; status: string; error: string }> } = { tasks: [] }
      for (let i = 0; i < 6; i++) {
        const listed = yield* antler(["run", "--thread", "t5", "list my tasks"])
        assert.strictEqual(listed.code, 0, listed.stderr)
        seen = JSON.parse(lastToolText(server))
        if (seen.tasks[0]?.status !== "working" && seen.tasks[0]?.status !== "submitted") break
      }
      assert.deepStrictEqual(
        seen.tasks.map((t) => [t.task_id, t.status, t.error]),
        [[submitted.task_id, "failed", "Remote MCP task was not found"]]
      )
    }), SLOW)

  it.scoped("without mcp_tasks.enabled antler run refuses to start, as DeerFlow's start-up check (exit 2)", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { antler } = home(server.url, { enabled: false })
      const ran = yield* antler(["run", "--thread", "t3", "start otters"])
      assert.strictEqual(ran.code, 2, ran.stderr)
      assert.include(ran.stderr, "antler run: MCP task_toolsets are configured, so mcp_tasks.enabled=true is required")
      assert.strictEqual(server.requests.length, 0)
    }), SLOW)
})
