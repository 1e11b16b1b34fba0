/**
 * Two users of one gateway (API tokens standing for alice and bob): neither can read, change, stream, cancel,
 * upload to or download from the other's thread, through any endpoint under any prefix; every such request
 * gets 404 as if the thread did not exist, and the thread is untouched afterwards. The other's thread id is, for
 * each, an id nobody has: bob may make a thread of his own with it (no 409 saying it is taken), and the two
 * threads stay apart. A file a run presents is its user's (each user's file of the same name their own, none
 * the default user's). Requests without a valid token get 401. A gateway bound beyond loopback without tokens
 * refuses to start.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
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
  // a provider's safety stop on a response calling tools: the run's safety_termination event names the thread
  if (text.includes("unsafe")) {
    const call = { name: "bash", arguments: { description: "x", command: "true" } }
    return { toolCalls: [call], finishReason: "content_filter" }
  }
  // the plan written, then presented (a run that leaves an output unpresented fails), then the answer
  const plan = "/mnt/user-data/outputs/plan.md"
  const called = (body.messages.at(-2) as any)?.tool_calls?.[0]?.function?.name
  const wrote = last?.role === "tool" && called === "write_file"
  if (wrote) return { toolCalls: [{ name: "present_files", arguments: { filepaths: [plan] } }] }
  if (last?.role === "tool") return "Saved your secret plan."
  return {
    toolCalls: [{
      name: "write_file",
      arguments: { description: "save", path: plan, content: "alice's secret plan\n" }
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
/** Alice's thread's metadata: hers, and the graph and assistant her runs ran on (LangGraph's). */
const ALICE_METADATA = { owner: "alice", graph_id: "lead_agent", assistant_id: "lead_agent" }
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
    const run = { assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "steal" }] } }
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
    // (an upload to an id bob has no thread of makes his own, as DeerFlow's app uploads a new chat's files before
    // its first run: the next test shows his thread of alice's id is his, and alice's files stay hers)
    const deerflow: Array<[string, () => RequestInit]> = [
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
    // (the uploads of an id bob has no thread of are a new chat's, none, as DeerFlow lists an id it has not seen)
    const listed = await bob(`/api/threads/${threadId}/uploads/list`)
    assert.deepStrictEqual([listed.status, await listed.json()], [200, { files: [], count: 0 }])
    // nor see it in a search
    const found = await (await bob("/threads/search", json({ limit: 100 }))).json() as any
    assert.deepStrictEqual(found, [])

    // nothing of alice's changed: her thread, her run still running, her files
    assert.deepStrictEqual(await (await alice(`/threads/${threadId}/state`)).json(), before)
    const thread = await (await alice(`/threads/${threadId}`)).json() as any
    assert.deepStrictEqual(thread.metadata, ALICE_METADATA)
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

  it("alice's thread id is, for bob, an id nobody has: his thread of that id is his own, hers stays hers", async () => {
    const json = (body: unknown) => ({ method: "POST", body: JSON.stringify(body) })
    const before = await (await alice(`/threads/${threadId}/state`)).json()
    // as for an id nobody has: made (LangGraph's default if_exists is raise), with what bob asked for
    const fresh = await bob("/threads", json({ thread_id: "an-id-nobody-has", metadata: { owner: "bob" } }))
    const made = await bob("/threads", json({ thread_id: threadId, metadata: { owner: "bob" } }))
    assert.strictEqual(made.status, fresh.status)
    const thread = await made.json() as any
    assert.deepInclude(thread, { thread_id: threadId, metadata: { owner: "bob" }, status: "idle" })
    assert.deepStrictEqual(Object.keys(thread).sort(), Object.keys(await fresh.json() as any).sort())
    // if_exists is about his own thread now: raise is 409, do_nothing gives his thread back
    assert.strictEqual((await bob("/threads", json({ thread_id: threadId }))).status, 409)
    const again = await bob("/threads", json({ thread_id: threadId, if_exists: "do_nothing" }))
    assert.strictEqual(((await again.json()) as any).created_at, thread.created_at)

    // his thread takes his runs (alice's run on hers is still going), his uploads; nothing of hers shows
    const form = new FormData()
    form.append("files", new Blob(["bob's notes\n"]), "bob.txt")
    assert.strictEqual((await bob(`/api/threads/${threadId}/uploads`, { method: "POST", body: form })).status, 200)
    const streamed = await bob(`/threads/${threadId}/runs/stream`, json({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "bob's first words" }] },
      stream_mode: ["values"]
    }))
    assert.strictEqual(streamed.status, 200)
    assert.include(streamed.headers.get("content-location") ?? "", `/threads/${threadId}/runs/`)
    const { events } = await Support.readSse(streamed)
    assert.deepInclude(events[0]!.data, { thread_id: threadId })
    assert.strictEqual(events.at(-1)!.event, "end")
    // events of the run that name the thread name it by bob's id
    const stopped = await bob(`/threads/${threadId}/runs/stream`, json({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "something unsafe" }] },
      stream_mode: ["custom"]
    }))
    const custom = (await Support.readSse(stopped)).events.filter((e) => e.event === "custom")
    const safety = custom.map((e) => e.data as any).find((d) => d.type === "safety_termination")
    assert.strictEqual(safety?.thread_id, threadId, JSON.stringify(custom))
    const state = await (await bob(`/threads/${threadId}/state`)).json() as any
    assert.strictEqual(state.checkpoint.thread_id, threadId)
    const said = JSON.stringify(state.values.messages)
    assert.include(said, "bob's first words")
    assert.notInclude(said, "save my plan")
    const runs = await (await bob(`/threads/${threadId}/runs`)).json() as any
    assert.deepStrictEqual(runs.map((r: any) => [r.thread_id, r.status]), [
      [threadId, "success"],
      [threadId, "success"]
    ])
    const bobFiles = await (await bob(`/api/threads/${threadId}/uploads/list`)).json() as any
    assert.deepStrictEqual(bobFiles.files.map((f: any) => f.filename), ["bob.txt"])
    const mine = await (await bob("/threads/search", json({ ids: [threadId] }))).json() as any
    assert.deepStrictEqual(mine.map((t: any) => [t.thread_id, t.metadata.owner]), [[threadId, "bob"]])

    // alice's thread is as it was, and bob deleting his leaves hers
    assert.strictEqual((await bob(`/threads/${threadId}`, { method: "DELETE" })).status, 204)
    assert.strictEqual((await bob(`/threads/${threadId}`)).status, 404)
    assert.deepStrictEqual(await (await alice(`/threads/${threadId}/state`)).json(), before)
    const hers = await (await alice(`/threads/${threadId}`)).json() as any
    assert.deepStrictEqual(hers.metadata, ALICE_METADATA)
    assert.strictEqual(hers.status, "busy")
    const aliceFiles = await (await alice(`/api/threads/${threadId}/uploads/list`)).json() as any
    assert.deepStrictEqual(aliceFiles.files.map((f: any) => f.filename), ["notes.txt"])

    // a run with if_not_exists: create makes bob's thread again, as for an id nobody has
    const created = await bob(`/threads/${threadId}/runs/wait`, json({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "bob again" }] },
      if_not_exists: "create"
    }))
    assert.strictEqual(created.status, 200)
    assert.strictEqual((await bob(`/threads/${threadId}`, { method: "DELETE" })).status, 204)
    assert.strictEqual((await bob("/threads", json({ thread_id: "an-id-nobody-has" }))).status, 409)

    // a thread stored under its plain id (as before threads were stored under their user's ids) is still its
    // owner's under that id, and for the other user an id nobody has
    await Effect.runPromise(gateway.store.ensure("made-before", { owner: "bob", metadata: { owner: "bob" } }))
    assert.deepInclude(await (await bob("/threads/made-before")).json() as any, { metadata: { owner: "bob" } })
    assert.strictEqual((await alice("/threads/made-before")).status, 404)
    const hersNow = await alice("/threads", json({ thread_id: "made-before", metadata: { owner: "alice" } }))
    assert.deepInclude(await hersNow.json() as any, { thread_id: "made-before", metadata: { owner: "alice" } })
    assert.deepInclude(await (await bob("/threads/made-before")).json() as any, { metadata: { owner: "bob" } })
    // ids of the server's own form are not a client's to give
    const reserved = await bob("/threads", json({ thread_id: "x.u0123456789ab" }))
    assert.strictEqual(reserved.status, 422)
  })

  it("a stateless run naming alice's thread in its config runs on a new thread, reading none of hers", async () => {
    const before = await (await alice(`/threads/${threadId}/state`)).json()
    const bobs = async () => (await bob("/threads/search", { method: "POST", body: "{}" })).json()
    const bobsBefore = await bobs()
    const sent = gateway.scripted.requests.length
    const body = JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "what did we say" }] },
      config: { configurable: { thread_id: threadId } },
      context: { thread_id: threadId }
    })
    for (const path of ["/runs/wait", "/api/runs/wait", "/api/runs/stream"]) {
      const response = await bob(path, { method: "POST", body })
      assert.strictEqual(response.status, 200, path)
      const text = await response.text()
      assert.notInclude(text, "save my plan", path)
      assert.notInclude(response.headers.get("content-location") ?? "", threadId, path)
    }
    assert.deepStrictEqual(await (await alice(`/threads/${threadId}/state`)).json(), before)
    // (a stateless run leaves no thread behind)
    assert.deepStrictEqual(await bobs(), bobsBefore)
    // the model was sent bob's message, without alice's conversation
    const requests = gateway.scripted.requests.slice(sent).map((r) => JSON.stringify(r.messages))
    assert.isNotEmpty(requests)
    for (const request of requests) {
      assert.include(request, "what did we say")
      assert.notInclude(request, "save my plan")
    }
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
    assert.strictEqual(cancelled.status, 204)
  })

  // DeerFlow's test_thread_meta_repo: a thread row without an owner (made before users) is everyone's. Antler's
  // thread without an owner is the CLI's local user's only: no token user reads, lists or changes it
  it("a thread stored without an owner (the CLI's) is no token user's", async () => {
    await Effect.runPromise(gateway.store.ensure("made-by-the-cli"))
    for (const user of [alice, bob]) {
      assert.strictEqual((await user("/threads/made-by-the-cli")).status, 404)
      assert.strictEqual((await user("/threads/made-by-the-cli/state")).status, 404)
      assert.strictEqual((await user("/threads/made-by-the-cli", { method: "DELETE" })).status, 404)
      const found = await (await user("/threads/search", { method: "POST", body: "{\"limit\":100}" })).json() as any
      assert.notInclude(found.map((t: any) => t.thread_id), "made-by-the-cli")
    }
    assert.isTrue(Option.isSome(await Effect.runPromise(gateway.store.info("made-by-the-cli"))))
  })
})

describe("present_files", () => {
  it("presents the file of the run's user's thread, and each user's file of the same name is theirs", async () => {
    // write the user's report, then present it, then answer
    const present = (body: ChatRequestBody): Turn => {
      const said = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
      const path = "/mnt/user-data/outputs/report.md"
      const content = `${said.includes("alice") ? "alice" : "bob"}'s report\n`
      const results = body.messages.filter((m) => m.role === "tool").length
      if (results === 0) return { toolCalls: [{ name: "write_file", arguments: { description: "w", path, content } }] }
      if (results === 1) return { toolCalls: [{ name: "present_files", arguments: { filepaths: [path] } }] }
      return "Presented the report."
    }
    const two = await Support.start({ script: present, config: { gateway: Support.twoUsers } })
    const call = (token: string) => (path: string, init: RequestInit = {}) =>
      fetch(`${two.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }
      })
    try {
      const report = async (token: string, who: string) => {
        const thread = await (await call(token)("/threads", { method: "POST", body: JSON.stringify({}) })).json() as any
        const ran = await call(token)(`/threads/${thread.thread_id}/runs/wait`, {
          method: "POST",
          body: JSON.stringify({ input: { messages: [{ type: "human", content: `present ${who}'s report` }] } })
        })
        assert.strictEqual(ran.status, 200)
        const values = await ran.json() as any
        assert.deepStrictEqual(values.artifacts, ["/mnt/user-data/outputs/report.md"])
        const served = await call(token)(`/api/threads/${thread.thread_id}/artifacts/mnt/user-data/outputs/report.md`)
        assert.strictEqual(await served.text(), `${who}'s report\n`)
      }
      await report(Support.ALICE, "alice")
      await report(Support.BOB, "bob")
      // written under each user's own directory; nothing under the default user's
      assert.isTrue(Fs.existsSync(Path.join(two.home, "users", "alice", "threads")))
      assert.isTrue(Fs.existsSync(Path.join(two.home, "users", "bob", "threads")))
      assert.isFalse(Fs.existsSync(Path.join(two.home, "users", "default")))
    } finally {
      await two.stop()
    }
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

describe("admin tokens", () => {
  it("only a token marked admin is an admin's; an open gateway's requests are not; a token is admin or not", () => {
    const token = (value: string, user: string, admin: boolean) => ({ token: Redacted.make(value), user, admin })
    const auth = Auth.make([token(ALICE, "alice", false), token(BOB, "bob", true)])
    const headers = (value: string) => ({ authorization: `Bearer ${value}` })
    assert.deepStrictEqual(auth.identify(headers(ALICE)), Either.right({ user: "alice", admin: false, role: "user" }))
    assert.deepStrictEqual(auth.identify(headers(BOB)), Either.right({ user: "bob", admin: true, role: "admin" }))
    assert.deepStrictEqual(Auth.make([]).identify({}), Either.right({ user: "default", admin: false }))
    assert.include(
      Auth.tokensProblem([token(ALICE, "alice", false), token(ALICE, "alice", true)]),
      "once with admin: true and once without"
    )
    assert.isUndefined(Auth.tokensProblem([token(ALICE, "alice", true), token(ALICE, "alice", true)]))
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
