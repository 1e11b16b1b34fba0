/**
 * `RunRecords.recover`, as `antler serve` runs it at start: a run a dead process left `running` is recorded as
 * `error` (`orphan_recovered`), and one that replayed an edited question is undone as well (the thread is again
 * as before the edit, as DeerFlow restores a failed edit replay); any other run keeps the steps it completed.
 * `RunRecords.settle`: a run's end the store refuses to keep is said in a warning, as DeerFlow's drain logs it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as RunRecords from "../../../src/programs/gateway/RunRecords.js"
import { StoreError } from "../../../src/services/RunContext.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"

const texts = (store: ThreadStore["Type"], threadId: string) =>
  Effect.map(store.load(threadId), (loaded) =>
    Option.getOrThrow(loaded).state.messages.map((m) => (typeof m.content === "string" ? m.content : "")))

const left = (runId: string, threadId: string, metadata: Record<string, unknown>) => ({
  ...RunRecords.base(threadId, runId, "2026-12-06T00:00:00.000Z"),
  status: "running" as const,
  metadata: { assistant_id: "lead_agent", metadata }
})

describe("RunRecords.recover", () => {
  it.effect("undoes an edit's run a dead process left running; another run keeps its steps", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      for (const threadId of ["edited", "plain"]) {
        yield* store.append(threadId, "first", [{ messages: [M.human("one"), M.ai("answer one")] }])
        yield* store.saveRun({ ...RunRecords.base(threadId, "first", "2026-12-06T00:00:00.000Z"), status: "success" })
      }
      yield* store.append("edited", "edit", [{ messages: [M.human("one, edited")] }])
      yield* store.saveRun(left("edit", "edited", { replay_kind: "edit" }))
      yield* store.append("plain", "next", [{ messages: [M.human("two")] }])
      yield* store.saveRun(left("next", "plain", { replay_kind: "regenerate" }))

      const settled = yield* RunRecords.recover(store)
      assert.deepStrictEqual(settled.map((r) => [r.run_id, r.status, r.error]).sort(), [
        ["edit", "error", RunRecords.SERVER_RESTARTED],
        ["next", "error", RunRecords.SERVER_RESTARTED]
      ])
      assert.deepStrictEqual(yield* texts(store, "edited"), ["one", "answer one"])
      assert.deepStrictEqual(yield* texts(store, "plain"), ["one", "answer one", "two"])
    }).pipe(Effect.provide(MemoryThreadStore.layer())))
})

describe("RunRecords.settle", () => {
  it.effect("a stopped run whose record the store refuses is said in a warning naming the run", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      yield* store.append("t", "stopped", [{ messages: [M.human("one")] }])
      yield* store.saveRun(left("stopped", "t", {}))
      const refusing: ThreadStore["Type"] = {
        ...store,
        saveRun: () => Effect.fail(new StoreError({ operation: "saveRun", message: "store unavailable" }))
      }
      const lines: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          lines.push(`${logLevel.label} ${(Array.isArray(message) ? message : [message]).map(String).join(" ")}`)
        })
      )
      const ended = RunRecords.ending("interrupt", undefined)
      const record = yield* RunRecords.settle(refusing, "t", "stopped", "interrupt", ended).pipe(
        Effect.provide(capture)
      )
      assert.strictEqual(record.status, "cancelled")
      assert.deepStrictEqual(lines, ["WARN Could not persist cancelled status for run stopped: store unavailable"])
      // the store keeps what it had
      assert.strictEqual((yield* RunRecords.latest(store, "stopped"))?.status, "running")
    }).pipe(Effect.provide(MemoryThreadStore.layer())))
})
