/**
 * DeerFlow's scheduled tasks through HTTP against a real gateway (a scripted model behind it), with the fields
 * DeerFlow's app reads (src/core/scheduled-tasks/types.ts): create → trigger → the run in the task's runs and in
 * its thread as an ordinary run; schedules refused at the boundary with a readable detail; two users, each seeing
 * and changing only their own tasks; tasks and their runs kept across a restart of the gateway. The timing of
 * ticks is tested with TestClock in Scheduler.test.ts.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Support from "./support.js"
import { eventually } from "../../support/poll.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"

const lastUser = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")

const script = (body: ChatRequestBody) =>
  lastUser(body).includes("GitHub Trending") ? "Top repositories today: antler." : "Done."

const gateways: Array<Support.TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop()
})

const start = async (home?: string, pollSeconds = 10) => {
  const gateway = await Support.start({
    script,
    ...(home === undefined ? {} : { home }),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        scheduler_poll_seconds: pollSeconds,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
      },
      // (a once task a second and a half ahead: DeerFlow's 60 s least delay shortened)
      scheduler: { min_once_delay_seconds: 1 }
    }
  })
  gateways.push(gateway)
  return gateway
}

const as = (gateway: Support.TestGateway, token: string) => async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

const TASK_FIELDS = [
  "id", "thread_id", "context_mode", "title", "prompt", "schedule_type", "schedule_spec", "timezone", "status",
  "next_run_at", "last_run_at", "last_run_id", "last_thread_id", "last_error", "run_count", "created_at", "updated_at"
]
const RUN_FIELDS = [
  "id", "task_id", "thread_id", "run_id", "scheduled_for", "trigger", "status", "error", "started_at", "finished_at",
  "created_at"
]

const trending = {
  context_mode: "fresh_thread_per_run",
  title: "Trending",
  prompt: "Summarize today's GitHub Trending page.",
  schedule_type: "cron",
  schedule_spec: { cron: "0  9 * * *" },
  timezone: "Asia/Shanghai"
}

const until = <A>(check: () => Promise<A | undefined>, what: string) => eventually(check, what, { tries: 1200, everyMs: 25 })

describe("scheduled tasks over HTTP", () => {
  it("create → trigger → the run is in the task's runs and its thread, as an ordinary run", async () => {
    const gateway = await start()
    const alice = as(gateway, ALICE)
    const created = await alice("POST", "/api/scheduled-tasks", trending)
    assert.strictEqual(created.status, 200, JSON.stringify(created.body))
    const task = created.body
    for (const field of TASK_FIELDS) assert.property(task, field)
    assert.match(task.id, /^task-[0-9a-f]{32}$/)
    assert.strictEqual(task.status, "enabled")
    assert.strictEqual(task.run_count, 0)
    // the cron's fields single-spaced; 09:00 in Shanghai is 01:00 UTC
    assert.deepStrictEqual(task.schedule_spec, { cron: "0 9 * * *" })
    assert.match(task.next_run_at, /T01:00:00\.000Z$/)
    assert.isAbove(Date.parse(task.next_run_at), Date.now())

    const listed = await alice("GET", "/api/scheduled-tasks")
    assert.deepStrictEqual(listed.body.map((t: any) => t.id), [task.id])

    const triggered = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.deepStrictEqual(triggered, { status: 200, body: { id: task.id, triggered: true } })

    const run = await until(async () => {
      const runs = (await alice("GET", `/api/scheduled-tasks/${task.id}/runs`)).body
      return runs.length === 1 && runs[0].status === "success" ? runs[0] : undefined
    }, "the triggered run ends")
    for (const field of RUN_FIELDS) assert.property(run, field)
    assert.strictEqual(run.task_id, task.id)
    assert.strictEqual(run.trigger, "manual")
    assert.isNull(run.error)
    assert.isString(run.finished_at)

    // the run is an ordinary run of a new thread of alice's: in the thread's runs, its messages in its state
    const threadRuns = await alice("GET", `/api/threads/${run.thread_id}/runs`)
    assert.deepStrictEqual(threadRuns.body.map((r: any) => [r.run_id, r.status]), [[run.run_id, "success"]])
    const state = await alice("GET", `/api/threads/${run.thread_id}/state`)
    const messages = Support.visible(state.body.values.messages)
    assert.deepStrictEqual(messages.map((m: any) => m.type), ["human", "ai"])
    assert.strictEqual(messages[0].content, trending.prompt)
    assert.strictEqual(messages[1].content, "Top repositories today: antler.")

    const after = (await alice("GET", `/api/scheduled-tasks/${task.id}`)).body
    assert.strictEqual(after.run_count, 1)
    assert.strictEqual(after.last_run_id, run.run_id)
    assert.strictEqual(after.last_thread_id, run.thread_id)
    assert.strictEqual(after.status, "enabled")
    assert.strictEqual(after.next_run_at, task.next_run_at)
  })

  it("the gateway's poller runs a once task at its time, on the user's thread, and the task ends completed", async () => {
    const gateway = await start(undefined, 1)
    const alice = as(gateway, ALICE)
    await alice("POST", "/api/threads", { thread_id: "daily-notes" })
    const runAt = new Date(Date.now() + 2500).toISOString()
    const task = (await alice("POST", "/api/scheduled-tasks", {
      ...trending,
      context_mode: "reuse_thread",
      thread_id: "daily-notes",
      schedule_type: "once",
      schedule_spec: { run_at: runAt },
      timezone: "UTC"
    })).body
    assert.strictEqual(task.status, "enabled")
    const done = await until(async () => {
      const current = (await alice("GET", `/api/scheduled-tasks/${task.id}`)).body
      return current.status === "completed" ? current : undefined
    }, "the once task runs and completes")
    assert.isNull(done.next_run_at)
    assert.strictEqual(done.run_count, 1)
    assert.strictEqual(done.last_thread_id, "daily-notes")
    const runs = (await alice("GET", `/api/scheduled-tasks/${task.id}/runs`)).body
    assert.deepStrictEqual(runs.map((r: any) => [r.trigger, r.status, r.thread_id, r.scheduled_for]), [
      ["scheduled", "success", "daily-notes", runAt]
    ])
    const state = await alice("GET", "/api/threads/daily-notes/state")
    assert.strictEqual(Support.visible(state.body.values.messages).at(-1).content, "Top repositories today: antler.")
    // the poller ran it once: one run on the thread
    assert.strictEqual((await alice("GET", "/api/threads/daily-notes/runs")).body.length, 1)
  })

  it("a task has one run at a time: of two triggers at once, one runs and the other is refused (409)", async () => {
    const gateway = await start()
    const alice = as(gateway, ALICE)
    const task = (await alice("POST", "/api/scheduled-tasks", trending)).body
    const answers = await Promise.all([1, 2, 3].map(() => alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)))
    assert.deepStrictEqual(answers.map((a) => a.status).sort(), [200, 409, 409], JSON.stringify(answers))
    const refusal = answers.find((a) => a.status === 409)!.body
    assert.match(refusal.detail, /task already has an active run/)
    const runs = await until(async () => {
      const found = (await alice("GET", `/api/scheduled-tasks/${task.id}/runs`)).body
      return found.every((r: any) => r.status !== "running" && r.status !== "queued") ? found : undefined
    }, "the run ends")
    assert.deepStrictEqual(runs.map((r: any) => r.status), ["success"])
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).body.run_count, 1)
    // once it ended, the task runs again
    assert.strictEqual((await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)).status, 200)
  })

  it("refuses schedules and bodies that are not ones, saying what is wrong", async () => {
    const gateway = await start()
    const alice = as(gateway, ALICE)
    const refused = async (body: unknown, detail: RegExp) => {
      const answer = await alice("POST", "/api/scheduled-tasks", body)
      assert.strictEqual(answer.status, 422, JSON.stringify(answer.body))
      assert.match(answer.body.detail, detail)
    }
    await refused({ ...trending, schedule_spec: { cron: "0 9 * *" } }, /exactly 5 fields/)
    await refused({ ...trending, schedule_spec: { cron: "61 9 * * *" } }, /Invalid cron expression "61 9 \* \* \*"/)
    await refused({ ...trending, schedule_spec: {} }, /requires schedule_spec\.cron/)
    await refused({ ...trending, timezone: "Mars/Olympus" }, /Unknown timezone: "Mars\/Olympus"/)
    await refused({ ...trending, schedule_type: "once", schedule_spec: { run_at: "2020-01-01T00:00:00Z" } }, /in the future/)
    await refused({ ...trending, schedule_type: "once", schedule_spec: { run_at: "tomorrow" } }, /ISO 8601/)
    await refused({ ...trending, schedule_type: "interval" }, /schedule_type/)
    await refused({ ...trending, title: "" }, /title/)
    await refused({ ...trending, prompt: "x".repeat(20_001) }, /prompt/)
    await refused({ ...trending, context_mode: "reuse_thread" }, /reuse_thread requires thread_id/)
    assert.deepStrictEqual((await alice("GET", "/api/scheduled-tasks")).body, [])
    // a once task in the future is taken as given
    const runAt = new Date(Date.now() + 3_600_000).toISOString()
    const once = await alice("POST", "/api/scheduled-tasks", { ...trending, schedule_type: "once", schedule_spec: { run_at: runAt } })
    assert.strictEqual(once.status, 200, JSON.stringify(once.body))
    assert.strictEqual(once.body.next_run_at, runAt)
  })

  it("two users: each sees and controls only their own tasks and threads", async () => {
    const gateway = await start()
    const alice = as(gateway, ALICE)
    const bob = as(gateway, BOB)
    const thread = await alice("POST", "/api/threads", { thread_id: "alice-notes" })
    assert.strictEqual(thread.status, 200, JSON.stringify(thread.body))
    const task = (await alice("POST", "/api/scheduled-tasks", { ...trending, context_mode: "reuse_thread", thread_id: "alice-notes" })).body
    assert.strictEqual(task.thread_id, "alice-notes")
    assert.deepStrictEqual((await alice("GET", "/api/threads/alice-notes/scheduled-tasks")).body.map((t: any) => t.id), [task.id])

    // bob: none of alice's, and a thread of alice's is one he does not have
    assert.deepStrictEqual((await bob("GET", "/api/scheduled-tasks")).body, [])
    for (const [method, path, body] of [
      ["GET", `/api/scheduled-tasks/${task.id}`],
      ["PATCH", `/api/scheduled-tasks/${task.id}`, { title: "Mine now" }],
      ["POST", `/api/scheduled-tasks/${task.id}/pause`],
      ["POST", `/api/scheduled-tasks/${task.id}/resume`],
      ["POST", `/api/scheduled-tasks/${task.id}/trigger`],
      ["GET", `/api/scheduled-tasks/${task.id}/runs`],
      ["DELETE", `/api/scheduled-tasks/${task.id}`]
    ] as const) {
      const answer = await bob(method, path, body)
      assert.strictEqual(answer.status, 404, `${method} ${path}: ${JSON.stringify(answer.body)}`)
    }
    // (for bob, alice's thread id is a new chat's: no tasks, as DeerFlow lists an id it has not seen)
    const listed = await bob("GET", "/api/threads/alice-notes/scheduled-tasks")
    assert.deepStrictEqual([listed.status, listed.body], [200, []])
    const stolen = await bob("POST", "/api/scheduled-tasks", { ...trending, context_mode: "reuse_thread", thread_id: "alice-notes" })
    assert.strictEqual(stolen.status, 404, JSON.stringify(stolen.body))

    // alice's task is as she left it; she pauses, resumes, edits and deletes it
    const paused = await alice("POST", `/api/scheduled-tasks/${task.id}/pause`)
    assert.strictEqual(paused.body.status, "paused")
    assert.strictEqual(paused.body.title, "Trending")
    const resumed = await alice("POST", `/api/scheduled-tasks/${task.id}/resume`)
    assert.strictEqual(resumed.body.status, "enabled")
    const edited = await alice("PATCH", `/api/scheduled-tasks/${task.id}`, { title: "Trending (edited)", schedule_spec: { cron: "30 8 * * 1" } })
    assert.strictEqual(edited.status, 200, JSON.stringify(edited.body))
    assert.strictEqual(edited.body.title, "Trending (edited)")
    assert.deepStrictEqual(edited.body.schedule_spec, { cron: "30 8 * * 1" })
    assert.strictEqual(new Date(edited.body.next_run_at).getUTCDay(), 1)
    assert.deepStrictEqual(await alice("DELETE", `/api/scheduled-tasks/${task.id}`), { status: 200, body: { id: task.id, deleted: true } })
    assert.deepStrictEqual((await alice("GET", "/api/scheduled-tasks")).body, [])
  })

  it("tasks and their runs are kept across a restart of the gateway", async () => {
    const home = Support.tempDir("antler-sched-restart-")
    const first = await start(home)
    const task = (await as(first, ALICE)("POST", "/api/scheduled-tasks", trending)).body
    await as(first, ALICE)("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    const runs = await until(async () => {
      const found = (await as(first, ALICE)("GET", `/api/scheduled-tasks/${task.id}/runs`)).body
      return found.length === 1 && found[0].status === "success" ? found : undefined
    }, "the run ends")
    const before = (await as(first, ALICE)("GET", `/api/scheduled-tasks/${task.id}`)).body
    await first.stop()

    const second = await start(home)
    const alice = as(second, ALICE)
    assert.deepStrictEqual((await alice("GET", "/api/scheduled-tasks")).body, [before])
    assert.deepStrictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}/runs`)).body, runs)
    assert.deepStrictEqual((await as(second, BOB)("GET", "/api/scheduled-tasks")).body, [])
  })
})
