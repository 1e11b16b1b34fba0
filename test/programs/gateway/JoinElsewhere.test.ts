/**
 * Joining a run this process does not run (`GET /threads/{id}/runs/{run_id}/join`): a run of another process
 * sharing the store, or a cluster's run between two runners (its runner drained, the next one not resumed yet).
 * Its record says `running`: the join waits for its end and answers the thread's final values, as it does for a run
 * of its own, instead of answering at once with what the thread held halfway.
 *
 * The other process is played by the test, writing to the gateway's own store what a process running the run
 * writes: its record, then its step, then its end.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { RunRecord } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello from this process." })
})
afterAll(() => gateway.stop())

const call = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, json: (await response.json()) as any }
}

const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)

/** The run's record as the process running it writes it. */
const elsewhere = (base: RunRecord, runId: string, status: RunRecord["status"]): RunRecord => ({
  ...base,
  run_id: runId,
  status,
  stop_reason: status === "running" ? null : "completed",
  ended_at: status === "running" ? null : new Date().toISOString()
})

describe("joining a run another process runs", () => {
  it("waits for the run's end and answers the thread's final values", async () => {
    const thread = (await call("POST", "/threads", {})).json.thread_id as string
    const first = await call("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "hi" }] }
    })
    assert.strictEqual(first.status, 200)
    const listed = (await call("GET", `/threads/${thread}/runs`)).json as Array<any>
    const own = (await run(gateway.store.runs({ runId: listed[0].run_id })))[0]!

    const runId = "run-of-another-process"
    await run(gateway.store.saveRun(elsewhere(own, runId, "running")))
    let answered: { status: number; json: any } | undefined
    const join = call("GET", `/threads/${thread}/runs/${runId}/join`).then((response) => (answered = response))

    // the other process is still running it: no answer yet
    await new Promise((resolve) => setTimeout(resolve, 1500))
    assert.isUndefined(answered, "the join answered while the run was running")

    // its step, then its end
    await run(gateway.store.append(own.thread_id, runId, [{
      messages: [M.human("and again"), M.ai("Hello from the other process.")]
    }]))
    await run(gateway.store.saveRun(elsewhere(own, runId, "success")))
    const response = await join
    assert.strictEqual(response.status, 200)
    assert.deepStrictEqual(
      Support.visible(response.json.messages).map((m: any) => m.content),
      ["hi", "Hello from this process.", "and again", "Hello from the other process."]
    )
  })

  it("answers at once for a run that has ended, and 404 for one the thread does not have", async () => {
    const thread = (await call("POST", "/threads", {})).json.thread_id as string
    await call("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "hi" }] }
    })
    const listed = (await call("GET", `/threads/${thread}/runs`)).json as Array<any>
    const joined = await call("GET", `/threads/${thread}/runs/${listed[0].run_id}/join`)
    assert.strictEqual(joined.status, 200)
    assert.strictEqual(Support.visible(joined.json.messages).at(-1).content, "Hello from this process.")
    const missing = await call("GET", `/threads/${thread}/runs/no-such-run/join`)
    assert.strictEqual(missing.status, 404)
  })

  // DeerFlow's join_run / stream_existing_run: a run another worker holds (store_only) on a bridge that is not
  // cross-process is a 409 its app recognises ("not active on this worker", "cannot be streamed") and ends quietly
  it("its stream is a 409 naming it, not a gap DeerFlow's app would rejoin until it gives up", async () => {
    const thread = (await call("POST", "/threads", {})).json.thread_id as string
    await call("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "hi" }] }
    })
    const listed = (await call("GET", `/threads/${thread}/runs`)).json as Array<any>
    const own = (await run(gateway.store.runs({ runId: listed[0].run_id })))[0]!
    const runId = "run-streamed-elsewhere"
    await run(gateway.store.saveRun(elsewhere(own, runId, "running")))
    for (const headers of [{}, { "Last-Event-ID": "4" }]) {
      const response = await fetch(`${gateway.url}/threads/${thread}/runs/${runId}/stream`, {
        headers,
        signal: AbortSignal.timeout(10_000)
      })
      assert.strictEqual(response.status, 409)
      const problem = (await response.json()) as any
      assert.strictEqual(problem.detail, `Run ${runId} is not active on this worker and cannot be streamed`)
    }
    await run(gateway.store.saveRun(elsewhere(own, runId, "success")))
  })
})
