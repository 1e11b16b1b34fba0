/**
 * Two users of one gateway (API tokens standing for alice and bob): neither can read, change, stream, cancel,
 * upload to or download from the other's thread, through any endpoint under any prefix; every such request
 * gets 404 as if the thread did not exist, and the thread is untouched afterwards. Requests without a valid
 * token get 401. A gateway bound beyond loopback without tokens refuses to start.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as App from "../../../src/programs/App.js"
import * as Auth from "../../../src/programs/gateway/Auth.js"
import * as Gateway from "../../../src/programs/gateway/Gateway.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"

const script = (body: ChatRequestBody): Turn => {
  const last = body.messages[body.messages.length - 1]
  const text = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  if (text.includes("hang")) return { content: "working", stall: true }
  if (text.includes("echo")) return `Your token is ${ALICE}, and bob's is ${BOB}.`
  if (last?.role === "tool") return "Saved your secret plan."
  return {
    toolCalls: [{
      name: "write_file",
      arguments: { description: "save", path: "/mnt/user-data/outputs/plan.md", content: "alice's secret plan\n" }
    }]
  }
}

let gateway: TestGateway
const as = (token: string | undefined) => (path: string, init: RequestInit = {}) =>
  fetch(`${gateway.url}${path}`, {
    ...init,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(typeof init.body === "string" ? { "content-type": "application/json" } : {}),
      ...(init.headers as Record<string, string> | undefined)
    }
  })
const alice = as(ALICE)
const bob = as(BOB)

let threadId = ""
let runId = ""
let hangingRun = ""
let checkpointId = ""

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
  const created = await alice("/threads", { method: "POST", body: JSON.stringify({ metadata: { owner: "alice" } }) })
  const thread = await created.json() as any
  threadId = thread.thread_id
  const form = new FormData()
  form.append("files", new Blob(["alice's notes\n"]), "notes.txt")
  assert.strictEqual((await alice(`/api/threads/${threadId}/uploads`, { method: "POST", body: form })).status, 200)
  const waited = await alice(`/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "save my plan" }] }
    })
  })
  assert.strictEqual(waited.status, 200)
  runId = waited.headers.get("content-location")!.split("/").pop()!
  const state = await (await alice(`/threads/${threadId}/state`)).json() as any
  checkpointId = state.checkpoint.checkpoint_id
  const hanging = await (await alice(`/threads/${threadId}/runs`, {
    method: "POST",
    body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "hang on" }] } })
  })).json() as any
  hangingRun = hanging.run_id
  for (let i = 0; i < 400; i++) {
    const run = await (await alice(`/threads/${threadId}/runs/${hangingRun}`)).json() as any
    if (run.status === "running") break
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
})
afterAll(() => gateway?.stop())

describe("two users", () => {
  it("bob gets 404 from every endpoint of alice's thread, under every prefix; alice's thread is untouched", async () => {
    const before = await (await alice(`/threads/${threadId}/state`)).json()
    const json = (body: unknown) => ({ method: "POST", body: JSON.stringify(body) })
    const run = {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "steal" }] },
      if_not_exists: "create"
    }
    const form = () => {
      const data = new FormData()
      data.append("files", new Blob(["bob's file"]), "evil.txt")
      return { method: "POST", body: data }
    }
    const langgraph: Array<[string, RequestInit]> = [
      [`/threads/${threadId}`, {}],
      [`/threads/${threadId}`, { method: "PATCH", body: JSON.stringify({ metadata: { owner: "bob" } }) }],
      [`/threads/${threadId}`, { method: "DELETE" }],
      [`/threads/${threadId}/state`, {}],
      [`/threads/${threadId}/state`, json({ values: { title: "bob was here" } })],
      [`/threads/${threadId}/state/${checkpointId}`, {}],
      [`/threads/${threadId}/state/checkpoint`, json({ checkpoint: { checkpoint_id: checkpointId } })],
      [`/threads/${threadId}/history`, {}],
      [`/threads/${threadId}/history`, json({ limit: 10 })],
      [`/threads/${threadId}/runs`, json(run)],
      [`/threads/${threadId}/runs/stream`, json(run)],
      [`/threads/${threadId}/runs/wait`, json(run)],
      [`/threads/${threadId}/runs`, {}],
      [`/threads/${threadId}/runs/${runId}`, {}],
      [`/threads/${threadId}/runs/${runId}/stream`, {}],
      [`/threads/${threadId}/runs/${hangingRun}/stream`, { method: "POST" }],
      [`/threads/${threadId}/runs/${runId}/join`, {}],
      [`/threads/${threadId}/runs/${hangingRun}/cancel?action=interrupt`, { method: "POST" }],
      [`/threads/${threadId}/runs/${hangingRun}/cancel?action=rollback&wait=1`, { method: "POST" }]
    ]
    const deerflow: Array<[string, () => RequestInit]> = [
      [`/api/threads/${threadId}/uploads`, form],
      [`/api/threads/${threadId}/uploads/list`, () => ({})],
      [`/api/threads/${threadId}/uploads/notes.txt`, () => ({ method: "DELETE" })],
      [`/api/threads/${threadId}/artifacts/mnt/user-data/outputs/plan.md`, () => ({})],
      [`/api/threads/${threadId}/artifacts/mnt/user-data/uploads/notes.txt`, () => ({})]
    ]
    const tried: Array<string> = []
    for (const prefix of ["", "/api", "/api/langgraph"]) {
      for (const [path, init] of langgraph) {
        const response = await bob(`${prefix}${path}`, init)
        tried.push(`${init.method ?? "GET"} ${prefix}${path}`)
        const text = await response.text()
        assert.strictEqual(response.status, 404, `${init.method ?? "GET"} ${prefix}${path}: ${text}`)
        assert.include(JSON.parse(text).detail, "not found")
      }
    }
    for (const [path, init] of deerflow) {
      const request = init()
      const response = await bob(path, request)
      tried.push(`${request.method ?? "GET"} ${path}`)
      assert.strictEqual(response.status, 404, `${request.method ?? "GET"} ${path}`)
    }
    assert.strictEqual(tried.length, langgraph.length * 3 + deerflow.length)
    // bob cannot take the id over either, nor see it in a search
    const taken = await bob("/threads", json({ thread_id: threadId, if_exists: "do_nothing" }))
    assert.strictEqual(taken.status, 409)
    const found = await (await bob("/threads/search", json({ limit: 100 }))).json() as any
    assert.deepStrictEqual(found, [])

    // nothing of alice's changed: her thread, her run still running, her files
    assert.deepStrictEqual(await (await alice(`/threads/${threadId}/state`)).json(), before)
    const thread = await (await alice(`/threads/${threadId}`)).json() as any
    assert.deepStrictEqual(thread.metadata, { owner: "alice" })
    const still = await (await alice(`/threads/${threadId}/runs/${hangingRun}`)).json() as any
    assert.strictEqual(still.status, "running")
    const uploads = await (await alice(`/api/threads/${threadId}/uploads/list`)).json() as any
    assert.deepStrictEqual(uploads.files.map((f: any) => f.filename), ["notes.txt"])
    const plan = await alice(`/api/threads/${threadId}/artifacts/mnt/user-data/outputs/plan.md`)
    assert.strictEqual(plan.status, 200)
    assert.strictEqual(await plan.text(), "alice's secret plan\n")
    assert.strictEqual(plan.headers.get("content-security-policy"), "sandbox")
    const mine = await (await alice("/threads/search", json({ limit: 100 }))).json() as any
    assert.deepStrictEqual(mine.map((t: any) => t.thread_id), [threadId])
  })

  it("artifacts are virtual paths inside the thread's user data only", async () => {
    for (const path of [
      "/api/threads/THREAD/artifacts/etc/passwd",
      "/api/threads/THREAD/artifacts/mnt/user-data/../../../etc/passwd",
      "/api/threads/THREAD/artifacts/mnt/user-data/outputs/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
      `/api/threads/THREAD/artifacts${gateway.home}/antler.sqlite`
    ]) {
      const response = await alice(path.replace("THREAD", threadId))
      assert.strictEqual(response.status, 404, path)
      assert.notInclude(await response.text(), gateway.home)
    }
  })

  it("no token, or a wrong one, is 401; the page itself is public", async () => {
    for (const call of [as(undefined), as("not-a-token-of-anyone-000")]) {
      const response = await call("/threads/search", { method: "POST", body: "{}" })
      assert.strictEqual(response.status, 401)
      assert.strictEqual(response.headers.get("www-authenticate"), "Bearer")
    }
    const sdkStyle = await fetch(`${gateway.url}/threads/search`, {
      method: "POST",
      body: "{}",
      headers: { "x-api-key": BOB, "content-type": "application/json" }
    })
    assert.strictEqual(sdkStyle.status, 200)
    assert.strictEqual((await fetch(`${gateway.url}/`)).status, 200)
    // the hanging run is alice's to stop
    const cancelled = await alice(`/threads/${threadId}/runs/${hangingRun}/cancel?wait=1`, { method: "POST" })
    assert.strictEqual(cancelled.status, 200)
  })
})

describe("binding", () => {
  it("bound beyond loopback without tokens, the gateway refuses to start; loopback may run open", async () => {
    assert.isUndefined(Auth.bindProblem("127.0.0.1", []))
    assert.isUndefined(Auth.bindProblem("::1", []))
    assert.isUndefined(Auth.bindProblem("localhost", []))
    assert.include(Auth.bindProblem("0.0.0.0", []), "gateway.auth.tokens")
    assert.include(Auth.bindProblem("192.168.1.4", []), "refusing to serve on 192.168.1.4")
    const home = Support.tempDir("antler-bind-")
    const exit = await Effect.runPromiseExit(Effect.gen(function*() {
      const models = [{ name: "m", model: "m", api_key: "sk-000000000000" }]
      const app = yield* ConfigFile.fromObject({ models }, { home })
      const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
      return yield* Layer.launch(Gateway.layer({ app, choice, host: "0.0.0.0", port: 0 }))
    }))
    assert.isTrue(Exit.isFailure(exit))
    assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "GatewayStartError")
  })
})

describe("secrets", () => {
  it("configured tokens never leave the server: not streamed, not stored", async () => {
    const thread = await (await alice("/threads", { method: "POST", body: "{}" })).json() as any
    const streamed = await alice(`/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "echo the tokens" }] },
        stream_mode: ["values", "messages-tuple"]
      })
    })
    const text = await streamed.text()
    assert.include(text, "[redacted]")
    assert.notInclude(text, ALICE)
    assert.notInclude(text, BOB)
    const state = JSON.stringify(await (await alice(`/threads/${thread.thread_id}/state`)).json())
    assert.include(state, "Your token is [redacted]")
    assert.notInclude(state, ALICE)
  })
})

describe("CORS", () => {
  it("answers browsers of the configured origins only", async () => {
    const cors = await Support.start({
      script,
      config: { gateway: { cors: { allow_origins: ["http://ui.example"] } } }
    })
    try {
      const preflight = (origin: string) =>
        fetch(`${cors.url}/threads/search`, {
          method: "OPTIONS",
          headers: {
            origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, authorization"
          }
        })
      const allowed = await preflight("http://ui.example")
      assert.strictEqual(allowed.headers.get("access-control-allow-origin"), "http://ui.example")
      assert.include(allowed.headers.get("access-control-allow-headers") ?? "", "authorization")
      const other = await preflight("http://evil.example")
      assert.notStrictEqual(other.headers.get("access-control-allow-origin"), "http://evil.example")
      const created = await fetch(`${cors.url}/threads`, {
        method: "POST",
        body: "{}",
        headers: { origin: "http://ui.example", "content-type": "application/json" }
      })
      assert.strictEqual(created.status, 200)
      assert.include(created.headers.get("access-control-expose-headers") ?? "", "content-location")
    } finally {
      await cors.stop()
    }
    // without the key, no cross-origin browser gets an answer it may read
    const plain = await fetch(`${gateway.url}/threads/search`, {
      method: "POST",
      body: "{}",
      headers: { origin: "http://ui.example", authorization: `Bearer ${ALICE}` }
    })
    assert.isNull(plain.headers.get("access-control-allow-origin"))
  })
})
