/**
 * `antler run`'s wait for the long-running MCP tasks its run submitted is bounded (`--wait-tasks SECONDS`, 600 by
 * default; 0 does not wait): before, a task that never ended kept a script without a terminal waiting forever (only
 * Ctrl-C stopped it). Past the bound the CLI says it stopped waiting, how to follow the task later, and exits 0. A
 * real stdio MCP server process whose task never ends, the CLI as a process, the scripted model called through the
 * real `openai` client.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as CliCommand from "../../src/programs/cli/CliCommand.js"
import { runAntler } from "../support/cli.js"
import { cliHome, reportTaskServer } from "../support/mcpTaskServer.js"

const SLOW = 180_000

/** A stdio MCP server whose reports never end (`running` at every status call). */
const SERVER = reportTaskServer({
  status: `if (task === undefined) {
      return answer({ task_id: args.task_id, status: "failed", error_code: "task_not_found" })
    }
    return answer({ task_id: args.task_id, status: "running" })`,
  cancel: `return answer({ task_id: args.task_id, status: "cancelled" })`
})

/** The model: any question submits a report; after the tool's answer, `Ok.`. */
const model = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn =>
  body.messages.at(-1)?.role === "tool"
    ? "Ok."
    : { toolCalls: [{ name: "tasks_start_report", arguments: { topic: "forever" } }] }

const home = (url: string) => {
  const { dir, env } = cliHome("antler-mcp-task-wait-", url, SERVER, {
    config: { mcp_tasks: { enabled: true, poll_interval_seconds: 1 } }
  })
  const run = (args: ReadonlyArray<string>) => Effect.promise(() => runAntler(args, { cwd: dir, env }))
  return { run, dir, env }
}

describe("antler run --wait-tasks", () => {
  it.scopedLive("stops waiting for a task that never ends after the bound, says so, and exits 0", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { dir, env, run: antler } = home(server.url)
      const started = Date.now()
      const ran = yield* antler(["run", "--thread", "t1", "--wait-tasks", "2", "start a report"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stdout, "waiting for background task Report (at most 2s;")
      assert.include(ran.stdout, "stopped waiting for background task Report after 2s")
      // (the command as typed where the user is: node <path>/bin/antler.js outside the clone)
      assert.include(ran.stdout, `a later ${CliCommand.invocation(env, dir)} run --thread t1 (its task tools)`)
      assert.isAtLeast(Date.now() - started, 2000)
      assert.notInclude(ran.stdout, "background task Report working")

      const none = yield* antler(["run", "--thread", "t2", "--wait-tasks", "0", "start a report"])
      assert.strictEqual(none.code, 0, none.stderr)
      assert.notInclude(none.stdout, "waiting for background task Report (at most")
      assert.include(none.stdout, "not waiting for background task Report (--wait-tasks 0)")

      const wrong = yield* antler(["run", "--thread", "t3", "--wait-tasks", "-1", "hello"])
      assert.strictEqual(wrong.code, 2, wrong.stdout)
      assert.include(wrong.stderr, "--wait-tasks")
    }), SLOW)
})
