/**
 * Attack round 26 on request secrets and DeerFlow's long-running MCP tasks, as a hostile task server: the run's
 * answers from a task are masked (`TaskSecrets`), but its handle, the remote task id the server answers the submit
 * with, is kept as it came (it is what every poll and cancel sends back): a server that answered with a request secret
 * of the run (or the process's own, or its base64) had it kept in the task's record, in the database, in plain text,
 * for as long as the record lives. Such a handle is now refused: the remote task is cancelled, nothing is recorded,
 * and the model is told why, its text masked.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import { filesHolding } from "../../support/filesHolding.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const MARK = "DO-NOT-LEAK"
const SECRET = `erp-26-a4c1-${MARK}`
const B64 = Buffer.from(SECRET).toString("base64")

/** Its submit answers with the topic as the task's id (`b64 ...`: the rest base64-encoded; `ok ...`: its own). */
const SERVER = reportTaskServer({
  status: `if (task?.topic.startsWith("perr ")) return cut(task.topic.slice(5))
    return answer({ task_id: args.task_id, status: task === undefined ? "failed" : "running" })`,
  // (an error whose text the driver cuts at 500 characters inside the secret: its beginning was kept)
  prelude: `const cut = (said) => ({ isError: true, content: [{ type: "text", text: "E".repeat(490) + said }] })`
}).replace(
  `const id = "remote-" + process.pid + "-" + (++n)`,
  `const topic = String(args.topic)
        if (topic.startsWith("err ")) return cut(topic.slice(4))
        const id = topic.startsWith("b64 ") ? Buffer.from(topic.slice(4)).toString("base64")
          : /^(ok|perr) /.test(topic) ? "remote-" + process.pid + "-" + (++n) : topic`
)

allowNodeServers()

const script = (body: any) => {
  if (body.messages.at(-1)?.role === "tool") return "Started."
  const text = Support.lastUserText(body)
  const topics = text.includes("fine")
    ? ["ok fine"]
    : text.includes("cut")
    ? [`err ${SECRET}`, `perr ${SECRET}`]
    : [SECRET, `b64 ${SECRET}`]
  return { toolCalls: topics.map((topic) => ({ name: "tasks_start_report", arguments: { topic } })) }
}

let gateway: TestGateway
let home: string
beforeAll(async () => {
  const dir = Support.tempDir("antler-attack26-handle-")
  home = Support.tempDir("antler-attack26-handle-home-")
  gateway = await Support.start({
    script,
    source: writeTaskExtensions(dir, SERVER),
    home,
    config: { gateway: Support.twoUsers, mcp_tasks: { enabled: true, poll_interval_seconds: 1 } }
  })
}, SLOW)
afterAll(() => gateway?.stop())

const run = async (prompt: string) => {
  const call = Requests.api(() => gateway)
  const threadId = (await Requests.ok(await call(Support.ALICE, "/threads", { method: "POST", body: {} }))).thread_id
  const answer = await call(Support.ALICE, `/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: { assistant_id: "lead_agent", input: Support.userInput(prompt), context: { secrets: { ERP_TOKEN: SECRET } } }
  })
  assert.strictEqual(answer.status, 200, await answer.clone().text())
  const state = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/state`))
  const results = state.values.messages.filter((m: any) => m.type === "tool" && m.name === "tasks_start_report")
  const tasks = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/mcp-tasks`))
  return { results, tasks, state, threadId: threadId as string }
}

describe("Attack26: an MCP task server answers a submit with a request secret as the task's id", () => {
  it("is refused: nothing recorded, the model told why (masked), no file of the gateway holds it", async () => {
    const { results, state, tasks } = await run("file the reports")
    assert.lengthOf(results, 2)
    for (const result of results) {
      assert.include(String(result.content), "answered with a task id that holds a secret", JSON.stringify(result))
    }
    assert.deepStrictEqual(tasks.tasks ?? tasks, [])
    assert.notInclude(JSON.stringify(state), MARK)
    assert.notInclude(JSON.stringify(state), B64.slice(4, 24))
    assert.deepStrictEqual(filesHolding(home, [MARK, B64.slice(4, 24)]), [])
  }, SLOW)

  it("an error cut inside a request secret (at 500 characters) keeps none of it: the submit's, a poll's", async () => {
    const { results, tasks, threadId } = await run("cut errors")
    assert.lengthOf(results, 2)
    const beginning = SECRET.slice(0, 10)
    assert.include(String(results[0].content), "could not start: MCP task tool 'start_report' returned an error: EEE")
    assert.notInclude(String(results[0].content), beginning)
    const listed = tasks.tasks ?? tasks
    assert.lengthOf(listed, 1)
    const polled = await eventually(async () => {
      const task = await Requests.ok(
        await Requests.api(() => gateway)(Support.ALICE, `/threads/${threadId}/mcp-tasks/${listed[0].task_id}`)
      )
      return task.last_poll_error === null || task.last_poll_error === undefined ? undefined : task
    }, "a failed poll", { tries: 200, everyMs: 100 })
    assert.include(polled.last_poll_error, "returned an error: EEE")
    assert.notInclude(JSON.stringify(polled), beginning)
    assert.deepStrictEqual(filesHolding(home, beginning), [])
  }, SLOW)

  it("an ordinary id of the same run is tracked", async () => {
    const { results, tasks } = await run("a fine report")
    assert.lengthOf(results, 1)
    assert.notInclude(String(results[0].content), "secret")
    assert.lengthOf(tasks.tasks ?? tasks, 1)
  }, SLOW)
})
