/**
 * DeerFlow's tests of a run's life in its gateway, against `antler serve` (in this process, over the real `openai`
 * client and a SCRIPTED model server). Mirrors test_gateway_run_recovery.py (startup recovery: a run a previous
 * process left running is `error` with `stop_reason` `orphan_recovered` and DeerFlow's message, its thread `error`
 * unless a later run ended otherwise, its stream ended) and test_runtime_lifecycle_e2e.py (a cancelled first turn
 * still titles its thread, whether the cancel waits or not; a rollback restores the thread as before the run).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as RunRecords from "../../../src/programs/gateway/RunRecords.js"
import * as M from "../../../src/state/Message.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const RESTARTED = "Gateway restarted before this run reached a durable final state."

describe("a run a previous process left running (test_gateway_run_recovery)", () => {
  let gateway: TestGateway
  const api = Requests.as(() => gateway)
  afterAll(async () => {
    await gateway?.stop()
  })

  it("is recorded as error, orphan_recovered; its thread is error unless a later run ended; its join ends", async () => {
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
    assert.deepStrictEqual([crashed.status, crashed.stop_reason, crashed.error], ["error", "orphan_recovered", RESTARTED])
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
    assert.deepStrictEqual(Support.visible(((await joined.json()) as any).messages).map((m: any) => m.content), ["half done"])
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
