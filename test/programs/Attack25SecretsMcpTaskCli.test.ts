/**
 * Attack round 25 on `antler run --secret NAME` and its MCP tasks: the run's model starts a task whose arguments hold
 * the request secret, and the server says it back (itself, base64-encoded) when the task ends. `antler run` masked
 * it in what it printed, but the task's record beside the threads kept it as said; it is masked there now (the run's
 * secrets sealed in the record under the process's own key while the task is active). The CLI as a process, a real
 * stdio task server, the scripted model through the real `openai` client.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { runAntler } from "../support/cli.js"
import { cliHome, reportTaskServer } from "../support/mcpTaskServer.js"
import { filesHolding } from "../support/filesHolding.js"

const SLOW = 180_000
const MARK = "DO-NOT-LEAK"
const SECRET = `erp-cli-3e5a-${MARK}`
const B64 = Buffer.from(SECRET).toString("base64")

const SERVER = reportTaskServer({
  status: `return answer({ task_id: args.task_id, status: "completed",
    result: { report: "Report on " + task.topic, key: Buffer.from(task.topic).toString("base64") } })`
})

const model = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn =>
  body.messages.at(-1)?.role === "tool"
    ? "Started."
    : { toolCalls: [{ name: "tasks_start_report", arguments: { topic: SECRET } }] }

describe("Attack25: antler run's MCP task saying its request secret back", () => {
  it.scoped("is masked in what it prints and in the task's record it keeps", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(model)
      const { dir, env } = cliHome("antler-attack25-cli-tasks-", server.url, SERVER, {
        config: { mcp_tasks: { enabled: true, poll_interval_seconds: 1 } },
        env: { ERP_TOKEN: SECRET }
      })
      const ran = yield* Effect.promise(() =>
        runAntler(["run", "--json", "--secret", "ERP_TOKEN", "file the report"], { cwd: dir, env })
      )
      assert.strictEqual(ran.code, 0, ran.stderr)
      const task = ran.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
        .find((o) => o.type === "background_task")
      assert.isDefined(task, ran.stdout.slice(-500))
      assert.include(JSON.stringify(task), "Report on [redacted]")
      assert.notInclude(ran.stdout + ran.stderr, MARK)
      assert.notInclude(ran.stdout + ran.stderr, B64.slice(4, 20))
      assert.deepStrictEqual(filesHolding(dir, MARK), [])
      assert.deepStrictEqual(filesHolding(dir, B64.slice(4, 20)), [])
    }), SLOW)
})
