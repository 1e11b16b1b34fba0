/**
 * DeerFlow's feedback routes beyond the app's one rating (`PUT`/`GET`/`DELETE .../runs/{run_id}/feedback`, in
 * Turns.test.ts): `POST .../feedback` (a rating of its own, possibly on one message), `.../feedback/stats`,
 * `DELETE .../feedback/{feedback_id}` and `GET /api/runs/{run_id}/feedback`, which were 404s or 405s. Cases named
 * after DeerFlow's `test_feedback.py` and `test_runs_api_endpoints.py` (`TestRunFeedback`), through a real gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const runIds: Array<string> = []

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Here you go.", config: { gateway: Support.twoUsers } })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "rated" })).status, 200)
  for (const text of ["first", "second"]) {
    const run = await alice("POST", "/api/threads/rated/runs", { input: { messages: [{ type: "human", content: text }] } })
    assert.strictEqual(run.status, 200, run.text)
    runIds.push(run.json().run_id)
    await alice("GET", `/api/threads/rated/runs/${run.json().run_id}/join`)
  }
})
afterAll(() => gateway?.stop())

const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

const feedbackUrl = (run: number) => `/api/threads/rated/runs/${runIds[run]}/feedback`

describe("POST .../runs/{run_id}/feedback (test_feedback)", () => {
  it("create positive; create negative with comment; create with message id", async () => {
    const up = await alice("POST", feedbackUrl(0), { rating: 1 })
    assert.strictEqual(up.status, 200, up.text)
    const created = up.json()
    assert.deepStrictEqual(
      Object.keys(created).sort(),
      ["comment", "created_at", "feedback_id", "message_id", "rating", "run_id", "thread_id", "user_id"]
    )
    assert.strictEqual(created.rating, 1)
    assert.strictEqual(created.run_id, runIds[0])
    assert.strictEqual(created.thread_id, "rated")
    assert.strictEqual(created.user_id, "alice")
    assert.isNull(created.message_id)
    const down = (await alice("POST", feedbackUrl(0), { rating: -1, comment: "too short", message_id: "m-1" })).json()
    assert.strictEqual(down.comment, "too short")
    assert.strictEqual(down.message_id, "m-1")
    assert.notStrictEqual(down.feedback_id, created.feedback_id)
  })

  it("create invalid rating zero, five: a 400 naming the rating", async () => {
    for (const rating of [0, 5]) {
      const answer = await alice("POST", feedbackUrl(1), { rating })
      assert.strictEqual(answer.status, 400)
      assert.include(answer.json().detail, "rating must be +1 or -1")
    }
    assert.deepStrictEqual((await alice("GET", feedbackUrl(1))).json(), [])
  })

  it("list by run: the user's rating and the ratings given one by one, oldest first; aggregate by run", async () => {
    const put = await alice("PUT", feedbackUrl(0), { rating: 1, comment: "good" })
    assert.strictEqual(put.status, 200, put.text)
    const listed = (await alice("GET", feedbackUrl(0))).json()
    assert.deepStrictEqual(listed.map((f: any) => f.rating), [1, -1, 1])
    assert.deepStrictEqual(listed.map((f: any) => f.comment), [null, "too short", "good"])
    const stats = await alice("GET", `${feedbackUrl(0)}/stats`)
    assert.strictEqual(stats.status, 200, stats.text)
    assert.deepStrictEqual(stats.json(), { run_id: runIds[0], total: 3, positive: 2, negative: 1 })
    // (the messages page shows the user's rating, the PUT one, on the run's last answer)
    const page = (await alice("GET", "/api/threads/rated/messages/page")).json()
    const rated = page.data.filter((row: any) => row.feedback !== null)
    assert.deepStrictEqual(rated.map((row: any) => [row.run_id, row.feedback.comment]), [[runIds[0], "good"]])
  })

  it("aggregate empty", async () => {
    assert.deepStrictEqual(
      (await alice("GET", `${feedbackUrl(1)}/stats`)).json(),
      { run_id: runIds[1], total: 0, positive: 0, negative: 0 }
    )
  })

  it("delete; delete nonexistent", async () => {
    const [first, second, third] = (await alice("GET", feedbackUrl(0))).json()
    const gone = await alice("DELETE", `${feedbackUrl(0)}/${second.feedback_id}`)
    assert.strictEqual(gone.status, 200, gone.text)
    assert.deepStrictEqual(gone.json(), { success: true })
    assert.deepStrictEqual(
      (await alice("GET", feedbackUrl(0))).json().map((f: any) => f.feedback_id),
      [first.feedback_id, third.feedback_id]
    )
    const again = await alice("DELETE", `${feedbackUrl(0)}/${second.feedback_id}`)
    assert.strictEqual(again.status, 404)
    assert.include(again.json().detail, second.feedback_id)
    // (a rating of another run is not this run's)
    assert.strictEqual((await alice("DELETE", `${feedbackUrl(1)}/${first.feedback_id}`)).status, 404)
  })

  it("another user's thread: every feedback route is a 404, and nothing is written", async () => {
    const before = (await alice("GET", feedbackUrl(0))).json()
    assert.strictEqual((await bob("POST", feedbackUrl(0), { rating: -1 })).status, 404)
    assert.strictEqual((await bob("GET", feedbackUrl(0))).status, 404)
    assert.strictEqual((await bob("GET", `${feedbackUrl(0)}/stats`)).status, 404)
    assert.strictEqual((await bob("DELETE", `${feedbackUrl(0)}/${before[0].feedback_id}`)).status, 404)
    assert.deepStrictEqual((await alice("GET", feedbackUrl(0))).json(), before)
  })
})

describe("GET /api/runs/{run_id}/feedback (test_runs_api_endpoints TestRunFeedback)", () => {
  it("returns list of feedback dicts", async () => {
    const answer = await alice("GET", `/api/runs/${runIds[0]}/feedback`)
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), (await alice("GET", feedbackUrl(0))).json())
    assert.isAbove(answer.json().length, 0)
  })

  it("404 when run not found (another user's run included)", async () => {
    const missing = await alice("GET", "/api/runs/missing-run/feedback")
    assert.strictEqual(missing.status, 404)
    assert.include(missing.json().detail, "missing-run")
    const theirs = await bob("GET", `/api/runs/${runIds[0]}/feedback`)
    assert.strictEqual(theirs.status, 404)
    assert.notInclude(theirs.text, "good")
  })

  it("empty list when no feedback", async () => {
    const answer = await alice("GET", `/api/runs/${runIds[1]}/feedback`)
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), [])
  })
})
