import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as R from "../../src/state/Reducers.js"
import * as TS from "../../src/state/ThreadState.js"

// task ids from a small pool, so that lists repeat a task
const taskArb: FC.Arbitrary<TS.BackgroundTask> = FC.tuple(
  Arbitrary.make(TS.BackgroundTask),
  FC.integer({ min: 1, max: 30 })
).map(([task, n]) => ({ ...task, task_id: `mcp-task-${n}` }))
const listArb = FC.array(taskArb, { maxLength: 40 })
const existingArb = FC.option(listArb, { nil: undefined })
const isValid = Schema.is(Schema.Array(TS.BackgroundTask))

describe("background_tasks reducer (DeerFlow's last value, bounded)", () => {
  it.prop("null and absent keep what is there (same array)", [existingArb], ([existing]) => {
    assert.strictEqual(R.mergeBackgroundTasks(existing, null), existing)
    assert.strictEqual(R.mergeBackgroundTasks(existing, undefined), existing)
  })

  it.prop("a list replaces what is there, whatever it was", [existingArb, listArb], ([existing, incoming]) => {
    assert.deepStrictEqual(R.mergeBackgroundTasks(existing, incoming), R.mergeBackgroundTasks(undefined, incoming))
  })

  it.prop(
    "each task once (its first entry), in order, at most 20, Schema-valid",
    [existingArb, listArb],
    ([existing, incoming]) => {
      const merged = R.mergeBackgroundTasks(existing, incoming)!
      assert.isTrue(isValid(merged))
      assert.isAtMost(merged.length, TS.MAX_BACKGROUND_TASKS)
      assert.strictEqual(new Set(merged.map((task) => task.task_id)).size, merged.length)
      const firsts = incoming.filter((task, i) => incoming.findIndex((t) => t.task_id === task.task_id) === i)
      assert.deepStrictEqual(merged, firsts.slice(0, TS.MAX_BACKGROUND_TASKS))
    }
  )

  it.prop("is idempotent", [existingArb, listArb], ([existing, incoming]) => {
    const once = R.mergeBackgroundTasks(existing, incoming)
    assert.deepStrictEqual(R.mergeBackgroundTasks(once, once), once)
  })

  it.prop("through applyUpdate: the state stays Schema-valid and other fields are untouched", [listArb], ([tasks]) => {
    const next = R.applyUpdate(TS.empty, { background_tasks: tasks })
    assert.isTrue(Either.isRight(next))
    const state = Either.getOrThrow(next)
    assert.isTrue(Schema.is(TS.ThreadState)(state))
    assert.deepStrictEqual({ ...state, background_tasks: undefined }, { ...TS.empty, background_tasks: undefined })
    assert.strictEqual(Either.getOrThrow(R.applyUpdate(state, { background_tasks: null })), state)
  })

  it("a thread that never had tasks has no background_tasks key (as DeerFlow's NotRequired)", () => {
    assert.isFalse("background_tasks" in TS.empty)
    const decoded = Schema.decodeUnknownSync(TS.ThreadState)(TS.empty)
    assert.isFalse("background_tasks" in decoded)
    assert.throws(() =>
      Schema.decodeUnknownSync(TS.ThreadState)({
        ...TS.empty,
        background_tasks: [{ task_id: "t", task_name: "n", status: "done", updated_at: "x" }]
      })
    )
  })
})
