/**
 * A run's start interrupted by its client going away (`RunStart`): between the thread's lease, the run's input
 * reserved against the user's quota (`StorageQuota.Reservations`) and its fiber starting, a disconnect interrupted
 * the request's fiber and left the lease held and the reservation taken for the process's life (the thread busy, the
 * user's quota shrunk). Now that section runs to its end: the run is handed to its fiber or, failing, frees both.
 * The store pauses the run's first record until the client has gone, then fails it; a run of the same size on the
 * same thread is then admitted (a reservation left taken would refuse it, 403) and ends. SQLite; the model is
 * SCRIPTED, the client speaks HTTP.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { StoreError } from "../../../src/services/RunContext.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024

describe("a run's start interrupted by a client disconnect", () => {
  const gateways: Array<TestGateway> = []
  afterAll(() => Promise.all(gateways.map((g) => g.stop())))

  it("frees the thread's lease and the run's reservation: a later run of the same size is admitted", async () => {
    let reached: () => void = () => {}
    const paused = new Promise<void>((resolve) => (reached = resolve))
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    let pausing = true
    const gateway = await Support.start({
      script: () => "ok",
      config: { gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: 80 * KiB } } },
      wrapStore: (store) => ({
        ...store,
        saveRun: (record) => {
          if (!pausing || record.status !== "pending") return store.saveRun(record)
          pausing = false
          return Effect.promise(() => {
            reached()
            return released
          }).pipe(Effect.zipRight(Effect.fail(new StoreError({ operation: "saveRun", message: "store unavailable" }))))
        }
      })
    })
    gateways.push(gateway)
    const request = Requests.as(() => gateway, Support.ALICE)
    const threadId = (await request("POST", "/threads", {})).json().thread_id as string
    // (a run of this input is admitted alone, ~53 KB: its first step, about three copies of it and 4 KiB, and its
    // record's copy; not beside its own reservation left taken, as much again)
    const input = { messages: [{ type: "human", content: "x".repeat(12 * KiB) }] }
    const aborted = new AbortController()
    const first = fetch(`${gateway.url}/threads/${threadId}/runs`, {
      method: "POST",
      headers: { authorization: `Bearer ${Support.ALICE}`, "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input }),
      signal: aborted.signal
    }).catch((error: unknown) => error)
    const early = await Promise.race([paused.then(() => undefined), first])
    if (early instanceof Response) assert.fail(`the first run was answered before its record: ${await early.text()}`)
    aborted.abort()
    assert.instanceOf(await first, Error, "the client went away")
    // (the server learns of the disconnect and interrupts the request's fiber, paused in the store)
    await new Promise((resolve) => setTimeout(resolve, 300))
    release()
    const answer = await request("POST", `/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input })
    assert.strictEqual(answer.status, 200, `the later run is admitted: ${answer.text}`)
    // (admitted: it ran; what it keeps, its input twice and its answer, may pass the quota mid-run, its own affair)
    const runs = (await request("GET", `/threads/${threadId}/runs`)).json() as Array<{ status: string }>
    assert.strictEqual(runs.length, 1, "the interrupted start left no run behind")
    assert.notInclude(["pending", "running"], runs[0]!.status, "the later run ended")
    assert.strictEqual((await request("GET", `/threads/${threadId}/state`)).status, 200)
  })
})
