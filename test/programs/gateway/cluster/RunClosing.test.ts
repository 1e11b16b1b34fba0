/**
 * `RunClosing.frames`: how a cluster's follower ends the stream of a run its runner never finished streaming to it,
 * from the run's record, as a stream of one process ends (`RunExecution`): a failed run's `error` (named as its
 * journal's `run.error` names it), a cancelled or rolled-back run's thread values (when the run streams values),
 * then `end`; each numbered after the last id the follower passed on. (The processes themselves:
 * ClusterSettlingStreams.test.ts.)
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as MemoryThreadStore from "../../../../src/layers/MemoryThreadStore.js"
import * as RunClosing from "../../../../src/programs/gateway/cluster/RunClosing.js"
import * as RunRecords from "../../../../src/programs/gateway/RunRecords.js"
import type { RunRecord } from "../../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../../src/services/ThreadStore.js"
import * as M from "../../../../src/state/Message.js"

const ended = (runId: string, fields: Partial<RunRecord>): RunRecord => ({
  ...RunRecords.base("t", runId, "2026-12-07T00:00:00.000Z"),
  ended_at: "2026-12-07T00:01:00.000Z",
  ...fields
})

const shown = (frames: ReadonlyArray<{ readonly id: number; readonly event: string; readonly data: string }>) =>
  frames.map((frame) => [frame.id, frame.event, JSON.parse(frame.data)])

describe("RunClosing.frames", () => {
  it.effect("a failed run: its error, named as its journal names it, then end, after the follower's last id", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      const record = ended("lost", { status: "error", stop_reason: "orphan_recovered", error: "Its runner stopped." })
      yield* store.saveRun(record)
      yield* store.saveRunEvents("t", "lost", [{
        seq: 1,
        event_type: "run.error",
        category: "error",
        content: "Its runner stopped.",
        metadata: { error_type: "RunnerLost" },
        created_at: "2026-12-07T00:01:00.000Z"
      }])
      const error = { message: "Its runner stopped.", name: "RunnerLost", error: "RunnerLost" }
      assert.deepStrictEqual(shown(yield* RunClosing.frames(store, record, 7, ["values"])), [
        [8, "error", error],
        [9, "end", null]
      ])
      // with nothing in its journal: LangGraph's default name
      const bare = ended("bare", { status: "error", error: "It failed." })
      assert.deepStrictEqual(shown(yield* RunClosing.frames(store, bare, 0, ["values"])), [
        [1, "error", { message: "It failed.", name: "Error", error: "Error" }],
        [2, "end", null]
      ])
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.effect("a cancelled or rolled-back run: the thread's values (when it streams values), then end; no error", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      yield* store.append("t", "one", [{ messages: [M.human("one"), M.ai("answer one")] }])
      const contents = (frames: ReadonlyArray<{ readonly event: string; readonly data: string }>) =>
        frames.map((frame) =>
          frame.event === "values"
            ? JSON.parse(frame.data).messages.map((m: { content: string }) => m.content)
            : frame.event
        )
      for (
        const record of [
          ended("cancelled", { status: "cancelled", stop_reason: "cancelled" }),
          ended("rolled", { status: "error", stop_reason: "error", error: RunRecords.ROLLED_BACK })
        ]
      ) {
        assert.deepStrictEqual(contents(yield* RunClosing.frames(store, record, 3, ["values", "messages"])), [
          ["one", "answer one"],
          "end"
        ])
        assert.deepStrictEqual(contents(yield* RunClosing.frames(store, record, 3, ["messages"])), ["end"])
      }
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.effect("a run that succeeded: end alone", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      const record = ended("done", { status: "success", stop_reason: "completed" })
      assert.deepStrictEqual(shown(yield* RunClosing.frames(store, record, 41, ["values"])), [[42, "end", null]])
    }).pipe(Effect.provide(MemoryThreadStore.layer())))
})
