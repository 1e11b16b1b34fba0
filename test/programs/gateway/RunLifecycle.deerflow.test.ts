/**
 * DeerFlow's tests of a run's life in its gateway, against `antler serve` (in this process, over the real `openai`
 * client and a SCRIPTED model server). Mirrors test_gateway_run_recovery.py (startup recovery: a run a previous
 * process left running is `error` with `stop_reason` `orphan_recovered` and DeerFlow's message, its thread `error`
 * unless a later run ended otherwise, its stream ended) and test_runtime_lifecycle_e2e.py (a cancelled first turn
 * still titles its thread, whether the cancel waits or not; a rollback restores the thread as before the run) and
 * test_run_worker_rollback.py (a run answered by LLMErrorHandling's fallback is `error`, with its detail; a first
 * run rolled back leaves no checkpoint; an interrupted first turn replaced by another run keeps its title).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as RunRecords from "../../../src/programs/gateway/RunRecords.js"
import * as M from "../../../src/state/Message.js"
import * as Requests from "../../support/requests.js"
import { until } from "../../support/poll.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const RESTARTED = "Gateway restarted before this run reached a durable final state."

describe("a run a previous process left running (test_gateway_run_recovery)", () => {
  let gateway: TestGateway
  const api = Requests.as(() => gateway)
  afterAll(async () => {
    await gateway?.stop()
  })

  it("is error, orphan_recovered; its thread is error unless a later run ended; its join ends", async () => {
    const home = Support.tempDir("antler-df-recovery-")
    gateway = await Support.start({ script: () => "Done.", home })
    assert.strictEqual((await api("POST", "/threads", { thread_id: "crashed" })).status, 200)
    assert.strictEqual((await api("POST", "/threads", { thread_id: "superseded" })).status, 200)
    const later = await api("POST", "/threads/superseded/runs/wait", { input: Support.userInput("again") })
    assert.strictEqual(later.status, 200, later.text)
    // what a process killed mid-run leaves: a step it saved and its run's record still `running`
    const left = (threadId: string, runId: string, at: string) =>
      gateway.store.saveRun({
        ...RunRecords.base(threadId, runId, at),
        status: "running",
        metadata: { assistant_id: "lead_agent" }
      })
    await Effect.runPromise(Effect.gen(function*() {
      yield* gateway.store.append("crashed", "r-crashed", [{ messages: [M.human("half done")] }])
      yield* left("crashed", "r-crashed", new Date().toISOString())
      yield* left("superseded", "r-older", "2026-01-01T00:00:00.000Z")
    }))
    await gateway.stop()

    gateway = await Support.start({ script: () => "Picked up.", home })
    const crashed = (await api("GET", "/threads/crashed/runs/r-crashed")).json()
    assert.deepStrictEqual([crashed.status, crashed.stop_reason, crashed.error], [
      "error",
      "orphan_recovered",
      RESTARTED
    ])
    assert.strictEqual((await api("GET", "/threads/crashed")).json().status, "error")
    const older = (await api("GET", "/threads/superseded/runs/r-older")).json()
    assert.deepStrictEqual([older.status, older.stop_reason], ["error", "orphan_recovered"])
    // DeerFlow's test_sqlite_runtime_does_not_mark_thread_error_when_newer_run_is_success
    assert.strictEqual((await api("GET", "/threads/superseded")).json().status, "idle")

    // a client joining the recovered run is answered at once (DeerFlow publishes its stream's end)
    const joined = await fetch(`${gateway.url}/threads/crashed/runs/r-crashed/join`, {
      signal: AbortSignal.timeout(5_000)
    })
    assert.strictEqual(joined.status, 200)
    const values = (await joined.json()) as any
    assert.deepStrictEqual(Support.visible(values.messages).map((m: any) => m.content), ["half done"])
    const streamed = await fetch(`${gateway.url}/threads/crashed/runs/r-crashed/stream`, {
      signal: AbortSignal.timeout(5_000)
    })
    assert.strictEqual(streamed.status, 200)
    const { events } = await Support.readSse(streamed)
    assert.strictEqual(events.at(-1)?.event, "end")

    // and the thread takes a new run
    const next = await api("POST", "/threads/crashed/runs/wait", { input: Support.userInput("carry on") })
    assert.strictEqual(next.status, 200, next.text)
    assert.strictEqual(next.json().messages.at(-1).content, "Picked up.")
    assert.strictEqual((await api("GET", "/threads/crashed")).json().status, "idle")
  }, 60_000)
})

describe("a cancelled run (test_runtime_lifecycle_e2e)", () => {
  let gateway: TestGateway
  const api = Requests.as(() => gateway)
  beforeAll(async () => {
    gateway = await Support.start({ script: Support.echoOrHang })
  })
  afterAll(async () => {
    await gateway?.stop()
  })

  /** A new thread with a run whose model has been asked `prompt` and hangs. */
  const hanging = async (prompt: string) => {
    const thread = (await api("POST", "/threads", {})).json().thread_id as string
    const asked = gateway.scripted.requests.length
    const run = await api("POST", `/threads/${thread}/runs`, { input: Support.userInput(prompt) })
    assert.strictEqual(run.status, 200, run.text)
    await until(async () => gateway.scripted.requests.length > asked, "the model asked")
    return { thread, runId: run.json().run_id as string }
  }

  const searched = async (thread: string) =>
    (await api("POST", "/threads/search", { limit: 100 })).json().find((t: any) => t.thread_id === thread)

  it("interrupted and waited for, a first turn's thread still gets its title; the thread is idle", async () => {
    const { runId, thread } = await hanging("hang on, plan a week in Lisbon")
    const cancelled = await api("POST", `/threads/${thread}/runs/${runId}/cancel?wait=true&action=interrupt`)
    assert.strictEqual(cancelled.status, 204, cancelled.text)
    assert.strictEqual((await api("GET", `/threads/${thread}/runs/${runId}`)).json().status, "interrupted")
    const info = (await api("GET", `/threads/${thread}`)).json()
    assert.strictEqual(info.status, "idle")
    assert.strictEqual(info.values.title, "hang on, plan a week in Lisbon")
    assert.strictEqual((await searched(thread)).values.title, "hang on, plan a week in Lisbon")
  })

  it("interrupted without waiting (202), it gets its title too", async () => {
    const { runId, thread } = await hanging("hang on, compare three laptops")
    const cancelled = await api("POST", `/threads/${thread}/runs/${runId}/cancel?wait=false&action=interrupt`)
    assert.strictEqual(cancelled.status, 202, cancelled.text)
    await until(async () => (await api("GET", `/threads/${thread}/runs/${runId}`)).json().status === "interrupted",
      "the run interrupted")
    await until(async () => (await searched(thread))?.values?.title === "hang on, compare three laptops",
      "the title listed")
    assert.strictEqual((await api("GET", `/threads/${thread}`)).json().values.title, "hang on, compare three laptops")
  })

  it("rolled back, the run is error and the thread is as before it", async () => {
    const thread = (await api("POST", "/threads", {})).json().thread_id as string
    const seeded = await api("POST", `/threads/${thread}/state`, {
      values: { title: "Before rollback", messages: [{ type: "human", content: "before" }] }
    })
    assert.strictEqual(seeded.status, 200, seeded.text)
    const asked = gateway.scripted.requests.length
    const run = await api("POST", `/threads/${thread}/runs`, { input: Support.userInput("hang on, then undo") })
    const runId = run.json().run_id as string
    await until(async () => gateway.scripted.requests.length > asked, "the model asked")
    const during = (await api("GET", `/threads/${thread}/state`)).json()
    assert.include(JSON.stringify(during.values.messages), "hang on, then undo")

    const rolled = await api("POST", `/threads/${thread}/runs/${runId}/cancel?wait=true&action=rollback`)
    assert.strictEqual(rolled.status, 204, rolled.text)
    assert.strictEqual((await api("GET", `/threads/${thread}/runs/${runId}`)).json().status, "error")
    const after = (await api("GET", `/threads/${thread}/state`)).json()
    assert.strictEqual(after.values.title, "Before rollback")
    assert.deepStrictEqual(Support.visible(after.values.messages).map((m: any) => [m.type, m.content]), [
      ["human", "before"]
    ])
  })
  // test_run_worker_rollback's test_rollback_deletes_thread_when_no_snapshot_exists: a first run rolled back
  // leaves no checkpoint; the thread itself stays, empty
  it("rolled back on a new thread, leaves it with no checkpoint, no title, and usable", async () => {
    const { runId, thread } = await hanging("hang on, first words")
    const rolled = await api("POST", `/threads/${thread}/runs/${runId}/cancel?wait=true&action=rollback`)
    assert.strictEqual(rolled.status, 204, rolled.text)
    const info = await api("GET", `/threads/${thread}`)
    assert.strictEqual(info.status, 200, info.text)
    assert.deepStrictEqual(info.json().values.messages ?? [], [])
    assert.isNotOk(info.json().values.title)
    assert.deepStrictEqual((await api("POST", `/threads/${thread}/history`, { limit: 10 })).json(), [])
    const next = await api("POST", `/threads/${thread}/runs/wait`, { input: Support.userInput("hello again") })
    assert.strictEqual(next.status, 200, next.text)
    assert.deepStrictEqual(Support.visible(next.json().messages).map((m: any) => m.type), ["human", "ai"])
  })
  // test_run_worker_rollback's test_interrupted_title_does_not_overwrite_checkpoint_from_admitted_replacement: the
  // run that replaces an interrupted first turn (multitask_strategy interrupt) keeps its own steps, and the thread
  // keeps the interrupted turn's title
  it("replaced by a run of multitask_strategy interrupt, titles the thread; the new run's turn stays", async () => {
    const { runId, thread } = await hanging("hang on, plan a trip to Porto")
    const replacing = await api("POST", `/threads/${thread}/runs/wait`, {
      input: Support.userInput("make it Lisbon instead"),
      multitask_strategy: "interrupt"
    })
    assert.strictEqual(replacing.status, 200, replacing.text)
    assert.strictEqual((await api("GET", `/threads/${thread}/runs/${runId}`)).json().status, "interrupted")
    const state = (await api("GET", `/threads/${thread}/state`)).json()
    assert.strictEqual(state.values.title, "hang on, plan a trip to Porto")
    const visible = Support.visible(state.values.messages)
    assert.deepStrictEqual(visible.slice(-2).map((m: any) => m.type), ["human", "ai"])
    assert.include(JSON.stringify(visible.at(-1).content), "make it Lisbon instead")
  })
})

describe("a run whose model call failed for good (test_run_worker_rollback)", () => {
  let gateway: TestGateway
  const api = Requests.as(() => gateway)
  beforeAll(async () => {
    const refusal = { error: { message: "Unknown parameter: 'tempreture'.", type: "invalid_request_error" } }
    gateway = await Support.start({ script: () => ({ status: 400, body: refusal }) })
  })
  afterAll(async () => {
    await gateway?.stop()
  })

  // test_run_agent_marks_llm_error_fallback_as_error_status: the fallback answer LLMErrorHandling writes makes
  // the run `error`, its `error` the fallback's `error_detail`
  it("is error, its error the fallback answer's error_detail; the thread is error", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "failing" })).status, 200)
    const run = (await api("POST", "/threads/failing/runs", { input: Support.userInput("hello") })).json()
    await api("GET", `/threads/failing/runs/${run.run_id}/join`)
    const record = (await api("GET", `/threads/failing/runs/${run.run_id}`)).json()
    const last = (await api("GET", "/threads/failing/state")).json().values.messages.at(-1)
    assert.strictEqual(last.additional_kwargs.deerflow_error_fallback, true)
    assert.include(last.additional_kwargs.error_detail, "Unknown parameter: 'tempreture'.")
    assert.deepStrictEqual([record.status, record.error], ["error", last.additional_kwargs.error_detail])
    assert.strictEqual((await api("GET", "/threads/failing")).json().status, "error")
  })
})
