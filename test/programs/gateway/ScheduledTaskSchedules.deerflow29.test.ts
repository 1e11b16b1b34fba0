/**
 * DeerFlow's `test_scheduled_task_schedules.py`, through a real gateway: each case of its schedule helpers
 * (`validate_timezone`, `normalize_cron_expression`, `next_run_at`) as a user sees it, in what `POST
 * /api/scheduled-tasks` takes, refuses (422, saying why) and answers as the task's `next_run_at`. A `run_at` without
 * an offset is a wall-clock time in the task's timezone, as a cron's fields are (it was read as UTC).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: () => "Done.", config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)

const task = (fields: Record<string, unknown>) => ({
  title: "Report",
  prompt: "Write the report.",
  schedule_type: "cron",
  schedule_spec: { cron: "0 9 * * *" },
  timezone: "UTC",
  ...fields
})

/** A year after this one, so that a date in it is always ahead. */
const NEXT_YEAR = new Date().getUTCFullYear() + 1

describe("test_scheduled_task_schedules.py", () => {
  it("test_validate_timezone_accepts_iana_name", async () => {
    const created = await alice("POST", "/api/scheduled-tasks", task({ timezone: "Asia/Shanghai" }))
    assert.strictEqual(created.status, 200, created.text)
    assert.strictEqual(created.json().timezone, "Asia/Shanghai")
  })

  it("test_validate_timezone_rejects_unknown_name", async () => {
    const refused = await alice("POST", "/api/scheduled-tasks", task({ timezone: "Mars/Base" }))
    assert.strictEqual(refused.status, 422, refused.text)
    assert.match(refused.json().detail, /Unknown timezone: "Mars\/Base"/)
  })

  it("test_normalize_cron_accepts_five_fields", async () => {
    const created = await alice("POST", "/api/scheduled-tasks", task({ schedule_spec: { cron: "0 9 * * 1" } }))
    assert.strictEqual(created.status, 200, created.text)
    assert.deepStrictEqual(created.json().schedule_spec, { cron: "0 9 * * 1" })
    assert.strictEqual(new Date(created.json().next_run_at).getUTCDay(), 1)
  })

  it("test_normalize_cron_rejects_seconds_field", async () => {
    const refused = await alice("POST", "/api/scheduled-tasks", task({ schedule_spec: { cron: "0 0 9 * * 1" } }))
    assert.strictEqual(refused.status, 422, refused.text)
    assert.match(refused.json().detail, /exactly 5 fields/)
  })

  it("test_next_run_at_for_once_returns_none_after_fire_time", async () => {
    // (DeerFlow's `next_run_at` is None for a time passed; its router, as Antler's, refuses such a task)
    const past = new Date(Date.now() - 3_600_000).toISOString()
    const refused = await alice("POST", "/api/scheduled-tasks", task({ schedule_type: "once", schedule_spec: { run_at: past } }))
    assert.strictEqual(refused.status, 422, refused.text)
    assert.match(refused.json().detail, /must be in the future/)
  })

  it("test_next_run_at_for_once_normalizes_naive_run_at_to_utc", async () => {
    const created = await alice("POST", "/api/scheduled-tasks", task({
      schedule_type: "once",
      schedule_spec: { run_at: `${NEXT_YEAR}-08-01T09:00:00` },
      timezone: "Asia/Shanghai"
    }))
    assert.strictEqual(created.status, 200, created.text)
    // 09:00 in Shanghai is 01:00 UTC; the spec is kept as the user wrote it
    assert.strictEqual(created.json().next_run_at, `${NEXT_YEAR}-08-01T01:00:00.000Z`)
    assert.deepStrictEqual(created.json().schedule_spec, { run_at: `${NEXT_YEAR}-08-01T09:00:00` })
    // a time the clocks skip is read with the offset before the change, as Python's zoneinfo reads it
    const gap = await alice("POST", "/api/scheduled-tasks", task({
      schedule_type: "once",
      schedule_spec: { run_at: `${NEXT_YEAR}-03-${secondSundayOfMarch(NEXT_YEAR)}T02:30:00` },
      timezone: "America/New_York"
    }))
    assert.strictEqual(gap.status, 200, gap.text)
    assert.strictEqual(gap.json().next_run_at, `${NEXT_YEAR}-03-${secondSundayOfMarch(NEXT_YEAR)}T07:30:00.000Z`)
  })

  it("test_next_run_at_for_once_normalizes_aware_run_at_to_utc", async () => {
    const created = await alice("POST", "/api/scheduled-tasks", task({
      schedule_type: "once",
      schedule_spec: { run_at: `${NEXT_YEAR}-08-01T09:00:00+08:00` },
      timezone: "UTC"
    }))
    assert.strictEqual(created.status, 200, created.text)
    assert.strictEqual(created.json().next_run_at, `${NEXT_YEAR}-08-01T01:00:00.000Z`)
  })

  it("test_next_run_at_for_cron_uses_timezone", async () => {
    const created = await alice("POST", "/api/scheduled-tasks", task({ timezone: "Asia/Shanghai" }))
    assert.strictEqual(created.status, 200, created.text)
    assert.match(created.json().next_run_at, /T01:00:00\.000Z$/)
    const next = Date.parse(created.json().next_run_at)
    assert.isAbove(next, Date.now())
    assert.isAtMost(next, Date.now() + 24 * 3_600_000)
  })
})

/** The day of March (two digits) the United States move their clocks forward in `year`. */
function secondSundayOfMarch(year: number): string {
  const first = new Date(Date.UTC(year, 2, 1)).getUTCDay()
  return String(1 + ((7 - first) % 7) + 7).padStart(2, "0")
}
