/**
 * Attack round 22 on route permissions (`authorization.enabled`): a role denied a route's permission must not
 * reach it by spelling the path another way the router still matches: a percent-encoded letter (`%74hreads`,
 * `run%73`), a `;` parameter the router cuts the path at (`runs;x`), or a letter's case (the router matches in
 * any case). The permission was read from the raw path, so `GET /api/%74hreads/{id}` needed no permission and
 * `POST /api/threads/{id}/run%73/wait` needed only `threads:write`.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { alsoNeeded, permissionOf } from "../../../src/programs/gateway/RoutePermissions.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { rbac } from "../../support/rbac.js"

const READER = "reader-token-0123456789abcdef"
const WRITER = "writer-token-0123456789abcdef"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Answered.",
    config: {
      gateway: {
        auth: {
          tokens: [
            { token: Support.ALICE, user: "alice" },
            { token: READER, user: "rita", role: "blind" },
            { token: WRITER, user: "walt", role: "writer" }
          ]
        }
      },
      authorization: rbac({
        user: {},
        // may do nothing with threads but make them
        blind: { routes: { allow: ["threads:write"] } },
        // may make and change threads, never start a run
        writer: { routes: { allow: ["threads:read", "threads:write"] } }
      })
    }
  })
})
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const asReader = Requests.as(() => gateway, READER)
const asWriter = Requests.as(() => gateway, WRITER)

describe("route permissions hold however the path is spelled", () => {
  it("a role without threads:read cannot read a thread through an encoded or cut path", async () => {
    const made = await asReader("POST", "/api/threads", {})
    assert.strictEqual(made.status, 200, made.text)
    const id = made.json().thread_id as string
    assert.strictEqual((await asReader("GET", `/api/threads/${id}`)).status, 403)
    for (const path of [
      `/api/%74hreads/${id}`,
      `/api/%54hreads/${id}`.replace("%54", "%74"),
      `/api/threads/${id}/st%61te`,
      `/api/langgraph/%74hreads/${id}/state`,
      `/api/threads/${id}/state;x=1`,
      `/api/threads/${id};x/state`,
      `/api/Threads/${id}`,
      `/%61pi/threads/${id}`
    ]) {
      const answer = await asReader("GET", path)
      assert.include([403, 404], answer.status, `${path}: ${answer.status} ${answer.text}`)
      if (answer.status === 404) assert.notInclude(answer.text, id, path)
    }
  })

  it("a role without runs:create cannot start a run through an encoded or cut path", async () => {
    const made = await asWriter("POST", "/api/threads", {})
    const id = made.json().thread_id as string
    const input = { assistant_id: "lead_agent", input: Support.userInput("hello") }
    assert.strictEqual((await asWriter("POST", `/api/threads/${id}/runs/wait`, input)).status, 403)
    const before = gateway.scripted.requests.length
    for (const path of [
      `/api/threads/${id}/run%73/wait`,
      `/api/threads/${id}/runs;x/wait`,
      `/api/threads/${id}/runs/w%61it`,
      `/api/threads/${id}/run%73`
    ]) {
      const answer = await asWriter("POST", path, input)
      assert.include([403, 404], answer.status, `${path}: ${answer.status} ${answer.text}`)
    }
    assert.strictEqual(gateway.scripted.requests.length, before, "no run reached the model")
  })

  it("a role without runs:create cannot run the agent through a scheduled task (stricter than DeerFlow)", async () => {
    const task = {
      context_mode: "fresh_thread_per_run",
      title: "Notes",
      prompt: "hello",
      schedule_type: "cron",
      schedule_spec: { cron: "0 9 * * *" },
      timezone: "UTC"
    }
    const before = gateway.scripted.requests.length
    const made = await asWriter("POST", "/api/scheduled-tasks", task)
    assert.strictEqual(made.status, 403, made.text)
    assert.strictEqual(made.json().detail, "Permission denied: runs:create")
    // (alice, whose role may do all, makes one: the writer may read the list, not trigger another's task)
    const listed = await asWriter("GET", "/api/scheduled-tasks")
    assert.strictEqual(listed.status, 200, listed.text)
    const triggered = await asWriter("POST", "/api/scheduled-tasks/task-0123/trigger")
    assert.strictEqual(triggered.status, 403, triggered.text)
    assert.strictEqual(gateway.scripted.requests.length, before)
    const alice = Requests.as(() => gateway, Support.ALICE)
    assert.strictEqual((await alice("POST", "/api/scheduled-tasks", task)).status, 200)
  })

  it("the permission of a path is that of the route the router matches", () => {
    assert.strictEqual(permissionOf("GET", "/api/%74hreads/t1"), "threads:read")
    assert.strictEqual(permissionOf("POST", "/api/threads/t1/run%73/wait"), "runs:create")
    assert.strictEqual(permissionOf("POST", "/api/threads/t1/runs;a=b/wait"), "runs:create")
    assert.strictEqual(permissionOf("DELETE", "/api/threads/t1/runs/r1;x"), "runs:cancel")
    assert.strictEqual(permissionOf("DELETE", "/API/Threads/t1/RUNS/r1"), "runs:cancel")
    assert.strictEqual(alsoNeeded("POST", "/api/scheduled-tasks"), "runs:create")
    assert.strictEqual(alsoNeeded("POST", "/api/scheduled-tasks/t1/%74rigger"), "runs:create")
    assert.isUndefined(alsoNeeded("POST", "/api/scheduled-tasks/t1/pause"))
    assert.isUndefined(alsoNeeded("GET", "/api/scheduled-tasks"))
    // an honest path keeps its permission
    assert.strictEqual(permissionOf("GET", "/api/threads/t1/state?x=1"), "threads:read")
    assert.strictEqual(permissionOf("POST", "/api/threads/t1/runs/stream"), "runs:create")
  })
})
