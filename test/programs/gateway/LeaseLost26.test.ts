/**
 * A gateway run whose thread's lease another process took (this one stalled past the lease's life) stops at once,
 * at the renewal that finds it taken: its tool call in progress is interrupted (its command's process killed), and
 * it calls the model and its tools no more. Before, it went on until its next checkpoint: the command ran to its
 * end, beside the run that now owned the thread, and the model was asked for the next step. Then:
 * - another process resumed THIS run (same run id): the run writes nothing here, as a handed-over run (its record
 *   stays `running` for its new runner, its lease is not given back, nothing is checkpointed); the stream of a
 *   client following it here ends as a handed-over run's does, without `end`;
 * - another run took the thread: the run ends `error`, naming the run and the process that took it; its stream ends
 *   with `error` then `end`, its journal with `run.error` and its receipt, its tool call answered "interrupted"
 *   (paired); nothing is written to the thread, which stays readable and takes its next run.
 * Over HTTP, the real `openai` client, a real bash command; the store's lease taken by the test between renewals
 * (the renewer's real 10 s period).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Run from "../../../src/programs/Run.js"
import type { LeaseHolder } from "../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import { paired, running, startRun as leaseRun, twoCommands } from "../../support/leaseRuns.js"
import { until } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"


/** The label a test gave a run (its human message), as the model sees it. */
const labelOf = (body: ChatRequestBody): string => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  return /\blost-(same|other)\b/.exec(asked)?.[0] ?? ""
}

/** A command's sleep, unique to its run, found among the processes while it runs. */
const sleepOf = (label: string) => (label === "lost-same" ? "sleep 25.71" : "sleep 25.73")

const script = twoCommands(labelOf, sleepOf)

/** Runs whose lease renewals find their lease held by their own run id under another process (a resumption). */
const resumedElsewhere = new Map<string, LeaseHolder>()
/** The thread (as stored) of each run, as its lease says it; the runs whose lease was given back. */
const threadOf = new Map<string, string>()
const released = new Set<string>()
let inner: ThreadStore["Type"] | undefined

const wrap = (configured: ThreadStore["Type"]): ThreadStore["Type"] => {
  inner = configured
  return ThreadStore.of({
    ...configured,
    acquireLease: (request) =>
      Effect.suspend(() => {
        threadOf.set(request.runId, request.threadId)
        const taken = resumedElsewhere.get(request.runId)
        return taken !== undefined ? Effect.succeed(taken) : configured.acquireLease(request)
      }),
    releaseLease: (threadId, runId) =>
      Effect.zipRight(Effect.sync(() => released.add(runId)), configured.releaseLease(threadId, runId))
  })
}

let gateway: TestGateway
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({ script, wrapStore: wrap, config: { sandbox: { allow_host_bash: true } } })
})
afterAll(() => gateway?.stop())

/** A streamed run of `label` on a new thread, once its command started. */
const startRun = (label: string) => leaseRun(gateway, label, sleepOf, threadOf)

/** The model calls made for `label` so far. */
const callsOf = (label: string) => gateway.scripted.requests.filter((body) => labelOf(body) === label).length

describe("a gateway run whose thread's lease another process took while its command ran", () => {
  it("stops at once in both cases: taken over by its own resumption, or by another run", async () => {
    const [same, other] = await Promise.all([startRun("lost-same"), startRun("lost-other")])
    const calls = { same: callsOf("lost-same"), other: callsOf("lost-other") }
    const stateBefore = (await api("GET", `/threads/${same.thread}/state`)).json()
    const otherBefore = (await api("GET", `/threads/${other.thread}/state`)).json()
    // another process resumed `same` under its own id; another run took `other`'s thread (this process's lease on
    // it lapsed: the other process's clock is past its end)
    const elsewhere = "elsewhere-host:4242"
    resumedElsewhere.set(same.runId, { run_id: same.runId, owner: elsewhere, expires_at: Date.now() + 60_000 })
    const otherThread = threadOf.get(other.runId)!
    const took = await Effect.runPromise(inner!.acquireLease({
      threadId: otherThread,
      runId: "run-that-took-it",
      ttlMs: Run.LEASE_TTL_MS * 10,
      now: Date.now() + Run.LEASE_TTL_MS + 1
    }))
    assert.isUndefined(took)
    const lostAt = Date.now()
    const [sameEnd, otherEnd] = await Promise.all([same.stream, other.stream])

    // both stopped at the next renewal (a third of the lease's life), not when their command ended
    for (const end of [sameEnd, otherEnd]) {
      assert.isBelow(end.endedAt - lostAt, Run.LEASE_TTL_MS / 3 + 8_000, "stopped at the renewal that found it")
    }
    await until(() => !running(sleepOf("lost-same")) && !running(sleepOf("lost-other")), "the commands killed", 100)
    for (const run of [same, other]) {
      assert.isFalse(Fs.existsSync(Path.join(run.workspace, "after.txt")), "the command did not go on")
      assert.isFalse(Fs.existsSync(Path.join(run.workspace, "second.txt")), "the second command never ran")
    }
    assert.strictEqual(callsOf("lost-same"), calls.same, "the model was not asked again")
    assert.strictEqual(callsOf("lost-other"), calls.other, "the model was not asked again")

    // taken over by its own resumption elsewhere: nothing written here, as a handed-over run
    assert.isFalse(sameEnd.events.some((e) => e.event === "end" || e.event === "error"), "cut as a handover's")
    const sameRecord = (await api("GET", `/threads/${same.thread}/runs/${same.runId}`)).json()
    assert.strictEqual(sameRecord.status, "running", "left to its new runner")
    assert.isFalse(released.has(same.runId), "the lease its new runner holds is not given back")
    const stateAfter = (await api("GET", `/threads/${same.thread}/state`)).json()
    assert.deepStrictEqual(stateAfter.values.messages, stateBefore.values.messages, "nothing checkpointed")

    // another run took the thread: it ends `error`, naming that run and its process
    const names = (text: string) => text.includes("run-that-took-it") && text.includes(":")
    const errors = otherEnd.events.filter((e) => e.event === "error")
    assert.strictEqual(errors.length, 1)
    const streamed = errors[0]!.data as { message: string; name: string }
    assert.isTrue(names(streamed.message), streamed.message)
    assert.strictEqual(streamed.name, "LeaseLost")
    assert.strictEqual(otherEnd.events.at(-1)?.event, "end")
    const lastValues = otherEnd.events.filter((e) => e.event === "values").at(-1)!.data as { messages: Array<any> }
    assert.isTrue(lastValues.messages.some((m) => m.type === "tool"), "its command answered")
    assert.isTrue(paired(lastValues.messages), "every tool call of the stream answered")
    const record = (await api("GET", `/threads/${other.thread}/runs/${other.runId}`)).json()
    assert.strictEqual(record.status, "error")
    assert.isTrue(names(String(record.error)), String(record.error))
    // its journal ends as a failed run's: its error, then its receipt
    const journal = (await api("GET", `/api/threads/${other.thread}/runs/${other.runId}/events`)).json() as Array<any>
    assert.deepStrictEqual(journal.slice(-2).map((e) => e.event_type), ["run.error", "run.delivery"])
    assert.isTrue(names(String(journal.at(-2).content)))
    assert.strictEqual(journal.at(-2).metadata.error_type, "LeaseLost")
    // nothing written to the thread beside the run that took it; readable, and its next run answers the call the
    // lost run left open (a run answers those first)
    const state = await api("GET", `/threads/${other.thread}/state`)
    assert.strictEqual(state.status, 200, "the thread is readable")
    assert.deepStrictEqual(state.json().values.messages, otherBefore.values.messages, "nothing checkpointed")
    await Effect.runPromise(inner!.releaseLease(otherThread, "run-that-took-it"))
    const next = await api("POST", `/threads/${other.thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "And now?" }] }
    })
    assert.strictEqual(next.status, 200, next.text)
    const after = (await api("GET", `/threads/${other.thread}/state`)).json().values.messages as Array<any>
    assert.isTrue(paired(after), "no tool call left unanswered in the thread")
    assert.include(JSON.stringify(after.filter((m) => m.type === "tool")), "interrupted")
  }, 90_000)
})
