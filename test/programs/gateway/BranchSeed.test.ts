/**
 * The checkpoints a branch is seeded with (DeerFlow's test_branch_history_seed): a run id per inherited turn,
 * where a question the user wrote or a hidden answer to a clarification question opens a turn, and the
 * checkpoint before the last turn holds the parent's state before it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as BranchSeed from "../../../src/programs/gateway/BranchSeed.js"
import * as M from "../../../src/state/Message.js"
import { applyUpdates, makeIndexes } from "../../../src/state/Reducers.js"
import * as TS from "../../../src/state/ThreadState.js"

const answer = {
  version: 1,
  kind: "human_input_response",
  source: "ask_clarification",
  request_id: "req-1",
  value: "yes",
  response_kind: "text"
}

const stateOf = (messages: ReadonlyArray<M.Message>, title = "T"): TS.ThreadState => ({ ...TS.empty, messages, title })

const fold = (seeds: ReadonlyArray<BranchSeed.Seed>) =>
  Either.getOrThrow(applyUpdates(TS.empty, seeds.flatMap((s) => s.updates), makeIndexes()))

describe("BranchSeed", () => {
  it("a turn opens at each question and at a hidden clarification answer, with the hidden reminder before it", () => {
    const messages = [
      M.human("reminder", { id: "r1", additional_kwargs: { hide_from_ui: true } }),
      M.human("question", { id: "h1" }),
      M.ai("which one?", { id: "a1" }),
      M.human("yes", { id: "h-answer", additional_kwargs: { hide_from_ui: true, human_input_response: answer } }),
      M.ai("answer", { id: "a2" }),
      M.human("date changed", { id: "r2", additional_kwargs: { hide_from_ui: true } }),
      M.human("again", { id: "h3" }),
      M.ai("answer again", { id: "a3" })
    ]
    const ids = BranchSeed.turns(messages).map((turn) => turn.map((m) => m.id))
    assert.deepStrictEqual(ids, [["r1", "h1", "a1"], ["h-answer", "a2"], ["r2", "h3", "a3"]])
  })

  it("one checkpoint per turn, each under its own run id; the one before the last turn is the parent's base", () => {
    const base = stateOf([M.human("one", { id: "h1" }), M.ai("a", { id: "a1" }), M.human("two", { id: "h2" }),
      M.ai("b", { id: "a2" })])
    const head = { ...stateOf([...base.messages, M.human("three", { id: "h3" }), M.ai("c", { id: "a3" })]),
      todos: [{ content: "x", status: "pending" as const }] }
    const seeds = BranchSeed.seeds("b1", { ...base, todos: [] }, head)
    assert.deepStrictEqual(seeds.map((s) => s.runId), ["branch-seed-b1-1", "branch-seed-b1-2", "branch-seed-b1-3"])
    const beforeLast = fold(seeds.slice(0, 2))
    assert.deepStrictEqual(beforeLast.messages.map((m) => m.id), ["h1", "a1", "h2", "a2"])
    assert.deepStrictEqual(beforeLast.todos, [])
    const all = fold(seeds)
    assert.deepStrictEqual(all.messages.map((m) => m.id), ["h1", "a1", "h2", "a2", "h3", "a3"])
    assert.deepStrictEqual(all.todos, head.todos)
    assert.strictEqual(all.title, "T")
  })

  it("a single turn, or no base, is one checkpoint", () => {
    const head = stateOf([M.human("one", { id: "h1" }), M.ai("a", { id: "a1" })])
    assert.deepStrictEqual(BranchSeed.seeds("b2", undefined, head).map((s) => s.runId), ["branch-seed-b2-1"])
    assert.deepStrictEqual(fold(BranchSeed.seeds("b2", undefined, head)).messages.map((m) => m.id), ["h1", "a1"])
  })
})
