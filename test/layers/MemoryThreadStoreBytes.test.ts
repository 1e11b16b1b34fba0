/**
 * The in-memory store's byte counters (`bytesOf`, `bytesOwned`) are kept as its threads change and settled when
 * asked, not measured over every thread at each question: whatever the writes and deletes, and whenever the
 * questions come between them, a thread's counter is what a measure of it from scratch gives, and an owner's is the
 * sum of their threads'.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import type { RunRecord, ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"

const THREADS = ["a1", "a2", "b1", "cli"] as const
const OWNERS: Record<(typeof THREADS)[number], string | null> = { a1: "alice", a2: "alice", b1: "bob", cli: null }
const RUNS = ["r1", "r2"] as const

const thread = FastCheck.constantFrom(...THREADS)
const runId = FastCheck.constantFrom(...RUNS)
const text = FastCheck.string({ maxLength: 40 })

type Op =
  | { readonly op: "append"; readonly t: (typeof THREADS)[number]; readonly r: string; readonly text: string }
  | { readonly op: "saveRun"; readonly t: (typeof THREADS)[number]; readonly r: string; readonly text: string }
  | { readonly op: "events"; readonly t: (typeof THREADS)[number]; readonly r: string; readonly text: string }
  | { readonly op: "deleteRun" | "rollback"; readonly t: (typeof THREADS)[number]; readonly r: string }
  | { readonly op: "delete" | "ask"; readonly t: (typeof THREADS)[number] }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({ op: FastCheck.constant("append" as const), t: thread, r: runId, text }),
  FastCheck.record({ op: FastCheck.constant("saveRun" as const), t: thread, r: runId, text }),
  FastCheck.record({ op: FastCheck.constant("events" as const), t: thread, r: runId, text }),
  FastCheck.record({ op: FastCheck.constantFrom("deleteRun" as const, "rollback" as const), t: thread, r: runId }),
  FastCheck.record({ op: FastCheck.constantFrom("delete" as const, "ask" as const), t: thread })
)

const record = (threadId: string, id: string, note: string): RunRecord => ({
  run_id: id,
  thread_id: threadId,
  status: "success",
  stop_reason: null,
  started_at: "2026-01-01T00:00:00.000Z",
  ended_at: "2026-01-01T00:00:01.000Z",
  metadata: { note },
  error: note === "" ? null : `failed: ${note}`
})

const bytes = (value: unknown) => (value == null ? 0 : Buffer.byteLength(JSON.stringify(value)))

/** What a thread keeps, measured from what the store gives back. */
const measured = (store: ThreadStore["Type"], threadId: string) =>
  Effect.gen(function*() {
    let total = 0
    for (const checkpoint of yield* store.checkpoints(threadId)) total += bytes(checkpoint.updates)
    for (const run of yield* store.runs({ threadId })) {
      total += bytes(run.metadata) + (run.error == null ? 0 : Buffer.byteLength(run.error))
      const events = yield* store.runEvents(threadId, run.run_id)
      total += events.length === 0 ? 0 : bytes(events)
    }
    return total
  })

const apply = (store: ThreadStore["Type"], step: Op) =>
  Effect.gen(function*() {
    yield* store.ensure(step.t, { owner: OWNERS[step.t] })
    switch (step.op) {
      case "append":
        return yield* store.append(step.t, step.r, [{ messages: [M.human(step.text)] }])
      case "saveRun":
        return yield* store.saveRun(record(step.t, step.r, step.text))
      case "events":
        yield* store.saveRun(record(step.t, step.r, ""))
        return yield* store.saveRunEvents(step.t, step.r, [
          { seq: 1, event_type: "run.start", category: "lifecycle", content: step.text, metadata: {}, created_at: "" }
        ])
      case "deleteRun":
        return yield* Effect.asVoid(store.deleteRun(step.t, step.r))
      case "rollback":
        return yield* Effect.asVoid(store.rollback(step.t, step.r))
      case "delete":
        return yield* Effect.asVoid(store.delete(step.t))
      case "ask":
        return yield* Effect.asVoid(store.bytesOf(step.t))
    }
  })

describe("the in-memory store's byte counters", () => {
  it("equal a measure from scratch, per thread and per owner, whatever the writes and the questions between", () =>
    FastCheck.assert(
      FastCheck.property(FastCheck.array(op, { maxLength: 40 }), (ops) =>
        Effect.runSync(Effect.gen(function*() {
          const store = MemoryThreadStore.make()
          for (const step of ops) yield* apply(store, step)
          const owned = new Map<string | null, number>()
          for (const threadId of THREADS) {
            const found = yield* store.bytesOf(threadId)
            if (found === undefined) continue
            const expected = yield* measured(store, threadId)
            assert.strictEqual(found.bytes, expected, threadId)
            owned.set(found.owner, (owned.get(found.owner) ?? 0) + expected)
          }
          for (const threadId of THREADS) {
            const found = yield* store.bytesOf(threadId)
            if (found !== undefined) assert.strictEqual(found.owned, owned.get(found.owner), `${threadId}'s owner`)
          }
          assert.strictEqual(yield* store.bytesOwned("alice", false), owned.get("alice") ?? 0)
          assert.strictEqual(yield* store.bytesOwned("bob", true), (owned.get("bob") ?? 0) + (owned.get(null) ?? 0))
        }))
      ),
      { numRuns: 300 }
    ))
})
