/**
 * The messages page's history folded from a thread's checkpoints (`MessageHistory.fold`), over threads made as the
 * gateway makes them: turns asked, the latest answer regenerated (a fork back to before its question, the question
 * written again under its id), and runs from an older checkpoint (a fork back there). A row's `seq` names one
 * writing of one message for good (the app keeps loaded pages by it), whatever the thread does next; no two rows
 * share one; the history is in the state's order; and a regenerate's fork keeps what it took back aside.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Fork from "../../../src/programs/gateway/Fork.js"
import * as MessageHistory from "../../../src/programs/gateway/MessageHistory.js"
import type { CheckpointRecord } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import type { StateUpdate } from "../../../src/state/ThreadState.js"
import * as TS from "../../../src/state/ThreadState.js"

type Op =
  | { readonly _tag: "ask" }
  | { readonly _tag: "regenerate" }
  | { readonly _tag: "back"; readonly to: number }

/** A thread's checkpoints, written as the gateway's runs write them. */
class Thread {
  readonly records: Array<CheckpointRecord> = []
  private runs = 0

  private write(runId: string, updates: ReadonlyArray<StateUpdate>) {
    const seq = this.records.length + 1
    this.records.push({ seq, run_id: runId, created_at: new Date(seq * 1000).toISOString(), updates })
  }

  private fold() {
    return Either.getOrThrow(MessageHistory.fold(this.records))
  }

  private forkTo(runId: string, seq: number) {
    const target = seq === Fork.BEFORE_FIRST ? undefined : Fork.stateAfter(this.records, seq)
    const current = Fork.stateAfter(this.records, Number.MAX_SAFE_INTEGER)
    const to = target === undefined ? TS.empty : Either.getOrThrow(target)
    const updates = Fork.resetUpdates(Either.getOrThrow(current), to)
    if (updates.length > 0) this.write(runId, updates)
  }

  run(op: Op) {
    const runId = `r${++this.runs}`
    if (op._tag === "ask") {
      this.write(runId, [{ messages: [M.human(`question of ${runId}`)] }])
      this.write(runId, [{ messages: [M.ai(`answer of ${runId}`)] }])
      return runId
    }
    if (op._tag === "back") {
      if (this.records.length > 0) this.forkTo(runId, this.records[op.to % this.records.length]!.seq)
      return runId
    }
    // the latest answer regenerated, as handlers/Branches prepares it and the run makes it
    const { state, origin } = this.fold()
    const at = state.messages.findLastIndex((m) => m.type === "ai")
    const question = state.messages.slice(0, Math.max(at, 0)).findLast((m) => m.type === "human")
    if (at < 0 || question === undefined) return runId
    const first = origin.get(question.id)!.index
    this.forkTo(runId, first > 0 ? this.records[first - 1]!.seq : Fork.BEFORE_FIRST)
    this.write(runId, [{ messages: [question] }])
    this.write(runId, [{ messages: [M.ai(`answer of ${runId}`)] }])
    return runId
  }

  /** The history, the dropped messages and the state. */
  rows() {
    return this.fold()
  }
}

const op: FC.Arbitrary<Op> = FC.oneof(
  FC.constant({ _tag: "ask" as const }),
  FC.constant({ _tag: "regenerate" as const }),
  FC.nat({ max: 40 }).map((to) => ({ _tag: "back" as const, to }))
)

describe("MessageHistory.fold", () => {
  it("a regenerate's fork keeps the turn it took back aside; the question is written anew under it", () => {
    const thread = new Thread()
    const asked = thread.run({ _tag: "ask" })
    const again = thread.run({ _tag: "regenerate" })
    const { history, dropped } = thread.rows()
    assert.deepStrictEqual(history.map((r) => [r.message.type, r.run_id, r.seq]), [
      ["human", again, 3],
      ["ai", again, 4]
    ])
    assert.deepStrictEqual(dropped.map((r) => [r.message.type, r.run_id, r.seq, r.by]), [
      ["human", asked, 1, again],
      ["ai", asked, 2, again]
    ])
    assert.strictEqual(history[0]!.message.id, dropped[0]!.message.id)
  })

  it("a run back to a checkpoint before a regenerate: the state's order kept, what went kept aside", () => {
    const thread = new Thread()
    thread.run({ _tag: "ask" })
    thread.run({ _tag: "ask" })
    const again = thread.run({ _tag: "regenerate" })
    // back to the state after the second turn (its answer's checkpoint, the fourth)
    thread.run({ _tag: "back", to: 3 })
    const { history, dropped } = thread.rows()
    // the question stays as the regenerate wrote it; the original answer, which came before it, is written anew
    assert.deepStrictEqual(history.map((r) => r.seq), [1, 2, 5, 7])
    assert.strictEqual(history[2]!.run_id, again)
    assert.deepStrictEqual(dropped.map((r) => r.seq), [3, 4, 6])
  })

  it.prop("a seq names one writing for good; none repeats; the history is in the state's order", [
    FC.array(op, { maxLength: 14 })
  ], ([ops]) => {
    const thread = new Thread()
    const named = new Map<number, string>()
    for (const next of ops) {
      thread.run(next)
      const { history, dropped, state } = thread.rows()
      const all = [...history, ...dropped]
      assert.strictEqual(new Set(all.map((r) => r.seq)).size, all.length, "a seq repeats")
      for (const row of all) {
        const name = `${row.message.id}@${row.run_id}`
        assert.strictEqual(named.get(row.seq) ?? name, name, `seq ${row.seq} renamed`)
        named.set(row.seq, name)
      }
      // (every row named before is still there: in the history, or kept aside)
      assert.strictEqual(all.length, named.size, "a row was lost")
      const seqs = state.messages.map((m) => history.find((r) => r.message.id === m.id)!.seq)
      assert.isTrue(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!), `out of order: ${seqs}`)
    }
  })
})
