/**
 * Attack round 25 on request secrets and DeerFlow's long-running MCP tasks, through the gateway with a real stdio
 * task server: a run given `context.secrets` starts a task whose arguments hold the value (its model wrote it there),
 * and the server says it back (itself, base64-encoded, in an error) once the run has ended. The gateway kept no
 * value to mask it with: the task's record, its notification run, `list_background_tasks`, the thread's
 * `background_tasks` and the database showed it. Now the run's secrets are sealed in the task's record while it is
 * active and mask what it says; a restarted gateway that cannot open them withholds the text with a notice.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import { INSTRUCTION } from "../../../src/programs/gateway/mcptasks/Notifier.js"
import { allowNodeServers, reportTaskServer, TASKS_IN_FILE, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { filesHolding } from "../../support/filesHolding.js"

const SLOW = 120_000
const MARK = "DO-NOT-LEAK"
const SECRET = `erp-7f3c-91ab-${MARK}`
const B64 = Buffer.from(SECRET).toString("base64")

/**
 * Its tasks are kept in a file (a restarted gateway's new server process still knows them). A task says its topic
 * back after 2.5 s (`slow ...`: 5 s): failed with it in its error (`fail ...`), else completed with it in its result,
 * itself and base64-encoded.
 */
const SERVER = reportTaskServer({
  prelude: TASKS_IN_FILE,
  status: `if (task === undefined) return answer({ task_id: args.task_id, status: "failed", error: "no such task" })
    const { topic, at } = task
    if (Date.now() - at < (topic.startsWith("slow ") ? 5000 : 2500)) {
      return answer({ task_id: args.task_id, status: "running" })
    }
    if (topic.startsWith("fail ")) {
      return answer({ task_id: args.task_id, status: "failed", error: "cannot file the report of " + topic })
    }
    return answer({ task_id: args.task_id, status: "completed",
      result: { report: "Report on " + topic, key: Buffer.from(topic.replace(/^slow /, "")).toString("base64") } })`
})

allowNodeServers()

const isNotification = (body: { readonly messages: ReadonlyArray<{ readonly role: string }> }) =>
  Support.lastUserText(body as any).startsWith(INSTRUCTION)

const script = (body: any) => {
  if (isNotification(body)) return "Your task is done."
  if (body.messages.at(-1)?.role === "tool") return "Started."
  const text = Support.lastUserText(body)
  if (text.includes("list")) return { toolCalls: [{ name: "list_background_tasks", arguments: {} }] }
  const topics = text.includes("slow") ? [`slow ${SECRET}`] : [SECRET, `fail ${SECRET}`]
  return { toolCalls: topics.map((topic) => ({ name: "tasks_start_report", arguments: { topic } })) }
}

const assertHidden = (text: string, where: string) => {
  assert.notInclude(text, MARK, where)
  assert.notInclude(text, B64.slice(4, 24), where)
}

const setup = () => {
  const dir = Support.tempDir("antler-attack25-tasks-")
  const source = writeTaskExtensions(dir, SERVER, { env: { TASKS_FILE: Path.join(dir, "tasks.json") } })
  const home = Support.tempDir("antler-attack25-home-")
  const options: Support.StartOptions = {
    script,
    source,
    home,
    config: { gateway: Support.twoUsers, mcp_tasks: { enabled: true, poll_interval_seconds: 1 } }
  }
  return { options, home }
}

/** Runs `prompt` on a new thread of alice's with the request secret; the thread and the tasks' ids. */
const startTasks = async (gateway: TestGateway, prompt: string) => {
  const call = Requests.api(() => gateway)
  const threadId = (await Requests.ok(await call(Support.ALICE, "/threads", { method: "POST", body: {} }))).thread_id
  const answer = await call(Support.ALICE, `/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: { assistant_id: "lead_agent", input: Support.userInput(prompt), context: { secrets: { ERP_TOKEN: SECRET } } }
  })
  assert.strictEqual(answer.status, 200, await answer.clone().text())
  const state = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/state`))
  const ids: Array<string> = state.values.messages
    .filter((m: any) => m.type === "tool" && m.name === "tasks_start_report")
    .map((m: any) => JSON.parse(m.content).task_id)
  return { threadId: threadId as string, ids }
}

const read = async (gateway: TestGateway, path: string) =>
  Requests.ok(await Requests.api(() => gateway)(Support.ALICE, path))

const ended = (gateway: TestGateway, threadId: string, id: string) =>
  eventually(async () => {
    const task = await read(gateway, `/threads/${threadId}/mcp-tasks/${id}`)
    return ["completed", "failed"].includes(task.status) ? task : undefined
  }, `task ${id} ended`, { tries: 300, everyMs: 100 })

const notified = (gateway: TestGateway, threadId: string, count: number) =>
  eventually(async () => {
    const runs = await read(gateway, `/threads/${threadId}/runs?limit=50`)
    const told = runs.filter((run: any) => run.metadata?.mcp_task_notification !== undefined)
    return told.length === count && told.every((run: any) => run.status === "success") ? told : undefined
  }, `${count} notification run(s)`, { tries: 300, everyMs: 100 })

describe("Attack25: a request secret an MCP task says back after its run ended", () => {
  let gateway: TestGateway
  let home: string
  beforeAll(async () => {
    const made = setup()
    home = made.home
    gateway = await Support.start(made.options)
  }, SLOW)
  afterAll(() => gateway?.stop())

  it("is masked in the task's record, its notification runs, list_background_tasks, the state, the files", async () => {
    const call = Requests.api(() => gateway)
    const { ids, threadId } = await startTasks(gateway, "file the reports")
    assert.lengthOf(ids, 2)
    const [done, failed] = [await ended(gateway, threadId, ids[0]!), await ended(gateway, threadId, ids[1]!)]
    assert.strictEqual(done.status, "completed")
    assert.deepStrictEqual(done.result, { report: "Report on [redacted]", key: "[redacted]" })
    assert.strictEqual(failed.status, "failed")
    assert.strictEqual(failed.error, "cannot file the report of fail [redacted]")
    assertHidden(JSON.stringify([done, failed]), "the records")
    await notified(gateway, threadId, 2)
    const told = gateway.scripted.requests.filter(isNotification)
    assert.isAtLeast(told.length, 2)
    assert.include(JSON.stringify(told), "Report on [redacted]")
    assertHidden(JSON.stringify(told), "the notification runs' model requests")

    // a later run of the thread, given no secrets, lists the tasks
    const listed = await call(Support.ALICE, `/threads/${threadId}/runs/wait`, {
      method: "POST",
      body: { assistant_id: "lead_agent", input: Support.userInput("list my tasks") }
    })
    assert.strictEqual(listed.status, 200)
    const state = await Requests.ok(await call(Support.ALICE, `/threads/${threadId}/state`))
    const list = state.values.messages.filter((m: any) => m.type === "tool" && m.name === "list_background_tasks")
    assert.lengthOf(list, 1)
    assert.include(String(list[0].content), "cannot file the report of fail [redacted]")
    assertHidden(JSON.stringify(state), "the thread's state (background_tasks, messages)")
    assertHidden(JSON.stringify(await read(gateway, `/threads/${threadId}/mcp-tasks`)), "the tasks' listing")
    assert.deepStrictEqual(filesHolding(home, MARK), [])
    assert.deepStrictEqual(filesHolding(home, B64.slice(4, 24)), [])
  }, SLOW)
})

describe("Attack25: a request secret an MCP task says back to a gateway restarted since its run", () => {
  it("is withheld with a notice saying why: the restarted process cannot open the run's sealed secrets", async () => {
    const { home, options } = setup()
    const first = await Support.start(options)
    const { ids, threadId } = await startTasks(first, "a slow report")
    assert.lengthOf(ids, 1)
    await first.stop()
    const second = await Support.start(options)
    try {
      const task = await ended(second, threadId, ids[0]!)
      assert.strictEqual(task.status, "completed")
      assert.isNull(task.result)
      assert.include(task.result_preview, "[withheld: this MCP task was started by a run given request secrets")
      assert.include(task.result_preview, "set gateway.cluster.secret to keep them across restarts")
      await notified(second, threadId, 1)
      const told = second.scripted.requests.filter(isNotification)
      assert.include(JSON.stringify(told), "[withheld:")
      assertHidden(JSON.stringify(told), "the notification run's model request")
      assertHidden(JSON.stringify(task), "the record")
      assert.deepStrictEqual(filesHolding(home, MARK), [])
    } finally {
      await second.stop()
    }
  }, SLOW)
})
