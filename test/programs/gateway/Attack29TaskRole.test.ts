/**
 * Attack round 29 on roles (`authorization.enabled`): a user whose role no longer may start runs. Alice, of role
 * `user`, made a scheduled task; the operator then gave her token the role `reader` (`routes` allow `threads:read`
 * and `threads:write`, not `runs:create`) and restarted the gateway. Her requests to start a run, make a task or
 * trigger one are refused (403 `Permission denied: runs:create`), but the task she made before fired at its time
 * and ran the agent as her: the scheduler asked only which role to run as, never whether that role may start runs.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server); the gateways share
 * one home (the SQLite file, the tasks), the second on a clock moved past the task's time.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Layer from "effect/Layer"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as MinuteClock from "../../support/minuteClock.js"
import { eventually } from "../../support/poll.js"
import { rbac } from "../../support/rbac.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 90_000
const HOUR = 3_600_000
const MARK = "TASK-ROLE-MARK"

const config = (role: string) => (url: string) => ({
  models: [Support.scriptedModel("scripted", url)],
  gateway: {
    scheduler_poll_seconds: 1,
    auth: { tokens: [{ token: Support.ALICE, user: "alice", role }] }
  },
  authorization: rbac({ user: {}, reader: { routes: { allow: ["threads:read", "threads:write"] } } })
})

const asked = (gateway: TestGateway) =>
  gateway.scripted.requests.filter((r: ChatRequestBody) => JSON.stringify(r.messages).includes(MARK))

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

describe("a role that may not start runs", () => {
  it("a scheduled task made before the role was narrowed does not run the agent: its run fails naming runs:create", async () => {
    const home = Support.tempDir("antler-attack29-role-")
    const first = await Support.start({ home, script: () => "Done.", config: config("user") })
    gateways.push(first)
    const made = await Requests.as(() => first, Support.ALICE)("POST", "/api/scheduled-tasks", {
      context_mode: "fresh_thread_per_run",
      title: "Notes",
      prompt: `${MARK} write a note`,
      schedule_type: "once",
      schedule_spec: { run_at: new Date(Date.now() + 2 * HOUR).toISOString() },
      timezone: "UTC"
    })
    assert.strictEqual(made.status, 200, made.text)
    const id = made.json().id as string
    await first.stop()

    // the same home, alice's token now of role `reader`, the clock past the task's time
    const clock = MinuteClock.make()
    clock.advance(3 * HOUR)
    const second = await Support.start({
      home,
      script: () => "Done.",
      config: config("reader"),
      references: Layer.setClock(clock.clock)
    })
    gateways.push(second)
    const alice = Requests.as(() => second, Support.ALICE)
    // (her own requests to run the agent are refused, as before)
    const trigger = await alice("POST", `/api/scheduled-tasks/${id}/trigger`)
    assert.strictEqual(trigger.status, 403, trigger.text)

    const task = await eventually(async () => {
      const got = await alice("GET", `/api/scheduled-tasks/${id}`)
      const body = got.json()
      return body.status === "enabled" || body.status === "running" ? undefined : body
    }, "the task's time to be handled", { tries: 1200 })
    assert.strictEqual(task.status, "failed", JSON.stringify(task))
    assert.include(task.last_error ?? "", "runs:create")
    const runs = (await alice("GET", `/api/scheduled-tasks/${id}/runs`)).json()
    assert.strictEqual(runs.length, 1, JSON.stringify(runs))
    assert.strictEqual(runs[0].status, "failed")
    assert.include(runs[0].error ?? "", "runs:create")
    assert.strictEqual(runs[0].run_id, null, JSON.stringify(runs[0]))
    // the agent was never run for her: no model request carries the task's prompt
    assert.deepStrictEqual(asked(first), [])
    assert.deepStrictEqual(asked(second), [])
  }, SLOW)
})
