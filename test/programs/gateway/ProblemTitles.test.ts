/**
 * A refusal's `title` is its status's standard reason phrase (RFC 9110), whatever the status, through a real gateway:
 * a scheduled task's trigger whose run could not start (502 Bad Gateway), a draft the model could not rewrite (503
 * Service Unavailable), a thread made twice (409 Conflict); FileEdits.test.ts has an artifact edit against a version
 * that changed (412 Precondition Failed). Before, a 502, 503 or 412 was titled "Error".
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import type { Answer } from "../../support/requests.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const systemOf = (body: ChatRequestBody) => JSON.stringify(body.messages.find((m) => m.role === "system") ?? "")

let gateway: TestGateway
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    // (a draft the model rewrites to nothing: a reasoning block alone)
    script: (body) => (systemOf(body).includes("prompt optimizer") ? "<think>nothing</think>" : "Done.")
  })
})
afterAll(() => gateway?.stop())

/** The answer is a problem of `status` titled `title`, as `application/problem+json`. */
const problemOf = (answer: Answer, status: number, title: string) => {
  assert.strictEqual(answer.status, status, answer.text)
  assert.include(answer.headers.get("content-type") ?? "", "application/problem+json")
  assert.strictEqual(answer.json().status, status)
  assert.strictEqual(answer.json().title, title)
}

describe("a refusal's title", () => {
  it("502: a scheduled task whose run could not start (its thread was deleted)", async () => {
    const thread = (await api("POST", "/api/threads", { thread_id: "notes" })).json().thread_id as string
    const created = await api("POST", "/api/scheduled-tasks", {
      context_mode: "reuse_thread",
      thread_id: thread,
      title: "Notes",
      prompt: "Add today's notes.",
      schedule_type: "cron",
      schedule_spec: { cron: "0 9 * * *" },
      timezone: "UTC"
    })
    assert.strictEqual(created.status, 200, created.text)
    assert.strictEqual((await api("DELETE", `/api/threads/${thread}`)).status, 200)
    const triggered = await api("POST", `/api/scheduled-tasks/${created.json().id}/trigger`)
    problemOf(triggered, 502, "Bad Gateway")
    assert.include(triggered.json().detail, "could not start its run")
  })

  it("503: a draft the model could not rewrite", async () => {
    const polished = await api("POST", "/api/input-polish", { text: "make this better" })
    problemOf(polished, 503, "Service Unavailable")
    assert.strictEqual(polished.json().detail, "Failed to polish input")
  })

  it("409: a thread made twice", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "twice" })).status, 200)
    problemOf(await api("POST", "/threads", { thread_id: "twice", if_exists: "raise" }), 409, "Conflict")
  })
})
