/**
 * A long-running MCP task `antler run` waited for and showed is told: the CLI records its event as told (as the
 * gateway's notifier records an event its notification run told), so a later `antler serve` over the same data
 * directory does not tell it again with a notification run on the thread. (Before, the record kept the event
 * `pending`, and the gateway's notifier started a run whose model told the user what the CLI had already shown.)
 * Real parts: a stdio MCP server process with a task contract, the CLI as a process, the gateway over the same
 * SQLite file, the scripted model through the real `openai` client.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { INSTRUCTION } from "../../src/programs/gateway/mcptasks/Notifier.js"
import { runAntler } from "../support/cli.js"
import { cliHome, reportTaskServer } from "../support/mcpTaskServer.js"
import * as Support from "./gateway/support.js"

const SLOW = 180_000

/** A stdio MCP server whose reports complete at their first status call. */
const SERVER = reportTaskServer({
  status: `return answer({ task_id: args.task_id, status: "completed", result: { report: "Report on otters" } })`
})

/** Whether a model request is a notification run's (its last user message is the instruction). */
const isNotification = (body: ScriptedChatServer.ChatRequestBody) => Support.lastUserText(body).startsWith(INSTRUCTION)

/** The model: `start` submits a report; a notification run's answer; after a tool's answer, `Ok.`. */
const model = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn => {
  if (isNotification(body)) return "Your report is ready."
  if (body.messages.at(-1)?.role === "tool") return "Ok."
  if (Support.lastUserText(body).includes("start otters")) {
    return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: "otters" } }] }
  }
  return "Hello."
}

interface Database {
  readonly prepare: (sql: string) => { readonly all: (...params: ReadonlyArray<unknown>) => Array<any> }
  readonly close: () => void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new(
  filename: string,
  options?: { readonly readonly?: boolean }
) => Database

describe("an MCP task antler run showed", () => {
  it.scopedLive("is recorded as told: a later antler serve on the same data directory does not tell it again", () =>
    Effect.gen(function*() {
      const allowlist = process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST
      process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST = "node"
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (allowlist === undefined) delete process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST
          else process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST = allowlist
        })
      )
      const server = yield* ScriptedChatServer.start(model)
      const mcpTasks = { enabled: true, poll_interval_seconds: 1 }
      const { config, dir, env } = cliHome("antler-mcp-told-", server.url, SERVER, {
        config: { mcp_tasks: mcpTasks },
        server: { command: "node" },
        env: { DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST: "node" }
      })
      const ran = yield* Effect.promise(() => runAntler(["run", "--thread", "t1", "start otters"], { cwd: dir, env }))
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stdout, "background task Report completed")

      // the record says its event was told
      const db = new Sqlite(Path.join(dir, "antler.sqlite"), { readonly: true })
      const rows = db.prepare(
        "SELECT status, notification_status, event_version, notified_version FROM antler_mcp_tasks"
      ).all()
      db.close()
      assert.strictEqual(rows.length, 1)
      assert.strictEqual(rows[0].status, "completed")
      assert.isAtLeast(rows[0].event_version, 1)
      assert.strictEqual(rows[0].notified_version, rows[0].event_version)
      assert.strictEqual(rows[0].notification_status, "delivered")

      // a gateway over the same data directory, its notifier passing every second, starts no run to tell it
      const gateway = yield* Effect.acquireRelease(
        Effect.promise(() =>
          Support.start({ script: model, home: dir, source: config, config: { mcp_tasks: mcpTasks } })
        ),
        (started) => Effect.promise(() => started.stop())
      )
      yield* Effect.sleep("3500 millis")
      assert.isFalse(gateway.scripted.requests.some(isNotification))
      const runs = yield* gateway.store.runs({ threadId: "t1" })
      assert.strictEqual(runs.length, 1)
    }), SLOW)
})
