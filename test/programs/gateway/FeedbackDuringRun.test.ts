/**
 * A rating given while its run goes is never lost when the run ends: the user's rating (`PUT`) and the ratings given
 * one by one (`POST`) are there after the run's end was written, through a real gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang, config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway?.stop())

const alice = Requests.as(() => gateway, Support.ALICE)

const asked = async (text: string) => {
  for (let i = 0; i < 400 && !gateway.scripted.requests.some((r) => JSON.stringify(r).includes(text)); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe("feedback given while the run goes", () => {
  it("a rating during a run, then the run ends: the rating is there", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "going" })).status, 200)
    const input = { messages: [{ type: "human", content: "hang on a moment" }] }
    const run = await alice("POST", "/api/threads/going/runs", { input })
    assert.strictEqual(run.status, 200, run.text)
    const runId = run.json().run_id as string
    await asked("hang on a moment")
    const url = `/api/threads/going/runs/${runId}/feedback`
    const rated = await alice("PUT", url, { rating: -1, comment: "too slow" })
    assert.strictEqual(rated.status, 200, rated.text)
    const added = await alice("POST", url, { rating: 1, message_id: "m-1" })
    assert.strictEqual(added.status, 200, added.text)
    // the run ends (stopped by its user), its record's end written after the ratings
    const stopped = await alice("POST", `/api/threads/going/runs/${runId}/cancel?wait=true`)
    assert.include([200, 202, 204], stopped.status, stopped.text)
    await alice("GET", `/api/threads/going/runs/${runId}/join`)
    const record = (await alice("GET", `/api/threads/going/runs/${runId}`)).json()
    assert.notInclude(["pending", "running"], record.status)
    const kept = (await alice("GET", url)).json()
    assert.deepStrictEqual(
      kept.map((f: any) => [f.feedback_id, f.rating]).sort(),
      [[rated.json().feedback_id, -1], [added.json().feedback_id, 1]].sort()
    )
    const page = (await alice("GET", "/api/threads/going/messages/page")).json()
    const withRating = page.data.filter((row: any) => row.feedback !== null)
    assert.deepStrictEqual(withRating.map((row: any) => row.feedback.rating), [-1])
  })

  it("a rating of a queued run, then it starts and ends: the rating is there", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "queued" })).status, 200)
    const first = await alice("POST", "/api/threads/queued/runs", {
      input: { messages: [{ type: "human", content: "hang there first" }] }
    })
    assert.strictEqual(first.status, 200, first.text)
    await asked("hang there first")
    const second = await alice("POST", "/api/threads/queued/runs", {
      input: { messages: [{ type: "human", content: "then this" }] },
      multitask_strategy: "enqueue"
    })
    assert.strictEqual(second.status, 200, second.text)
    const runId = second.json().run_id as string
    assert.strictEqual(second.json().status, "pending")
    const url = `/api/threads/queued/runs/${runId}/feedback`
    const rated = await alice("PUT", url, { rating: 1, comment: "queued" })
    assert.strictEqual(rated.status, 200, rated.text)
    // the first run stops; the queued one starts, answers and ends
    await alice("POST", `/api/threads/queued/runs/${first.json().run_id}/cancel?wait=true`)
    await alice("GET", `/api/threads/queued/runs/${runId}/join`)
    const record = (await alice("GET", `/api/threads/queued/runs/${runId}`)).json()
    assert.strictEqual(record.status, "success")
    const kept = (await alice("GET", url)).json()
    assert.deepStrictEqual(kept.map((f: any) => [f.feedback_id, f.rating, f.comment]), [
      [rated.json().feedback_id, 1, "queued"]
    ])
  })
})
