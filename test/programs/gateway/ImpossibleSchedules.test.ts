/**
 * A cron schedule whose fields are each valid but name no date (`0 0 31 2 *`: February 31) never fires. It is
 * refused at the boundary with a 422 saying so, like any schedule that is not one, when a scheduled task or a
 * LangGraph cron is made or changed; it was a 500 (Effect's `Cron.next` throws when it finds no next date).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Done.",
    config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: ALICE, user: "alice" }] } } }
  })
})
afterAll(() => gateway.stop())

const call = async (method: string, path: string, body: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  return { status: response.status, body: (await response.json()) as any }
}

const task = {
  title: "Monthly report",
  prompt: "Write the monthly report.",
  schedule_type: "cron",
  schedule_spec: { cron: "0 9 1 * *" },
  timezone: "UTC"
}
const cron = {
  assistant_id: "lead_agent",
  schedule: "0 9 1 * *",
  input: { messages: [{ type: "human", content: "hi" }] }
}

describe("a cron schedule that names no date", () => {
  it("is a 422 for a scheduled task, made or changed, and nothing is made", async () => {
    for (const expression of ["0 0 31 2 *", "0 0 30 2 *", "0 9 31 4,6,9,11 *"]) {
      const made = await call("POST", "/api/scheduled-tasks", { ...task, schedule_spec: { cron: expression } })
      assert.strictEqual(made.status, 422, JSON.stringify(made.body))
      assert.match(made.body.detail, /never fires/)
    }
    assert.deepStrictEqual((await (await fetch(`${gateway.url}/api/scheduled-tasks`, {
      headers: { authorization: `Bearer ${ALICE}` }
    })).json()), [])
    const good = await call("POST", "/api/scheduled-tasks", task)
    assert.strictEqual(good.status, 200, JSON.stringify(good.body))
    const changed = await call("PATCH", `/api/scheduled-tasks/${good.body.id}`, {
      schedule_spec: { cron: "0 0 31 2 *" }
    })
    assert.strictEqual(changed.status, 422, JSON.stringify(changed.body))
    assert.match(changed.body.detail, /never fires/)
  })

  it("is a 422 for a LangGraph cron, made or changed", async () => {
    const made = await call("POST", "/runs/crons", { ...cron, schedule: "0 0 31 2 *" })
    assert.strictEqual(made.status, 422, JSON.stringify(made.body))
    assert.match(made.body.detail, /schedule: .*never fires/)
    const good = await call("POST", "/runs/crons", cron)
    assert.strictEqual(good.status, 200, JSON.stringify(good.body))
    const changed = await call("PATCH", `/runs/crons/${good.body.cron_id}`, { schedule: "0 0 30 2 *" })
    assert.strictEqual(changed.status, 422, JSON.stringify(changed.body))
    assert.match(changed.body.detail, /never fires/)
  })
})
