/**
 * A run's `rollback` at its end, and the undoing of an edit's run that failed, are fenced by the run's lease on its
 * thread, as its checkpoints are: a run whose thread another run took between its last look at its lease and that
 * delete deletes nothing. The other run's step stays the thread's last, the stopped run's own steps stay under it,
 * and the run's record says what was not done and which run holds the thread. Before, the delete went through:
 * the run's steps were removed from under the new owner's, and its record said "Rolled back by user".
 * Over HTTP, SQLite, the memory store and PostgreSQL; the run held at a gate just before its store's rollback, while
 * the test takes the lease as another run (its clock past the run's lease) and writes that run's step.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import { gatewayOf, KINDS, NEW_ANSWER, OTHER, takeThread } from "../../support/leaseFence.js"
import * as Postgres from "../../support/postgres.js"
import { eventually } from "../../support/poll.js"
import type { Answer } from "../../support/requests.js"
import * as Support from "./support.js"

const pg = await Postgres.forFile("LeaseFencedRollback29")

const lastUser = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")

/** A question with "hang" hangs; one with "qbroken" is refused (not retried); any other is answered. */
const script = (body: ChatRequestBody): Turn => {
  if (lastUser(body).includes("qbroken")) {
    return { status: 400, body: { error: { message: "the model refuses this", type: "invalid_request_error" } } }
  }
  return lastUser(body).includes("hang") ? { content: "working", stall: true } : "Answered."
}

describe.each(KINDS)("a run's rollback after another run took its thread (%s)", (kind) => {
  /** The next rollback waits at `hold` (once), when armed. */
  let armed = false
  let hold = gate()
  let held: { readonly threadId: string; readonly runId: string } | undefined

  const wrap = (base: ThreadStore["Type"]): ThreadStore["Type"] => {
    return ThreadStore.of({
      ...base,
      rollback: (threadId, runId, options) =>
        Effect.zipRight(
          Effect.suspend(() => {
            if (!armed) return Effect.void
            armed = false
            held = { threadId, runId }
            return hold.wait
          }),
          base.rollback(threadId, runId, options)
        )
    })
  }

  const { api, gateway: gatewayNow, skip, store } = gatewayOf(kind, pg, { script, wrap, release: () => hold.release() })

  /**
   * Sends `request` with the next rollback held; meanwhile another run takes the thread (the held run's lease
   * lapsed: that run's clock is an hour ahead) and writes its step under its lease. Answers the request's answer
   * and where the rollback was held.
   */
  const stalled = async (request: () => Promise<Answer>) => {
    hold = gate()
    held = undefined
    armed = true
    const answer = request()
    const early = await Promise.race([hold.entered.then(() => undefined), answer])
    if (early !== undefined) assert.fail(`answered before it rolled back: ${early.status} ${early.text}`)
    const at = held!
    await takeThread(store(), at.threadId, Date.now() + 60 * 60_000, "the other run took the thread")
    hold.release()
    return { answer: await answer, at }
  }

  /** The other run's step last, the held run's steps kept; its record's error as stored; the other's lease given back. */
  const keptAfter = async (at: { readonly threadId: string; readonly runId: string }, own: string) => {
    const checkpoints = await Effect.runPromise(store().checkpoints(at.threadId))
    assert.strictEqual(checkpoints.at(-1)?.run_id, OTHER, "the other run's step is the thread's last")
    assert.isTrue(checkpoints.some((c) => c.run_id === at.runId), "the held run's steps are kept")
    assert.include(JSON.stringify(checkpoints), own)
    const loaded = await Effect.runPromise(store().load(at.threadId))
    assert.strictEqual(loaded._tag, "Some")
    if (loaded._tag === "Some") assert.strictEqual(loaded.value.state.messages.at(-1)?.content, NEW_ANSWER)
    const record = await eventually(async () => {
      const [stored] = await Effect.runPromise(store().runs({ runId: at.runId }))
      return stored !== undefined && stored.status !== "running" && stored.status !== "pending" ? stored : undefined
    }, "the run's record settled", { tries: 400, everyMs: 25 })
    await Effect.runPromise(store().releaseLease(at.threadId, OTHER))
    return record
  }

  it.skipIf(skip)("a client's rollback: nothing deleted, its record says why", async () => {
    const thread = (await api("POST", "/threads", {})).json().thread_id as string
    const asked = gatewayNow().scripted.requests.length
    const run = await api("POST", `/threads/${thread}/runs`, { input: Support.userInput("hang on, then undo") })
    assert.strictEqual(run.status, 200, run.text)
    const runId = run.json().run_id as string
    await eventually(async () => gatewayNow().scripted.requests.length > asked || undefined, "the model asked", {
      tries: 400,
      everyMs: 25
    })
    const { answer, at } = await stalled(() =>
      api("POST", `/threads/${thread}/runs/${runId}/cancel?wait=true&action=rollback`)
    )
    assert.strictEqual(answer.status, 204, answer.text)
    assert.strictEqual(at.runId, runId)
    const record = await keptAfter(at, "hang on, then undo")
    assert.strictEqual(record.status, "error")
    assert.include(record.error ?? "", "Rollback asked by user was not done")
    assert.include(record.error ?? "", `run ${OTHER}`)
    assert.include(record.error ?? "", "its steps were not rolled back")
  }, 60_000)

  it.skipIf(skip).each(["wait", "stream"])("a failed edit's undoing: nothing deleted, its record says why (runs/%s)", async (how) => {
    const thread = `edit-${how}-${kind}`
    assert.strictEqual((await api("POST", "/api/threads", { thread_id: thread })).status, 200)
    const first = await api("POST", `/api/threads/${thread}/runs/wait`, { input: Support.userInput("qone") })
    assert.strictEqual(first.status, 200, first.text)
    const messages = (await api("GET", `/api/threads/${thread}/state`)).json().values.messages as Array<any>
    const question = Support.visible(messages).find((m: any) => m.type === "human")
    const prepared = await api("POST", `/api/threads/${thread}/runs/edit-regenerate/prepare`, {
      human_message_id: question.id,
      replacement_text: "qbroken edited"
    })
    assert.strictEqual(prepared.status, 200, prepared.text)
    const body = prepared.json()
    const { answer, at } = await stalled(() =>
      api("POST", `/api/threads/${thread}/runs/${how}`, {
        assistant_id: "lead_agent",
        input: body.input,
        checkpoint: body.checkpoint,
        metadata: body.metadata
      })
    )
    assert.strictEqual(answer.status, 200, answer.text)
    // the wait's `__error__`, or the stream's `error` event, says it as the run's record does (sweep 30: they said
    // only why the run failed)
    const said = how === "wait"
      ? answer.json().__error__
      : JSON.parse(answer.text.split("event: error\ndata: ")[1]!.split("\n")[0]!)
    assert.include(said.message, "the model refuses this")
    assert.include(said.message, "The failed edit was not undone")
    assert.include(said.message, `run ${OTHER}`)
    const record = await keptAfter(at, "qbroken edited")
    assert.strictEqual(record.status, "error")
    assert.include(record.error ?? "", "The failed edit was not undone")
    assert.include(record.error ?? "", `run ${OTHER}`)
    assert.strictEqual(said.message, record.error)
  }, 60_000)
})
