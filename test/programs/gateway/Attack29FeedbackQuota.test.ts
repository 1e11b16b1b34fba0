/**
 * Attack round 29 on the storage quotas through a run's feedback. A run's ratings are kept in its record (its
 * metadata), which counts against `gateway.quotas.max_thread_bytes` and `max_thread_bytes_per_user` as the thread's
 * runs do; but a rating was written without being admitted: a user past their quota, whose runs and state updates
 * were refused, still added 100 ratings of a 10,000-character comment to each of their runs (some 3 MB a run of
 * characters of three bytes), so the database kept for them as much as their runs numbered, past every quota. Now a
 * rating that grows the run's record is admitted as the thread's other writes are: past a quota it is a 403 naming
 * it, nothing kept. On SQLite; the model is SCRIPTED (the real `openai` client against a loopback server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024
const LIMIT = 256 * KiB

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: { gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes: LIMIT } } }
  })
}, 60_000)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const alice = Requests.as(() => gateway, Support.ALICE)

/** A comment of 10,000 characters of three UTF-8 bytes each (the most a comment may hold). */
const comment = "€".repeat(10_000)

describe("feedback past the storage quotas", () => {
  it("a rating that would pass max_thread_bytes is a 403 naming it, and the thread keeps no more than its bound", async () => {
    const thread = (await alice("POST", "/threads", {})).json().thread_id as string
    const run = await alice("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("hello")
    })
    assert.strictEqual(run.status, 200, run.text)
    const [record] = (await alice("GET", `/threads/${thread}/runs`)).json() as Array<any>
    const path = `/api/threads/${thread}/runs/${record.run_id}/feedback`
    const answers: Array<Requests.Answer> = []
    for (let i = 0; i < 100; i++) {
      const answer = await alice("POST", path, { rating: i % 2 === 0 ? 1 : -1, comment })
      answers.push(answer)
      if (answer.status !== 200) break
    }
    const refused = answers.at(-1)!
    assert.strictEqual(refused.status, 403, `${answers.length} ratings kept: ${refused.text.slice(0, 300)}`)
    assert.match(refused.json().detail, /^Thread storage quota reached: this thread of user alice keeps \d+ bytes/)
    assert.include(refused.json().detail, "gateway.quotas.max_thread_bytes")
    // what the thread keeps stays within the bound (the refused rating kept nothing)
    const stored = (target: TestGateway) =>
      Effect.runPromise(Effect.flatMap(
        target.store.runs({ runId: record.run_id }),
        ([found]) => Effect.map(target.store.bytesOf(found!.thread_id), (bytes) => bytes?.bytes ?? 0)
      ))
    assert.isAtMost(await stored(gateway), LIMIT)
    const listed = (await alice("GET", path)).json() as Array<unknown>
    assert.strictEqual(listed.length, answers.length - 1)
  }, 120_000)
})
