/**
 * A gateway run whose lease renewals the store does not answer (a stalled database) is fenced as DeerFlow's worker
 * fences its run: once its lease's life, from its last renewal that succeeded, ran out without another, it stops at
 * once, whoever holds its thread now (its command killed, its tool call answered "interrupted", the model not asked
 * again, its second command never run) and writes nothing to its thread. Before, it went on until a renewal found
 * the lease taken, or until its next checkpoint: its command ran to its end, the model was asked for the next step,
 * and its second command ran, beside whatever process then owned the thread. Then:
 * - the store answers again: the run takes its lease back to record its end: `error`, named `LeaseLost`, with
 *   DeerFlow's words ("Lease ownership could not be confirmed before the last confirmed lease expired."); its stream
 *   ends with `error` then `end`, its journal with `run.error` and its receipt; the thread takes its next run;
 * - the store never answers: its stream still ends (`error`, then `end`), and it writes nothing that lasts (its
 *   stored record stays `running` while the store is silent);
 * - stopped by its client, then its lease's life ran out with the store silent: its stream ends, and once the store
 *   answers again its stop is recorded (`interrupted`, its journal's `run.end` too) and its lease given back, with no
 *   other run of the thread; before, its record stayed `running` until a process starting up recovered it.
 * Over HTTP, the real `openai` client, a real bash command, SQLite and the memory store; the lease's life shortened
 * (`RunLease.LeaseTtl`); no timing asserted: the test waits for the command's end and the stream's.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as RunLease from "../../../src/programs/gateway/RunLease.js"
import * as Run from "../../../src/programs/Run.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import type { Started } from "../../support/leaseRuns.js"
import { paired, running, startRun as leaseRun, twoCommands } from "../../support/leaseRuns.js"
import { captureLogs } from "../../support/logs.js"
import { until } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import type { SseEvent, TestGateway } from "./support.js"
import * as Support from "./support.js"

/** The lease's life in this test: renewed every 1.3 s, fenced 4 s after its last renewal that succeeded. */
const TTL_MS = 4_000

/** The label a test gave a run (its human message), as the model sees it. */
const labelOf = (body: ChatRequestBody): string => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  return /\bfence-(answers|silent|stopped|late)-(sqlite|memory)\b/.exec(asked)?.[0] ?? ""
}

/** A command's sleep, unique to its run, found among the processes while it runs. */
const sleepOf = (label: string) =>
  `sleep 27.${
    ["sqlite", "memory"].flatMap((kind) =>
      ["answers", "silent", "stopped", "late"].map((how) => `fence-${how}-${kind}`)
    ).indexOf(label) + 11
  }`

const script = twoCommands(labelOf, sleepOf)

describe.each(["sqlite", "memory"] as const)("a gateway run whose lease renewals the %s store leaves unanswered", (kind) => {
  /** The threads (as stored) whose lease the store does not answer for, until their gate opens. */
  const stalled = new Map<string, ReturnType<typeof gate>>()
  /** The threads (as stored) whose checkpoints wait, until their gate opens. */
  const appending = new Map<string, ReturnType<typeof gate>>()
  const { capture, logged } = captureLogs()
  /** The thread (as stored) of each run, as its lease says it. */
  const threadOf = new Map<string, string>()
  let inner: ThreadStore["Type"] | undefined

  const wrap = (configured: ThreadStore["Type"]): ThreadStore["Type"] => {
    const base = kind === "memory" ? MemoryThreadStore.make() : configured
    inner = base
    return ThreadStore.of({
      ...base,
      acquireLease: (request) =>
        Effect.suspend(() => {
          threadOf.set(request.runId, request.threadId)
          const hold = stalled.get(request.threadId)
          return hold === undefined ? base.acquireLease(request) : Effect.zipRight(hold.wait, base.acquireLease(request))
        }),
      appendMeasured: (threadId, runId, updates, owner, options) =>
        Effect.suspend(() => {
          const hold = appending.get(threadId)
          const append = base.appendMeasured(threadId, runId, updates, owner, options)
          return hold === undefined ? append : Effect.zipRight(hold.wait, append)
        })
    })
  }

  let gateway: TestGateway
  const api = as(() => gateway)

  beforeAll(async () => {
    gateway = await Support.start({
      script,
      wrapStore: wrap,
      config: { sandbox: { allow_host_bash: true } },
      references: Layer.succeed(RunLease.LeaseTtl, TTL_MS),
      logger: capture
    })
  })
  afterAll(() => {
    for (const hold of [...stalled.values(), ...appending.values()]) hold.release()
    return gateway?.stop()
  })

  const startRun = (label: string) => leaseRun(gateway, label, sleepOf, threadOf)

  /** The model calls made for `label` so far. */
  const callsOf = (label: string) => gateway.scripted.requests.filter((body) => labelOf(body) === label).length

  /** The stream's `LeaseLost` error, checked to be its one error, followed by `end` only. */
  const lostError = (events: ReadonlyArray<SseEvent>, runId: string) => {
    const errors = events.filter((e) => e.event === "error")
    assert.strictEqual(errors.length, 1, JSON.stringify(events.map((e) => e.event)))
    const streamed = errors[0]!.data as { message: string; name: string }
    assert.strictEqual(streamed.name, "LeaseLost")
    assert.include(streamed.message, Run.LAPSED_REASON)
    assert.include(streamed.message, runId)
    // (the lease's life as configured here, not the default's 30 s)
    assert.include(streamed.message, `lease's life (${TTL_MS / 1000} s)`)
    assert.deepStrictEqual(events.slice(-2).map((e) => e.event), ["error", "end"])
    const lastValues = events.filter((e) => e.event === "values").at(-1)!.data as { messages: Array<any> }
    const answers = lastValues.messages.filter((m) => m.type === "tool")
    assert.strictEqual(answers.length, 1, "its one command answered")
    assert.include(JSON.stringify(answers[0].content), "interrupted")
    assert.isTrue(paired(lastValues.messages), "every tool call of the stream answered")
  }

  /** The command killed, the second never run, the model not asked again. */
  const stoppedAtOnce = async (run: Started, label: string, calls: number) => {
    await until(() => !running(sleepOf(label)), "the command killed", 400)
    assert.isFalse(Fs.existsSync(Path.join(run.workspace, "after.txt")), "the command did not go on")
    assert.isFalse(Fs.existsSync(Path.join(run.workspace, "second.txt")), "the second command never ran")
    assert.strictEqual(callsOf(label), calls, "the model was not asked again")
  }

  it("stops at once when its lease's life ran out; the store answering again, it records its end", async () => {
    const label = `fence-answers-${kind}`
    const run = await startRun(label)
    const calls = callsOf(label)
    const before = (await api("GET", `/threads/${run.thread}/state`)).json()
    const hold = gate()
    stalled.set(run.stored, hold)
    // its command is killed by the fence, the store still silent (its renewal waits at the gate)
    await hold.entered
    await until(() => !running(sleepOf(label)), "the command killed by the fence", 400)
    stalled.delete(run.stored)
    hold.release()
    const { events } = await run.stream
    await stoppedAtOnce(run, label, calls)
    lostError(events, run.runId)

    const record = (await api("GET", `/threads/${run.thread}/runs/${run.runId}`)).json()
    assert.strictEqual(record.status, "error")
    assert.include(String(record.error), Run.LAPSED_REASON)
    const journal = (await api("GET", `/api/threads/${run.thread}/runs/${run.runId}/events`)).json() as Array<any>
    assert.deepStrictEqual(journal.slice(-2).map((e) => e.event_type), ["run.error", "run.delivery"])
    assert.strictEqual(journal.at(-2).metadata.error_type, "LeaseLost")
    // nothing written to the thread; its next run answers the call the fenced run left open
    const state = await api("GET", `/threads/${run.thread}/state`)
    assert.strictEqual(state.status, 200, "the thread is readable")
    assert.deepStrictEqual(state.json().values.messages, before.values.messages, "nothing checkpointed")
    const next = await api("POST", `/threads/${run.thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "And now?" }] }
    })
    assert.strictEqual(next.status, 200, next.text)
    const after = (await api("GET", `/threads/${run.thread}/state`)).json().values.messages as Array<any>
    assert.isTrue(paired(after), "no tool call left unanswered in the thread")
    assert.include(JSON.stringify(after.filter((m) => m.type === "tool")), "interrupted")
  }, 90_000)

  it("stops at once and ends its stream when the store never answers, writing nothing that lasts", async () => {
    const label = `fence-silent-${kind}`
    const run = await startRun(label)
    const calls = callsOf(label)
    const before = (await api("GET", `/threads/${run.thread}/state`)).json()
    stalled.set(run.stored, gate())
    const { events } = await run.stream
    await stoppedAtOnce(run, label, calls)
    lostError(events, run.runId)
    // its record, its events' end and the thread as the store keeps them (the store writes; only leases stall)
    const records = await Effect.runPromise(inner!.runs({ runId: run.runId }))
    assert.strictEqual(records[0]?.status, "running", "its end is left to the thread's next owner")
    const kept = await Effect.runPromise(inner!.runEvents(run.stored, run.runId))
    assert.isFalse(kept.some((e) => e.event_type === "run.error"), "its end is not in its stored journal")
    const state = await api("GET", `/threads/${run.thread}/state`)
    assert.strictEqual(state.status, 200, "the thread is readable")
    assert.deepStrictEqual(state.json().values.messages, before.values.messages, "nothing checkpointed")
  }, 90_000)

  /**
   * A run stopped by its client whose last checkpoint is held (`checkpoint`) while its lease's renewals are
   * (`renewals`), until its lease's life has run out.
   */
  const stoppedUntilLapsed = async (label: string) => {
    const run = await startRun(label)
    const renewals = gate()
    const checkpoint = gate()
    stalled.set(run.stored, renewals)
    appending.set(run.stored, checkpoint)
    const cancel = await api("POST", `/threads/${run.thread}/runs/${run.runId}/cancel`)
    assert.isBelow(cancel.status, 300, cancel.text)
    // the stopped run's last checkpoint waits while its lease's life runs out
    await checkpoint.entered
    await until(
      () => logged.some((line) => line.includes(run.runId) && line.includes(Run.LAPSED_REASON)),
      "the lease's life ran out"
    )
    return { run, renewals, checkpoint }
  }

  it("stopped by its client before its lease's life ran out, it ends as the stop asked, not as the loss", async () => {
    const label = `fence-stopped-${kind}`
    const { run, renewals, checkpoint } = await stoppedUntilLapsed(label)
    stalled.delete(run.stored)
    appending.delete(run.stored)
    checkpoint.release()
    renewals.release()
    const { events } = await run.stream
    assert.isFalse(events.some((e) => e.event === "error"), JSON.stringify(events.filter((e) => e.event === "error")))
    assert.deepStrictEqual(events.slice(-2).map((e) => e.event), ["values", "end"], "as a stop's stream ends")
    const record = (await api("GET", `/threads/${run.thread}/runs/${run.runId}`)).json()
    assert.strictEqual(record.status, "interrupted", JSON.stringify(record))
    assert.isFalse(Fs.existsSync(Path.join(run.workspace, "second.txt")), "the second command never ran")
  }, 90_000)

  it("stopped by its client, its lease lapsed, the store silent: the stop recorded once it answers", async () => {
    const label = `fence-late-${kind}`
    const { run, renewals, checkpoint } = await stoppedUntilLapsed(label)
    appending.delete(run.stored)
    checkpoint.release()
    // the store still silent on the thread's lease: the stopped run cannot take it back, and its stream ends
    const { events } = await run.stream
    assert.isFalse(events.some((e) => e.event === "error"), JSON.stringify(events.filter((e) => e.event === "error")))
    assert.strictEqual(events.at(-1)?.event, "end")
    const [silent] = await Effect.runPromise(inner!.runs({ runId: run.runId }))
    assert.strictEqual(silent?.status, "running", "not recorded while the store does not answer")
    // the store answers again: the stop is recorded as it asked, with no other run of the thread
    stalled.delete(run.stored)
    renewals.release()
    const readRecord = async () => (await api("GET", `/threads/${run.thread}/runs/${run.runId}`)).json()
    await until(async () => (await readRecord()).status !== "running", "the run's end recorded", 400)
    const record = await readRecord()
    assert.strictEqual(record.status, "interrupted", JSON.stringify(record))
    const journal = (await api("GET", `/api/threads/${run.thread}/runs/${run.runId}/events`)).json() as Array<any>
    const end = journal.find((e) => e.event_type === "run.end")
    assert.strictEqual(end?.metadata.status, "interrupted", JSON.stringify(journal.slice(-3)))
    // its lease given back: the thread takes its next run
    const next = await api("POST", `/threads/${run.thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "And now?" }] }
    })
    assert.strictEqual(next.status, 200, next.text)
    assert.isFalse(Fs.existsSync(Path.join(run.workspace, "second.txt")), "the second command never ran")
  }, 90_000)
})
