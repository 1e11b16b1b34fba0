/**
 * DeerFlow's `test_scheduled_task_dispatch_race.py`, `test_two_concurrent_manual_dispatches_launch_exactly_once` and
 * `test_natural_timing_concurrent_dispatch_launches_exactly_once`, as a user sees them through a real gateway: two
 * triggers of one task sent at once start one run; the other is a 409 and no second run goes.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang, config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)

describe("test_scheduled_task_dispatch_race.py", () => {
  it("two triggers at once: one run goes, the other trigger is a 409", async () => {
    for (let i = 0; i < 3; i++) {
      const made = await alice("POST", "/api/scheduled-tasks", {
        title: `race ${i}`,
        prompt: "hang here",
        schedule_type: "cron",
        schedule_spec: { cron: "0 9 * * *" },
        timezone: "UTC"
      })
      assert.strictEqual(made.status, 200, made.text)
      const id = made.json().id
      const answers = await Promise.all([
        alice("POST", `/api/scheduled-tasks/${id}/trigger`),
        alice("POST", `/api/scheduled-tasks/${id}/trigger`)
      ])
      assert.deepStrictEqual(answers.map((a) => a.status).sort(), [200, 409], answers.map((a) => a.text).join(" | "))
      const runs = await eventually(async () => {
        const listed = (await alice("GET", `/api/scheduled-tasks/${id}/runs`)).json() as Array<any>
        return listed.some((run) => run.status === "running") ? listed : undefined
      }, "the winner's run goes", { tries: 800, everyMs: 25 })
      // one run, and the loser records none (DeerFlow: its task_run_id is None)
      assert.deepStrictEqual(runs.map((run) => [run.trigger, run.status]), [["manual", "running"]])
      const going = runs.find((run) => run.status === "running")
      const cancelled = await alice("POST", `/api/threads/${going.thread_id}/runs/${going.run_id}/cancel`)
      assert.include([200, 202, 204], cancelled.status, cancelled.text)
    }
  })
})
