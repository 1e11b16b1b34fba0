/**
 * The recordings of DeerFlow's web app (test/fixtures/deerflow-app/, made by `npm run deerflow-app -- --record`):
 * how a flow's traffic becomes a recording (ids named in the order they appear, secrets and cookies reduced to
 * their names, a stream reduced to its events), and that the committed recordings name no raw id and, between
 * them, cover every endpoint of DeerFlow's gateway the app needs (issue 27's list).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Catalog from "../../scripts/deerflow-app/catalog.js"
import * as Record from "../../scripts/deerflow-app/record.js"
import type { Exchange } from "../../scripts/deerflow-app/recorder.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const FIXTURES = Path.join(ROOT, "test/fixtures/deerflow-app")

const THREAD = "4acd486b-f447-4c6e-a62e-090a625e36ca"
const OTHER = "0b7f6c1e-2d3a-4f5b-8c9d-0e1f2a3b4c5d"
const RUN = "fea5ca45-5a21-40c1-9d16-a2cc7007b435"

const exchange = (over: Partial<Exchange> & Pick<Exchange, "method" | "url">): Exchange => ({
  flow: "test",
  seq: 0,
  startedAt: 0,
  requestHeaders: { "user-agent": "Mozilla/5.0 Chrome/140", host: "127.0.0.1:1234", "content-type": "application/json" },
  requestBody: Buffer.alloc(0),
  status: 200,
  responseHeaders: { "content-type": "application/json" },
  responseBody: Buffer.alloc(0),
  aborted: false,
  done: true,
  ...over
})

const json = (value: unknown) => Buffer.from(JSON.stringify(value))

describe("a flow's recording", () => {
  const recording = Record.recording({
    flow: "test",
    description: "a test",
    auth: "disabled",
    meta: {},
    result: { status: "failed", reason: "the follow-up was refused" },
    expected: [
      { method: "POST", path: "/api/threads/{thread_id}/runs/stream", when: "a message is sent" },
      { method: "POST", path: "/api/threads/{thread_id}/branches", when: "Branch conversation" }
    ],
    exchanges: [
      exchange({ method: "POST", url: "/api/threads", responseBody: json({ thread_id: THREAD, metadata: {} }) }),
      exchange({
        method: "POST",
        url: `/api/threads/${THREAD}/runs/stream`,
        requestHeaders: {
          "user-agent": "Mozilla/5.0 Chrome/140",
          "content-type": "application/json",
          cookie: "access_token=abc; csrf_token=def",
          "x-csrf-token": "def"
        },
        requestBody: json({ input: { messages: [] }, checkpoint: { checkpoint_id: "2" }, context: { thread_id: THREAD } }),
        responseHeaders: { "content-type": "text/event-stream" },
        responseBody: Buffer.from(
          `event: metadata\ndata: {"run_id":"${RUN}","thread_id":"${THREAD}"}\nid: 1\n\n` +
            `event: messages\ndata: [{"id":"a"},{}]\n\nevent: messages\ndata: [{"id":"a"},{}]\n\n` +
            `event: values\ndata: {"messages":[],"title":"Deer"}\n\nevent: end\ndata: null\n\n`
        )
      }),
      exchange({ method: "GET", url: `/api/threads/${OTHER}/messages/page?before_seq=3`, status: 404 }),
      exchange({ method: "GET", url: `/api/threads/${THREAD}/runs/${RUN}/workspace-changes?include_files=true` })
    ]
  })

  it("names ids in the order they appear, and keeps what the endpoint is", () => {
    assert.deepStrictEqual(recording.requests.map((r) => r.path), [
      "/api/threads",
      "/api/threads/{thread_id}/runs/stream",
      "/api/threads/{thread_id_2}/messages/page",
      "/api/threads/{thread_id}/runs/{run_id}/workspace-changes"
    ])
    assert.strictEqual(recording.requests[2]!.endpoint, "/api/threads/{thread_id}/messages/page")
    assert.deepStrictEqual(recording.requests[2]!.query, { before_seq: "3" })
    assert.include(recording.requests[2]!.app_reads.join(" "), "next_before_seq")
    const body = recording.requests[1]!.request.body as { example: any }
    assert.deepStrictEqual(body.example.context, { thread_id: "{thread_id}" })
    // a checkpoint id is the recording's own, named as an id: the replay sends this gateway's
    assert.deepStrictEqual(body.example.checkpoint, { checkpoint_id: "{checkpoint_id}" })
  })

  it("says what the contract test checks: a working status for a refused call, the fields the app reads", () => {
    assert.deepStrictEqual(recording.requests[2]!.expect.status, [200])
    assert.includeMembers([...recording.requests[2]!.expect.fields], ["has_more", "next_before_seq"])
    assert.deepStrictEqual(recording.requests[0]!.expect.status, [200])
  })

  it("keeps no password", () => {
    const signUp = Record.recording({
      flow: "login",
      description: "",
      auth: "enabled",
      meta: {},
      result: { status: "passed", reason: "" },
      expected: [],
      exchanges: [
        exchange({
          method: "POST",
          url: "/api/v1/auth/register",
          requestBody: json({ email: "ada@example.com", password: "deer-password-ada-1" }),
          status: 201
        }),
        exchange({
          method: "POST",
          url: "/api/v1/auth/login/local",
          requestHeaders: { "content-type": "application/x-www-form-urlencoded", origin: "http://127.0.0.1:3456" },
          requestBody: Buffer.from("username=ada%40example.com&password=deer-password-ada-1")
        })
      ]
    })
    assert.notInclude(JSON.stringify(signUp), "deer-password-ada-1")
    assert.deepStrictEqual((signUp.requests[0]!.request.body as any).example, {
      email: "ada@example.com",
      password: "{password}"
    })
    assert.deepStrictEqual((signUp.requests[1]!.request.body as any).form, {
      username: "ada@example.com",
      password: "{password}"
    })
    assert.strictEqual(signUp.requests[1]!.request.headers.origin, "{app}")
  })

  it("reduces cookies and CSRF tokens to their names", () => {
    const headers = recording.requests[1]!.request.headers
    assert.strictEqual(headers.cookie, "access_token=...; csrf_token=...")
    assert.strictEqual(headers["x-csrf-token"], "{secret}")
    assert.notInclude(JSON.stringify(recording), "abc")
  })

  it("reduces a stream to its events, its metadata and its last values", () => {
    const response = recording.requests[1]!.response as any
    assert.deepStrictEqual(response.events, ["metadata", "messages ×2", "values", "end"])
    assert.deepStrictEqual(response.metadata, { run_id: "{run_id}", thread_id: "{thread_id}" })
    assert.deepStrictEqual(response.last_values, { messages: [], title: "Deer" })
  })

  it("lists the expected calls that were not made, with what the app reads", () => {
    assert.deepStrictEqual(recording.not_reached.map((r) => `${r.method} ${r.path}`), [
      "POST /api/threads/{thread_id}/branches"
    ])
    assert.include(recording.not_reached[0]!.app_reads.join(" "), "parent_checkpoint_id")
    assert.include(recording.summary, "GET /api/threads/{thread_id_2}/messages/page → 404")
  })
})

/** DeerFlow's gateway endpoints the app needs (issue 27), each in some recording, made or read in the source. */
const NEEDED = [
  "GET /api/features",
  "GET /api/v1/auth/me",
  "GET /api/v1/auth/setup-status",
  "POST /api/v1/auth/initialize",
  "POST /api/v1/auth/register",
  "POST /api/v1/auth/login/local",
  "POST /api/v1/auth/logout",
  "POST /api/v1/auth/change-password",
  "GET /api/channels/providers",
  "GET /api/suggestions/config",
  "POST /api/threads/{thread_id}/suggestions",
  "GET /api/threads/{thread_id}/uploads/limits",
  "GET /api/threads/{thread_id}/uploads/list",
  "POST /api/threads/{thread_id}/uploads",
  "DELETE /api/threads/{thread_id}/uploads/{filename}",
  "GET /api/threads/{thread_id}/artifacts/{path*}",
  "PUT /api/threads/{thread_id}/artifacts/{path*}",
  "GET /api/threads/{thread_id}/token-usage",
  "GET /api/threads/{thread_id}/messages/page",
  "GET /api/memory",
  "POST /api/memory/facts",
  "PATCH /api/memory/facts/{fact_id}",
  "DELETE /api/memory/facts/{fact_id}",
  "GET /api/memory/export",
  "POST /api/memory/import",
  "GET /api/agents",
  "GET /api/agents/check",
  "POST /api/agents",
  "GET /api/agents/{agent_name}",
  "PUT /api/agents/{agent_name}",
  "DELETE /api/agents/{agent_name}",
  "GET /api/mcp/config",
  "PUT /api/mcp/config",
  "PUT /api/skills/{skill_name}",
  "GET /api/models",
  "GET /api/skills",
  "GET /api/scheduled-tasks",
  "POST /api/scheduled-tasks",
  "POST /api/scheduled-tasks/{task_id}/pause",
  "POST /api/scheduled-tasks/{task_id}/resume",
  "POST /api/scheduled-tasks/{task_id}/trigger",
  "DELETE /api/scheduled-tasks/{task_id}",
  "GET /api/scheduled-tasks/{task_id}/runs",
  "POST /api/threads/{thread_id}/runs/stream",
  "POST /api/threads/{thread_id}/runs/{run_id}/cancel",
  "POST /api/threads/{thread_id}/runs/regenerate/prepare",
  "POST /api/threads/{thread_id}/runs/edit-regenerate/prepare",
  "POST /api/threads/{thread_id}/branches",
  "PUT /api/threads/{thread_id}/runs/{run_id}/feedback",
  "GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes"
]

describe("the committed recordings", () => {
  const files = Fs.existsSync(FIXTURES) ? Fs.readdirSync(FIXTURES).filter((f) => f.endsWith(".json")) : []
  const recordings = files.map((f) => JSON.parse(Fs.readFileSync(Path.join(FIXTURES, f), "utf8")) as ReturnType<
    typeof Record.recording
  >)

  it("are there, one per flow", () => {
    assert.isAbove(files.length, 10)
    for (const [i, r] of recordings.entries()) assert.strictEqual(`${r.flow}.json`, files[i])
  })

  it("name no raw id in a path", () => {
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i
    for (const r of recordings) for (const q of r.requests) assert.notMatch(q.path, uuid, `${r.flow}: ${q.path}`)
  })

  /**
   * Needed by the app but in no recording: its artifacts panel installs a `.skill` archive a run wrote, and no flow
   * has a run write one (the gateway's own test, SettingsExtensions.test.ts, installs one).
   */
  const NOT_RECORDED = ["POST /api/skills/install"]

  it("cover every endpoint the app needs, made in a flow or read in the source", () => {
    for (const e of NOT_RECORDED) {
      const [method, path] = e.split(" ")
      assert.isDefined(Catalog.find(method!, path!), `${e} is in the catalog`)
    }
    const covered = new Set<string>()
    for (const r of recordings) {
      for (const q of r.requests) if (q.endpoint !== null) covered.add(`${q.method} ${q.endpoint}`)
      for (const q of r.not_reached) covered.add(`${q.method} ${q.template}`)
    }
    assert.deepStrictEqual(NEEDED.filter((e) => !covered.has(e)), [])
    for (const e of NEEDED) {
      const [method, path] = e.split(" ")
      assert.isDefined(Catalog.find(method!, path!), `${e} is in the catalog`)
    }
  })
})
