/**
 * A gateway run's checkpoint is fenced by its lease in the store: a run that found its lease its own, then lost it
 * before its write reached the store (this process stalled past the lease's life, and another run took the thread in
 * between), writes nothing over the new owner's checkpoints. The store refuses the write in the write's own
 * transaction (SQLite: one conditional statement; PostgreSQL: the lease row locked; memory: the same rule), and the
 * run ends as on its lease's loss: `error` (`LeaseLost`, naming the run that took the thread), its stream with
 * `error` then `end`, its record `error`. Before, its answer was written after the new owner's step, and it ended
 * `success`.
 * Over HTTP, the real `openai` client; the stale run held at a gate between its check and its write (its checkpoint's
 * store call waits) while the test takes the lease as another run and writes that run's step.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Run from "../../../src/programs/Run.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import { gatewayOf, KINDS, takeThread } from "../../support/leaseFence.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.forFile("LeaseFencedWrite28")

/** The label a test gave a run (its human message), as the model sees it. */
const labelOf = (body: ChatRequestBody): string => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  return /\bfenced-write-(sqlite|memory|postgres)\b/.exec(asked)?.[0] ?? ""
}

/** What the stale run's model answers. */
const staleAnswer = (label: string) => `The stale answer of ${label}.`

describe.each(KINDS)("a gateway run whose lease is taken between its check and its checkpoint (%s)", (kind) => {
  /** The stale run's checkpoint of its answer waits here; where it was written (thread and run as stored). */
  const hold = gate()
  let held: { readonly threadId: string; readonly runId: string } | undefined

  const wrap = (base: ThreadStore["Type"]): ThreadStore["Type"] => {
    // (held once, before the store call: after the run looked at its lease, before the store reads it)
    const waits = (threadId: string, runId: string, updates: unknown) =>
      Effect.suspend(() => {
        if (held !== undefined || !JSON.stringify(updates).includes(staleAnswer(`fenced-write-${kind}`))) {
          return Effect.void
        }
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

  const { api, gateway: gatewayNow, skip, store } = gatewayOf(kind, pg, {
    script: (body) => (labelOf(body) === "" ? "Next answer." : staleAnswer(labelOf(body))),
    wrap,
    release: () => hold.release()
  })

  it.skipIf(skip)("writes nothing over the new owner's step and ends as on its lease's loss", async () => {
    const gateway = gatewayNow()
    const label = `fenced-write-${kind}`
    const thread = (await api("POST", "/threads", {})).json().thread_id as string
    const response = await fetch(`${gateway.url}/threads/${thread}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: `Please answer ${label}` }] },
        stream_mode: ["values"]
      })
    })
    const stream = Support.readSse(response)
    await hold.entered
    const { threadId, runId } = held!
    // another run took the thread (this process's lease on it lapsed: the other's clock is past its end), and wrote
    // its step under its lease
    await takeThread(store(), threadId, Date.now() + Run.LEASE_TTL_MS + 1)
    hold.release()
    const { events } = await stream

    const errors = events.filter((e) => e.event === "error")
    assert.strictEqual(errors.length, 1, JSON.stringify(events.map((e) => e.event)))
    const streamed = errors[0]!.data as { message: string; name: string }
    assert.strictEqual(streamed.name, "LeaseLost")
    assert.include(streamed.message, "run-that-took-it")
    assert.strictEqual(events.at(-1)?.event, "end")
    const record = (await api("GET", `/threads/${thread}/runs/${runId}`)).json()
    assert.strictEqual(record.status, "error", JSON.stringify(record))
    assert.include(String(record.error), "run-that-took-it")
    // the thread as stored: the new owner's step last, the stale run's answer not written
    const checkpoints = await Effect.runPromise(store().checkpoints(threadId))
    assert.strictEqual(checkpoints.at(-1)?.run_id, "run-that-took-it")
    const messages = (await api("GET", `/threads/${thread}/state`)).json().values.messages as Array<any>
    assert.notInclude(JSON.stringify(messages), staleAnswer(label))
    assert.strictEqual(messages.at(-1)?.content, "The new owner's answer.")
    await Effect.runPromise(store().releaseLease(threadId, "run-that-took-it"))
  }, 60_000)
})
