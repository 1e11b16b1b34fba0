/**
 * DeerFlow's test_persistence_timezone.py: every time its API answers names its zone (`Z` or `+HH:MM`), or its app's
 * `new Date(...)` reads it as local time and shifts recent threads by the local offset. Here over SQLite: a thread
 * (made, read, searched), a run (read, listed), feedback on it, and its events.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "ada-token-timestamps-0000000"
const ZONED = /(?:Z|[+-]\d{2}:\d{2})$/

let gateway: TestGateway
const ada = Requests.as(() => gateway, TOKEN)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Hello.",
    config: (url) => ({
      gateway: { auth: { tokens: [{ token: TOKEN, user: "ada" }] } },
      models: [{ name: "scripted", model: "scripted", base_url: url, api_key: "sk-test-scripted-key-000000" }]
    })
  })
})
afterAll(() => gateway?.stop())

/** Every `created_at` / `updated_at` in a JSON answer, with where it was. */
const times = (value: unknown, path = "$"): Array<readonly [string, unknown]> => {
  if (typeof value !== "object" || value === null) return []
  return Object.entries(value).flatMap(([key, item]) =>
    key === "created_at" || key === "updated_at"
      ? [[`${path}.${key}`, item] as const]
      : times(item, `${path}.${key}`)
  )
}

const assertZoned = (answer: unknown, context: string) => {
  const found = times(answer)
  assert.isNotEmpty(found, `${context}: no timestamps`)
  for (const [where, value] of found) {
    assert.isString(value, `${context} ${where}`)
    assert.match(value as string, ZONED, `${context} ${where}: timestamp lacks its zone`)
  }
}

describe("timestamps the API answers (DeerFlow's test_persistence_timezone)", () => {
  it("of threads, runs, feedback and run events all name their zone", async () => {
    // test_thread_meta_emits_tz_aware_timestamps
    const made = await ada("POST", "/api/threads", { thread_id: "tz" })
    assert.strictEqual(made.status, 200, made.text)
    assertZoned(made.json(), "thread made")
    // test_run_repository_emits_tz_aware_timestamps
    const input = { messages: [{ type: "human", content: "hi" }] }
    const run = await ada("POST", "/api/threads/tz/runs/wait", { input })
    assert.strictEqual(run.status, 200, run.text)
    assertZoned((await ada("GET", "/api/threads/tz")).json(), "thread read")
    assertZoned((await ada("POST", "/api/threads/search", {})).json(), "threads searched")
    const runs = (await ada("GET", "/api/threads/tz/runs")).json()
    assertZoned(runs, "runs listed")
    const runId = runs[0].run_id
    assertZoned((await ada("GET", `/api/threads/tz/runs/${runId}`)).json(), "run read")
    // test_feedback_repository_emits_tz_aware_timestamps
    const feedback = await ada("PUT", `/api/threads/tz/runs/${runId}/feedback`, { rating: 1 })
    assert.strictEqual(feedback.status, 200, feedback.text)
    assertZoned(feedback.json(), "feedback")
    // test_run_event_store_emits_tz_aware_timestamps
    assertZoned((await ada("GET", `/api/threads/tz/runs/${runId}/events`)).json(), "run events")
    assertZoned((await ada("GET", "/api/threads/tz/messages/page")).json(), "messages page")
  })
})
