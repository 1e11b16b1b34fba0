/**
 * The writes to a thread outside a run (a state update, a goal set, a copy, a branch's seed, a run's fork from a
 * checkpoint, a manual compaction) are fenced by their own lease on the thread, as a run's checkpoints are: a writer
 * that took the lease, then stalled past its life while another run took the thread and wrote its step, writes
 * nothing after that step. It answers 409 saying that the thread was taken while it was being saved, and the thread
 * as stored keeps the other run's step last (its answer the last message). Before, the stale write was appended
 * after it (a fork's reset removed the other run's answer; a copy's or a branch's history went on after it; a title,
 * a goal or a summary written over a thread another run owned) and the request answered 200.
 * Over HTTP, SQLite, the memory store and PostgreSQL; the writer held at a gate just before its store call, while
 * the test takes the lease as another run (its clock past any writer's lease) and writes that run's step.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Protocol from "../../../src/programs/gateway/Protocol.js"
import type { StateUpdate } from "../../../src/state/ThreadState.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import { gate } from "../../support/gate.js"
import { gatewayOf, KINDS, NEW_ANSWER, OTHER, takeThread } from "../../support/leaseFence.js"
import * as Postgres from "../../support/postgres.js"
import type { Answer } from "../../support/requests.js"

const pg = await Postgres.forFile("LeaseFencedWriters29")

/** Whether a model request is the manual compaction's summary. */
const isSummary = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "").includes(
    "You are compacting the history"
  )

/** A store call held: which writer's, and where. */
interface Held {
  readonly threadId: string
  readonly runId: string
}

describe.each(KINDS)("a write outside a run whose thread another run took while it stalled (%s)", (kind) => {
  /** The next append this matches waits at `hold` (once). */
  let armed: ((threadId: string, runId: string, updates: ReadonlyArray<StateUpdate>) => boolean) | undefined
  let hold = gate()
  let held: Held | undefined
  /** The threads (as stored) written to so far. */
  const known = new Set<string>()

  const wrap = (base: ThreadStore["Type"]): ThreadStore["Type"] => {
    const waits = (threadId: string, runId: string, updates: ReadonlyArray<StateUpdate>) =>
      Effect.suspend(() => {
        const matches = armed !== undefined && armed(threadId, runId, updates)
        known.add(threadId)
        if (!matches) return Effect.void
        armed = undefined
        held = { threadId, runId }
        return hold.wait
      })
    return ThreadStore.of({
      ...base,
      append: (threadId, runId, updates, options) =>
        Effect.zipRight(waits(threadId, runId, updates), base.append(threadId, runId, updates, options)),
      appendMeasured: (threadId, runId, updates, owner, options) =>
        Effect.zipRight(waits(threadId, runId, updates), base.appendMeasured(threadId, runId, updates, owner, options))
    })
  }

  const { api, skip, store } = gatewayOf(kind, pg, {
    script: (body) => (isSummary(body) ? "## Session intent\nThe stale summary." : "Next answer."),
    wrap,
    release: () => hold.release(),
    // (no automatic trigger: only the manual compaction summarises)
    config: { summarization: { enabled: true, keep: { type: "messages", value: 2 } } }
  })

  const newThread = async () => (await api("POST", "/threads", {})).json().thread_id as string
  const ask = async (thread: string, text: string, more: Record<string, unknown> = {}) =>
    api("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: text }] },
      ...more
    })

  /**
   * Sends `request` with its writer's next append (`matches`) held; meanwhile another run takes the thread the writer
   * writes to, whose lease lapsed (that run's clock is past any writer's lease, a compaction's five minutes too),
   * and writes its step under its lease. Answers the request's answer and where the writer was held.
   */
  const stalled = async (
    matches: (threadId: string, runId: string, updates: ReadonlyArray<StateUpdate>) => boolean,
    request: () => Promise<Answer>
  ): Promise<{ readonly answer: Answer; readonly at: Held }> => {
    hold = gate()
    held = undefined
    armed = matches
    const answer = request()
    // (a writer that answered without writing fails here, saying what it answered)
    const early = await Promise.race([hold.entered.then(() => undefined), answer])
    if (early !== undefined) assert.fail(`answered before it wrote: ${early.status} ${early.text}`)
    const at = held!
    await takeThread(store(), at.threadId, Date.now() + 60 * 60_000, "the other run took the thread")
    hold.release()
    return { answer: await answer, at }
  }

  /** The writer refused (409, saying why), the other run's step last in the thread as stored; its lease given back. */
  const refusedAfter = async ({ answer, at }: { readonly answer: Answer; readonly at: Held }, stale: string) => {
    assert.strictEqual(answer.status, 409, answer.text)
    assert.include(answer.json().detail, "was taken by another run while")
    assert.include(answer.json().detail, "it was not saved")
    const checkpoints = await Effect.runPromise(store().checkpoints(at.threadId))
    assert.strictEqual(checkpoints.at(-1)?.run_id, OTHER, "the other run's step is the thread's last")
    assert.notInclude(JSON.stringify(checkpoints), stale, "the stale write is not stored")
    const loaded = await Effect.runPromise(store().load(at.threadId))
    assert.strictEqual(loaded._tag, "Some")
    if (loaded._tag === "Some") assert.strictEqual(loaded.value.state.messages.at(-1)?.content, NEW_ANSWER)
    await Effect.runPromise(store().releaseLease(at.threadId, OTHER))
  }

  it.skipIf(skip)("a state update", async () => {
    const thread = await newThread()
    const stale = "The stale title"
    const done = await stalled(
      (_, runId) => runId.startsWith(Protocol.UPDATE_WRITER),
      () => api("POST", `/threads/${thread}/state`, { values: { title: stale } })
    )
    await refusedAfter(done, stale)
  }, 60_000)

  it.skipIf(skip)("a goal set", async () => {
    const thread = await newThread()
    const stale = "The stale goal"
    const done = await stalled(
      (_, runId) => runId.startsWith(Protocol.UPDATE_WRITER),
      () => api("PUT", `/api/threads/${thread}/goal`, { objective: stale })
    )
    await refusedAfter(done, stale)
    assert.isNull((await api("GET", `/api/threads/${thread}/goal`)).json().goal)
  }, 60_000)

  it.skipIf(skip)("a thread's copy", async () => {
    const thread = await newThread()
    const stale = "The copied title"
    assert.strictEqual((await api("POST", `/threads/${thread}/state`, { values: { title: stale } })).status, 200)
    const done = await stalled(
      (threadId) => !known.has(threadId),
      () => api("POST", `/threads/${thread}/copy`)
    )
    await refusedAfter(done, stale)
  }, 60_000)

  it.skipIf(skip)("a branch's seed", async () => {
    const thread = await newThread()
    assert.strictEqual((await ask(thread, "Please answer the branch's source")).status, 200)
    const messages = (await api("GET", `/threads/${thread}/state`)).json().values.messages as Array<any>
    const answer = messages.findLast((m) => m.type === "ai")
    const done = await stalled(
      (threadId) => !known.has(threadId),
      () => api("POST", `/api/threads/${thread}/branches`, { message_id: answer.id })
    )
    await refusedAfter(done, "Please answer the branch's source")
  }, 60_000)

  it.skipIf(skip)("a run's fork from a checkpoint", async () => {
    const thread = await newThread()
    assert.strictEqual((await ask(thread, "The first question")).status, 200)
    const done = await stalled(
      (_, __, updates) => JSON.stringify(updates).includes(M.REMOVE_ALL_MESSAGES),
      () => ask(thread, "The forked question", { checkpoint_id: "0" })
    )
    await refusedAfter(done, M.REMOVE_ALL_MESSAGES)
    const messages = (await api("GET", `/threads/${thread}/state`)).json().values.messages as Array<any>
    assert.isTrue(
      messages.some((m) => m.type === "human" && JSON.stringify(m.content).includes("The first question")),
      "the thread was not reset"
    )
  }, 60_000)

  it.skipIf(skip)("a manual compaction", async () => {
    const thread = await newThread()
    for (const text of ["The first question", "The second question"]) {
      assert.strictEqual((await ask(thread, text)).status, 200)
    }
    const done = await stalled(
      (_, runId) => runId.startsWith("compact-"),
      () => api("POST", `/api/threads/${thread}/compact`, {})
    )
    await refusedAfter(done, "The stale summary")
  }, 60_000)
})
