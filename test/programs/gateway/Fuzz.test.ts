/**
 * Fuzzing the gateway over HTTP: generated requests (fast-check, a seed per run) over every route the gateway serves
 * (the table in `routes.ts`: its API's endpoints, the web page, the documentation), under every prefix: wrong methods
 * and content types, missing or foreign `Host` and `Origin` headers, no token, bad tokens, huge headers, bodies of
 * every wrong shape and size (nesting around the limit and far past it, huge strings, wrong types for every field of
 * the run, thread, search, state and history schemas, unicode, `__proto__` keys, out-of-range numbers, nulls, broken
 * JSON, forms, multipart uploads with hostile names), bad ids (traversal, unicode, very long, derived, another user's),
 * bad `Last-Event-ID` values and query strings. Two token users with threads, runs, uploads made through the API first:
 * alice, whose data (and custom agent) holds canary strings, and bob, who sends the requests (or no one does: no or bad
 * tokens), half of them well formed but for their ids, query and body fields, so that they reach deep into the routes
 * (real runs against the scripted model, uploads, state updates, joins and cancels of a run of his that never ends).
 *
 * Properties: no request gets a 5xx, a dropped connection or no answer; every error is a JSON problem
 * (`application/problem+json`, `{type, title, status, detail}`); no answer to bob (headers or body) holds
 * alice's data (her message texts, title, metadata, file names and contents, thread and run ids he did not send
 * himself), and no model call of bob's runs is sent any of it either; afterwards alice's threads, runs, uploads
 * and artifacts are as they were, her running run still runs, and fresh runs of both users work.
 *
 * One summary line goes to stdout at the end, with the run's seed: `GATEWAY_FUZZ_SEED` repeats that run's
 * requests (the same choices; the canaries and ids are made afresh), `GATEWAY_FUZZ_REQUESTS` sets how many
 * (default 2,000).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as CustomAgents from "../../../src/programs/CustomAgents.js"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { BodyKind, Route } from "./routes.js"
import { declaredRoutes, LANGGRAPH, ROUTES, UNROUTED } from "./routes.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const fc = FastCheck

const REQUESTS = Number(process.env.GATEWAY_FUZZ_REQUESTS ?? 2000)
const SEED = process.env.GATEWAY_FUZZ_SEED !== undefined && process.env.GATEWAY_FUZZ_SEED !== ""
  ? Number(process.env.GATEWAY_FUZZ_SEED)
  : Crypto.randomInt(2 ** 31 - 1)
/** Requests in flight at once. */
const BATCH = 8
/** How long a request may go unanswered before it counts as a hang (a run's wait included). */
const HANG_MS = 20_000
/** How long a join of bob's run that never ends is waited for (it rightly waits for the run). */
const LONG_POLL_MS = 1_000
/** How long an event stream is read before the client goes away (runs need not finish). */
const STREAM_READ_MS = 400
/** The most of an answer read (and searched for alice's data). */
const MAX_READ = 4 * 1024 * 1024

// ---------------------------------------------------------------------------------------------------------
// The users and alice's canaries

const ALICE = `alice-token-${Crypto.randomBytes(12).toString("hex")}`
const BOB = `bob-token-${Crypto.randomBytes(12).toString("hex")}`
const NONCE = Crypto.randomBytes(5).toString("hex")
const ALLOWED_ORIGIN = "http://good.example"

/** Markers of alice's model calls (the script answers them; bob never sends them). */
const ALICE_SAVE = `ALICE-SAVE-${NONCE}`
const ALICE_CHAT = `ALICE-CHAT-${NONCE}`
const ALICE_STALL = `ALICE-STALL-${NONCE}`
const ALICE_AFTER = `ALICE-AFTER-${NONCE}`
/** Bob's run that never ends (so that requests meet a running run of his: joins, cancels, new runs). */
const BOB_STALL = `BOB-STALL-${NONCE}`

/** Alice's data that bob never sends: none of it may reach him, or his runs' model calls. */
const SECRET = {
  message: `amsg${NONCE}`,
  message2: `amsgtwo${NONCE}`,
  reply: `areply${NONCE}`,
  metadata: `ameta${NONCE}`,
  uploadName: `asecretfile${NONCE}`,
  uploadContent: `auploadsecret${NONCE}`,
  exposedUploadContent: `auploadexposed${NONCE}`,
  artifactContent: `aartifact${NONCE}`,
  soul: `asoul${NONCE}`,
  thread: `asecretthread${NONCE}`,
  messageId: `amsgid${NONCE}`
}

/** Alice's names that bob's requests use (to reach her data): in an answer only where his request had them. */
const EXPOSED = {
  thread: `aexposed${NONCE}`,
  hangingThread: `ahanging${NONCE}`,
  uploadName: `aexposedfile${NONCE}.txt`,
  artifactName: `aplan${NONCE}.md`,
  agent: `aagent${NONCE}`,
  tag: ThreadIds.tagOf("alice")
}

const base64 = (text: string) => Buffer.from(text).toString("base64")

// ---------------------------------------------------------------------------------------------------------
// The scripted model

/** Model calls of bob's that were sent some of alice's data. */
const promptLeaks: Array<string> = []
/** Whether bob's run that never ends has started. */
let bobStalled = false
/** Whether bob's model calls are watched (from the fuzzing on; his own setup comes before alice's data). */
let watching = false

const script = (body: ChatRequestBody): Turn => {
  const all = JSON.stringify(body.messages)
  const users = body.messages.filter((m) => m.role === "user")
  const lastUser = JSON.stringify(users.at(-1)?.content ?? "")
  const last = body.messages.at(-1)
  if (lastUser.includes(ALICE_SAVE)) {
    if (last?.role === "tool") return `Saved it. ${SECRET.reply}`
    return {
      toolCalls: [{
        name: "write_file",
        arguments: {
          description: "save",
          path: `/mnt/user-data/outputs/${EXPOSED.artifactName}`,
          content: SECRET.artifactContent
        }
      }]
    }
  }
  if (lastUser.includes(ALICE_STALL)) return { content: "working", stall: true }
  if (lastUser.includes(ALICE_CHAT)) return `Noted. ${SECRET.reply}`
  if (lastUser.includes(ALICE_AFTER)) return "Fresh answer."
  // (once: a later run of that thread without a message of its own, after an interrupt, gets an answer)
  if (lastUser.includes(BOB_STALL) && !bobStalled) {
    bobStalled = true
    return { content: "thinking", stall: true }
  }
  if (watching) {
    for (const canary of secretCanaries()) {
      if (all.includes(canary)) promptLeaks.push(`a model call of bob's was sent ${canary}: ${all.slice(0, 300)}`)
    }
  }
  return "Noted."
}

/** What of alice's must never reach bob: her secrets, raw and in base64 (as images reach a model). */
const secretCanaries = (): ReadonlyArray<string> => [
  ...Object.values(SECRET),
  ALICE,
  ...[SECRET.uploadContent, SECRET.exposedUploadContent, SECRET.artifactContent].map(base64),
  ...aliceIds.secret
]

// ---------------------------------------------------------------------------------------------------------
// Requests

/** One generated request. */
interface Spec {
  readonly route: Route
  readonly method: string
  readonly path: string
  /** Header names in lower case; `host` left out means no Host header at all. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer | undefined
  /** Sent with `Transfer-Encoding: chunked` rather than a length. */
  readonly chunked: boolean
  /** What the body is, for reports. */
  readonly label: string
}

/** What came back. */
interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: Buffer
  /** Read up to a limit (a stream, a large body), not to its end. */
  readonly partial: boolean
}

type Outcome =
  | { readonly _tag: "answer"; readonly answer: Answer }
  | { readonly _tag: "hang" }
  | { readonly _tag: "dropped"; readonly error: string }

let gateway: TestGateway
let port = 0

/** Sends a request exactly as specified (node:http: any Host, or none). */
const send = (spec: Spec, waitMs: number): Promise<Outcome> =>
  new Promise<Outcome>((resolve) => {
    let settled = false
    const settle = (outcome: Outcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(outcome)
    }
    const timer = setTimeout(() => {
      request.destroy()
      settle({ _tag: "hang" })
    }, waitMs)
    const request = Http.request(
      { host: "127.0.0.1", port, method: spec.method, path: spec.path, setHost: false, agent: false },
      (response) => {
        const chunks: Array<Buffer> = []
        let size = 0
        const done = (partial: boolean) => {
          response.destroy()
          settle({
            _tag: "answer",
            answer: { status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks), partial }
          })
        }
        if ((response.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          setTimeout(() => done(true), STREAM_READ_MS)
        }
        response.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_READ) return done(true)
          chunks.push(chunk)
        })
        response.on("end", () => done(false))
        response.on("error", () => done(true))
      }
    )
    request.on("error", (error) => settle({ _tag: "dropped", error: error.message }))
    for (const [name, value] of Object.entries(spec.headers)) request.setHeader(name, value)
    if (spec.body === undefined) {
      request.end()
    } else if (spec.chunked) {
      request.setHeader("transfer-encoding", "chunked")
      request.write(spec.body)
      request.end()
    } else {
      request.setHeader("content-length", spec.body.length)
      request.end(spec.body)
    }
  })

const describeSpec = (spec: Spec) => {
  const headers = Object.entries(spec.headers)
    .map(([name, value]) => `${name}: ${value.length > 80 ? `${value.slice(0, 80)}... (${value.length})` : value}`)
  const body = spec.body === undefined
    ? "no body"
    : `${spec.label} body of ${spec.body.length} bytes${spec.chunked ? " (chunked)" : ""}: ` +
      JSON.stringify(spec.body.subarray(0, 200).toString("utf8"))
  return `${spec.method} ${spec.path.length > 200 ? `${spec.path.slice(0, 200)}...` : spec.path}\n  ` +
    `${headers.join("\n  ")}\n  ${body}`
}

const describeAnswer = (answer: Answer) =>
  `${answer.status} ${answer.headers["content-type"] ?? "(no content type)"}: ` +
  JSON.stringify(answer.body.subarray(0, 300).toString("utf8"))

// ---------------------------------------------------------------------------------------------------------
// The users' data, made through the API before the fuzzing

/** Alice's and bob's ids, made in `beforeAll`. */
const aliceIds = {
  /** Ids bob's requests use. */
  exposed: [] as Array<string>,
  /** Ids bob never sees or sends. */
  secret: [] as Array<string>,
  runs: [] as Array<string>,
  /** Her crons (one on her secret thread, its input and metadata secret). */
  crons: [] as Array<string>,
  hangingRun: ""
}
const bobIds = {
  threads: [] as Array<string>,
  /** Threads deleting requests go to (the others stay, so that requests reach into his threads). */
  disposable: [] as Array<string>,
  runs: [] as Array<string>,
  crons: [] as Array<string>,
  uploads: [] as Array<string>,
  /** The run of his that never ends. */
  stalled: ""
}

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const upload = (name: string, content: string) => {
  const form = new FormData()
  form.append("files", new Blob([content]), name)
  return form
}

const runIdOf = (headers: Headers) => headers.get("content-location")!.split("/").pop()!

const human = (text: string, id?: string) => ({
  input: { messages: [{ type: "human", content: text, ...(id === undefined ? {} : { id }) }] }
})

/** What alice can read of her data, to compare before and after the fuzzing. */
const aliceView = async () => {
  const read = async (path: string) => {
    const answer = await alice("GET", path)
    assert.strictEqual(answer.status, 200, `${path}: ${answer.text}`)
    return answer.json()
  }
  const views: Record<string, unknown> = {}
  for (const id of [EXPOSED.thread, SECRET.thread]) {
    views[`thread ${id}`] = await read(`/threads/${id}`)
    views[`state ${id}`] = await read(`/threads/${id}/state`)
    views[`history ${id}`] = await read(`/threads/${id}/history?limit=100`)
    views[`runs ${id}`] = await read(`/threads/${id}/runs?limit=100`)
    views[`uploads ${id}`] = await read(`/api/threads/${id}/uploads/list`)
  }
  const search = await alice("POST", "/threads/search", { limit: 1000 })
  views.search = (search.json() as Array<{ thread_id: string }>).map((t) => t.thread_id).sort()
  const files = `/api/threads/${EXPOSED.thread}/artifacts/mnt/user-data`
  const artifact = await alice("GET", `${files}/outputs/${EXPOSED.artifactName}`)
  views.artifact = [artifact.status, artifact.text]
  const file = await alice("GET", `${files}/uploads/${SECRET.uploadName}.txt`)
  views.upload = [file.status, file.text]
  const crons = await alice("POST", "/runs/crons/search", { limit: 1000 })
  assert.strictEqual(crons.status, 200, crons.text)
  views.crons = crons.json()
  views.store = await read("/store/items?namespace=notes&key=k")
  views.agent = await read(`/assistants/${EXPOSED.agent}`)
  views.soul = Fs.readFileSync(
    Path.join(CustomAgents.agentsDir(gateway.home, "alice"), EXPOSED.agent, CustomAgents.SOUL_FILE),
    "utf8"
  )
  return views
}

let before: Record<string, unknown> = {}

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: (url) => ({
      // a model with vision: the agent gets `view_image` and the ViewImage middleware, which reads files
      models: [{
        name: "scripted",
        model: "scripted",
        base_url: url,
        api_key: "sk-test-scripted-key-000000",
        supports_vision: true
      }],
      gateway: {
        heartbeat_seconds: 1,
        cors: { allow_origins: [ALLOWED_ORIGIN] },
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
      }
    })
  })
  port = Number(new URL(gateway.url).port)

  // alice: a thread with two uploads, a saved artifact and a finished run; a thread of hers bob never hears
  // of; a thread with a run that never ends
  const created = await alice("POST", "/threads", { thread_id: EXPOSED.thread, metadata: { note: SECRET.metadata } })
  assert.strictEqual(created.status, 200, created.text)
  for (const [name, content] of [[EXPOSED.uploadName, SECRET.exposedUploadContent], [
    `${SECRET.uploadName}.txt`,
    SECRET.uploadContent
  ]] as const) {
    const uploaded = await alice("POST", `/api/threads/${EXPOSED.thread}/uploads`, upload(name, content))
    assert.strictEqual(uploaded.status, 200, uploaded.text)
  }
  const saved = await alice(
    "POST",
    `/threads/${EXPOSED.thread}/runs/wait`,
    human(`${ALICE_SAVE} ${SECRET.message}`, SECRET.messageId)
  )
  assert.strictEqual(saved.status, 200, saved.text)
  assert.include(saved.text, SECRET.reply)
  aliceIds.runs.push(runIdOf(saved.headers))
  const secretThread = await alice("POST", "/threads", {
    thread_id: SECRET.thread,
    metadata: { note: SECRET.metadata }
  })
  assert.strictEqual(secretThread.status, 200, secretThread.text)
  const chat = await alice("POST", `/threads/${SECRET.thread}/runs/wait`, human(`${ALICE_CHAT} ${SECRET.message2}`))
  assert.strictEqual(chat.status, 200, chat.text)
  aliceIds.secret.push(runIdOf(chat.headers))
  const hanging = await alice("POST", `/threads/${EXPOSED.hangingThread}/runs`, {
    ...human(`${ALICE_STALL} ${SECRET.message}`),
    if_not_exists: "create"
  })
  assert.strictEqual(hanging.status, 200, hanging.text)
  aliceIds.hangingRun = hanging.json().run_id
  for (let i = 0; i < 400; i++) {
    const run = await alice("GET", `/threads/${EXPOSED.hangingThread}/runs/${aliceIds.hangingRun}`)
    if (run.json().status === "running") break
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  aliceIds.exposed.push(EXPOSED.thread, EXPOSED.hangingThread)
  aliceIds.runs.push(aliceIds.hangingRun)
  // crons of hers (ticking yearly, not during the fuzzing): one on her secret thread, one stateless
  for (const [path, body] of [
    [
      `/threads/${SECRET.thread}/runs/crons`,
      { ...human(`${ALICE_CHAT} ${SECRET.message}`), metadata: { note: SECRET.metadata } }
    ],
    ["/runs/crons", { ...human(SECRET.message2), metadata: { owner: "alice" } }]
  ] as const) {
    const cron = await alice("POST", path, { schedule: "0 0 1 1 *", ...body })
    assert.strictEqual(cron.status, 200, cron.text)
    aliceIds.crons.push(cron.json().cron_id)
  }
  // an item of her store, where bob's generated store requests look (namespace "notes", key "k", owner alice)
  const item = await alice("PUT", "/store/items", {
    namespace: ["notes"],
    key: "k",
    value: { owner: "alice", note: SECRET.metadata }
  })
  assert.strictEqual(item.status, 204, item.text)
  // and a custom agent of hers, whose soul is her prompt
  await Effect.runPromise(CustomAgents.save(gateway.home, "alice", EXPOSED.agent, {
    config: { description: "alice's agent" },
    soul: `You are alice's agent. ${SECRET.soul}`
  }).pipe(Effect.provide(NodeFileSystem.layer)))

  // bob: threads with an upload and finished runs, empty ones, disposable ones, and a run that never ends
  for (const id of ["bob-main", "bob-second", "bob-empty", "bob-tmp-1", "bob-tmp-2", "bob-tmp-3"]) {
    const made = await bob("POST", "/threads", { thread_id: id, metadata: { owner: "bob" } })
    assert.strictEqual(made.status, 200, made.text)
    ;(id.startsWith("bob-tmp") ? bobIds.disposable : bobIds.threads).push(id)
  }
  const bobUpload = await bob("POST", "/api/threads/bob-main/uploads", upload("bob-notes.txt", "bob's notes"))
  assert.strictEqual(bobUpload.status, 200, bobUpload.text)
  bobIds.uploads.push("bob-notes.txt")
  const stalled = await bob("POST", "/threads/bob-busy/runs", { ...human(BOB_STALL), if_not_exists: "create" })
  assert.strictEqual(stalled.status, 200, stalled.text)
  bobIds.stalled = stalled.json().run_id
  bobIds.threads.push("bob-busy")
  bobIds.runs.push(bobIds.stalled)
  const bobCron = await bob("POST", "/threads/bob-main/runs/crons", { schedule: "0 0 1 1 *", ...human("hello") })
  assert.strictEqual(bobCron.status, 200, bobCron.text)
  bobIds.crons.push(bobCron.json().cron_id)
  for (const id of ["bob-main", "bob-second"]) {
    const ran = await bob("POST", `/threads/${id}/runs/wait`, human("hello"))
    assert.strictEqual(ran.status, 200, ran.text)
    bobIds.runs.push(runIdOf(ran.headers))
  }
  before = await aliceView()
})

// ---------------------------------------------------------------------------------------------------------
// Arbitraries

/** Strings that break things: control characters, bidi overrides, lone surrogates, traversal, markup. */
const WEIRD: ReadonlyArray<string> = [
  "",
  " ",
  "\u0000",
  "\u0000\u0001\u001b[2J\u001b]0;x\u0007",
  "\ud800",
  "\udfff\ud800",
  "\u202e\u2066",
  "\ufeff",
  "😀🦌",
  "e\u0301",
  "ﬀ",
  "İ",
  "../../../../etc/passwd",
  "..\\..\\windows",
  "%2e%2e%2f",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "${7*7}",
  "{{constructor.constructor('return 1')()}}",
  "__proto__",
  "constructor",
  "null",
  "undefined",
  "NaN",
  "lead_agent",
  "default",
  "admin",
  "alice",
  "bob"
]

/** Numbers as JSON text, in range and far out of it. */
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.integer({ min: -3, max: 1100 }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.constantFrom(
    "1e309",
    "-1e309",
    "1e-400",
    "-0",
    "0.5",
    "9007199254740993",
    "123456789012345678901234567890",
    "1E2",
    "-1",
    "4294967296"
  )
)

/** Builds the arbitraries over the users' ids (known once `beforeAll` made them). */
const arbitraries = () => {
  const home = gateway.home
  const aliceStored = `${EXPOSED.thread}${EXPOSED.tag}`
  /** Host paths of alice's files and of the server's own (a client cannot know them, but may guess). */
  const hostPaths = [
    `${threadPaths(home, "alice", aliceStored).uploads}/${EXPOSED.uploadName}`,
    `${threadPaths(home, "alice", aliceStored).outputs}/${EXPOSED.artifactName}`,
    threadPaths(home, "alice", aliceStored).root,
    `${home}/config.yaml`,
    `${home}/users/alice`,
    "/etc/passwd",
    "/proc/self/environ"
  ]
  /** The files among them, with their sizes (a client may try every small size). */
  const hostFiles = hostPaths.flatMap((path) => {
    try {
      const stat = Fs.statSync(path)
      return stat.isFile() ? [{ path, size: stat.size }] : []
    } catch {
      return []
    }
  })
  const aliceSandbox = `local:alice:${aliceStored}`

  const text = fc.oneof(
    { weight: 4, arbitrary: fc.string({ maxLength: 24 }) },
    { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 16 }) },
    { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 16 }) },
    { weight: 4, arbitrary: fc.constantFrom(...WEIRD) },
    { weight: 2, arbitrary: fc.constantFrom(...aliceIds.exposed, ...bobIds.threads, EXPOSED.uploadName) },
    { weight: 1, arbitrary: fc.constantFrom(...hostPaths) },
    { weight: 1, arbitrary: fc.integer({ min: 1000, max: 200_000 }).map((n) => "x".repeat(n)) }
  )
  const stringText = text.map((s) => JSON.stringify(s))
  const FIELDS = [
    "messages",
    "thread_id",
    "assistant_id",
    "input",
    "config",
    "context",
    "metadata",
    "values",
    "checkpoint_id",
    "limit",
    "offset",
    "type",
    "content",
    "id"
  ]
  const keyText = fc.oneof(
    fc.constantFrom(...FIELDS, "__proto__", "constructor", "prototype", "toString", "hasOwnProperty", ""),
    fc.string({ maxLength: 10 })
  ).map((key) => JSON.stringify(key))
  const scalar = fc.oneof(fc.constantFrom("null", "true", "false"), numberText, stringText)
  const { value } = fc.letrec<{ value: string }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", maxDepth: 5 },
      { weight: 3, arbitrary: scalar },
      { weight: 1, arbitrary: fc.array(tie("value"), { maxLength: 4 }).map((items) => `[${items.join(",")}]`) },
      {
        weight: 1,
        arbitrary: fc.array(fc.tuple(keyText, tie("value")), { maxLength: 4 })
          .map((pairs) => `{${pairs.map(([k, v]) => `${k}:${v}`).join(",")}}`)
      }
    )
  }))

  /**
   * An object of some of `fields` (each mostly valid, else of a wrong type or null; `required` ones nearly always
   * there, the others now and then), maybe with extra and repeated keys.
   */
  const objectOf = (fields: Record<string, FastCheck.Arbitrary<string>>, required: ReadonlyArray<string> = []) => {
    const many = Object.keys(fields).length > 4
    return fc.tuple(
      fc.tuple(...Object.entries(fields).map(([name, valid]) => {
        const present = fc.oneof({ weight: 10, arbitrary: valid }, { weight: 1, arbitrary: value }, {
          weight: 1,
          arbitrary: fc.constant("null")
        }).map((v) => `${JSON.stringify(name)}:${v}`)
        const needed = required.includes(name)
        return fc.oneof(
          { weight: needed ? 1 : many ? 8 : 3, arbitrary: fc.constant(undefined) },
          { weight: needed ? 9 : 2, arbitrary: present }
        )
      })),
      fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, {
        weight: 1,
        arbitrary: fc.array(fc.tuple(keyText, value).map(([k, v]) => `${k}:${v}`), { maxLength: 2 })
      }),
      fc.nat(9)
    ).map(([known, extra, repeat]) => {
      const pairs = [...known.filter((p): p is string => p !== undefined), ...extra]
      return `{${[...pairs, ...(repeat === 0 && pairs.length > 0 ? [pairs[0]!] : [])].join(",")}}`
    })
  }

  const json = (v: unknown) => fc.constant(JSON.stringify(v))
  const threadIdValue = fc.oneof(
    fc.constantFrom(
      ...bobIds.threads,
      ...bobIds.disposable,
      EXPOSED.thread,
      `${EXPOSED.thread}${EXPOSED.tag}`,
      `x${ThreadIds.tagOf("bob")}`
    ),
    fc.uuid(),
    text
  ).map((s) => JSON.stringify(s))
  const record = fc.array(fc.tuple(keyText, value), { maxLength: 3 })
    .map((pairs) => `{${pairs.map(([k, v]) => `${k}:${v}`).join(",")}}`)
  const role = fc.constantFrom("human", "user", "ai", "assistant", "system", "tool", "remove", "developer", "")
  const block = fc.oneof(
    stringText.map((t) => `{"type":"text","text":${t}}`),
    fc.constantFrom(...hostPaths.map((p) => `file://${p}`), "data:image/png;base64,AAAA", "http://127.0.0.1:1/x")
      .map((url) => `{"type":"image_url","image_url":{"url":${JSON.stringify(url)}}}`),
    value
  )
  const content = fc.oneof(
    { weight: 3, arbitrary: stringText },
    { weight: 1, arbitrary: fc.array(block, { maxLength: 3 }).map((b) => `[${b.join(",")}]`) }
  )
  const message = objectOf({
    type: role.map((r) => JSON.stringify(r)),
    content,
    id: fc.oneof(fc.uuid().map((s) => JSON.stringify(s)), stringText),
    role: role.map((r) => JSON.stringify(r)),
    tool_call_id: stringText,
    additional_kwargs: fc.oneof(
      record,
      json({ original_user_content: "x", hide_from_ui: true, files: [{ filename: EXPOSED.uploadName }] })
    ),
    tool_calls: fc.array(objectOf({ id: stringText, name: stringText, args: record }), { maxLength: 2 })
      .map((c) => `[${c.join(",")}]`)
  })
  const messages = fc.array(
    fc.oneof({ weight: 3, arbitrary: content.map((c) => `{"type":"human","content":${c}}`) }, {
      weight: 1,
      arbitrary: message
    }),
    { maxLength: 3 }
  ).map((m) => `[${m.join(",")}]`)
  const settings = objectOf({
    model_name: fc.constantFrom("scripted", "gpt-4", "").map((s) => JSON.stringify(s)),
    agent_name: fc.oneof(fc.constantFrom(EXPOSED.agent, "alice", "bob-agent", "../x", "lead_agent"), text).map((s) =>
      JSON.stringify(s)
    ),
    is_bootstrap: fc.boolean().map(String),
    thinking_enabled: fc.boolean().map(String),
    is_plan_mode: fc.boolean().map(String),
    subagent_enabled: fc.boolean().map(String),
    reasoning_effort: fc.constantFrom("low", "high", "x").map((s) => JSON.stringify(s)),
    thread_id: threadIdValue,
    user_id: fc.constantFrom("alice", "default", "bob").map((s) => JSON.stringify(s)),
    non_interactive: fc.boolean().map(String),
    recursion_limit: numberText
  })
  const streamMode = fc.oneof(
    fc.constantFrom("values", "messages-tuple", "updates", "custom", "debug", "events", "")
      .map((s) => JSON.stringify(s)),
    fc.array(fc.constantFrom("values", "updates", "messages-tuple", "nope"), { maxLength: 3 }).map((l) =>
      JSON.stringify(l)
    )
  )
  const literal = (...values: Array<string>) => fc.constantFrom(...values).map((s) => JSON.stringify(s))

  const run = objectOf({
    assistant_id: fc.oneof(fc.constantFrom("lead_agent", EXPOSED.agent, "Lead Agent", "bootstrap", "../x"), text)
      .map((s) => JSON.stringify(s)),
    input: fc.oneof(
      { weight: 4, arbitrary: messages.map((m) => `{"messages":${m}}`) },
      { weight: 1, arbitrary: value }
    ),
    command: objectOf({ resume: value }),
    config: objectOf({ recursion_limit: numberText, configurable: settings, tags: value }),
    context: settings,
    metadata: record,
    stream_mode: streamMode,
    stream_subgraphs: fc.boolean().map(String),
    stream_resumable: fc.boolean().map(String),
    on_disconnect: literal("cancel", "continue"),
    multitask_strategy: literal("reject", "interrupt", "rollback", "enqueue"),
    on_completion: literal("delete", "keep"),
    if_not_exists: literal("create", "reject"),
    interrupt_before: fc.constantFrom("[]", "[]", "[\"model\"]", "\"*\""),
    interrupt_after: fc.constantFrom("[]", "[]", "[\"tools\"]", "\"*\""),
    checkpoint_id: fc.constantFrom("null", "null", "\"1\"", "\"-1\""),
    checkpoint: fc.constantFrom("null", "null", "{\"checkpoint_id\":\"1\"}"),
    webhook: fc.constantFrom("\"http://127.0.0.1:1/hook\"", "\"file:///etc/passwd\""),
    after_seconds: numberText
  }, ["input"])
  const cron = objectOf({
    schedule: fc.oneof(literal("* * * * *", "0 9 * * 1-5", "61 * * * *", "@daily", "* * * * * *"), stringText),
    timezone: fc.oneof(literal("UTC", "Asia/Shanghai", "Mars/Olympus", "../../etc/localtime"), stringText),
    end_time: literal("2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "tomorrow", "2026-13-45T99:99:99Z"),
    enabled: fc.constantFrom("true", "false", "1"),
    on_run_completed: literal("delete", "keep", "forget"),
    assistant_id: fc.oneof(fc.constantFrom("lead_agent", EXPOSED.agent, "../x"), text).map((s) => JSON.stringify(s)),
    input: fc.oneof(
      { weight: 4, arbitrary: messages.map((m) => `{"messages":${m}}`) },
      { weight: 1, arbitrary: value }
    ),
    config: objectOf({ recursion_limit: numberText, configurable: settings }),
    context: settings,
    metadata: record,
    interrupt_before: fc.constantFrom("[]", "[\"model\"]"),
    multitask_strategy: literal("reject", "interrupt", "rollback", "enqueue")
  }, ["schedule"])
  const thread = objectOf({ thread_id: threadIdValue, metadata: record, if_exists: literal("raise", "do_nothing") })
  // LangGraph's store: namespaces with labels it refuses (".", empty, too many), keys, values, filters, paging
  const labels = fc.array(
    fc.oneof(literal("notes", "*", "langgraph", "a.b", "", "..", "x".repeat(300)), stringText),
    { maxLength: 20 }
  ).map((items) => `[${items.join(",")}]`)
  const store = objectOf({
    namespace: labels,
    key: fc.oneof(literal("k", "", "../k"), stringText),
    value: fc.oneof(record, json({ owner: "alice" })),
    namespace_prefix: labels,
    prefix: labels,
    suffix: labels,
    filter: fc.oneof(record, json({ owner: "alice" }), json({ n: { $gt: 1 } })),
    query: stringText,
    max_depth: numberText,
    limit: numberText,
    offset: numberText
  })
  const search = objectOf({
    metadata: fc.oneof(record, json({ note: SECRET.metadata.slice(0, 4) }), json({ owner: "alice" })),
    ids: fc.array(threadIdValue, { maxLength: 3 }).map((ids) => `[${ids.join(",")}]`),
    status: literal("idle", "busy", "error", "interrupted"),
    limit: numberText,
    offset: numberText,
    sort_by: literal("thread_id", "created_at", "updated_at", "status"),
    sort_order: literal("asc", "desc")
  })
  const viewedImages = fc.tuple(
    stringText,
    fc.constantFrom(...hostFiles),
    fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat(64) })
  ).map(([key, file, size]) =>
    `{${key}:${JSON.stringify({ mime_type: "image/png", size: size ?? file.size, actual_path: file.path })}}`
  )
  const sandbox = fc.constantFrom(aliceSandbox, "local:bob:bob-main", EXPOSED.thread).map((id) =>
    JSON.stringify({ sandbox_id: id })
  )
  const state = objectOf({
    values: objectOf({
      messages,
      title: stringText,
      artifacts: fc.array(fc.constantFrom(...hostPaths, `/mnt/user-data/outputs/${EXPOSED.artifactName}`), {
        maxLength: 2
      }).map((a) => JSON.stringify(a)),
      todos: fc.constantFrom("[{\"content\":\"x\",\"status\":\"pending\"}]", "[{\"content\":1}]"),
      uploaded_files: fc.constantFrom(...hostPaths).map((path) =>
        JSON.stringify([{ filename: EXPOSED.uploadName, size: 1, path, extension: ".txt" }])
      ),
      viewed_images: viewedImages,
      sandbox,
      thread_data: fc.constantFrom(...hostPaths).map((path) => JSON.stringify({ uploads_path: path })),
      summary_text: stringText,
      skill_context: fc.constantFrom(...hostPaths).map((path) => JSON.stringify([{ path }])),
      token_usage: value,
      delegations: value,
      goal: fc.constantFrom("{\"clear\":true}", "{\"objective\":\"x\"}"),
      promoted: fc.constantFrom("{}", "{\"names\":[\"bash\"]}")
    }),
    as_node: stringText,
    checkpoint_id: fc.constantFrom("\"1\"", "\"x\"")
  }, ["values"])
  /** An update of one state field that names host resources, aimed at alice's files and sandbox. */
  const hostileState = fc.oneof(
    viewedImages.map((v) => `{"viewed_images":${v}}`),
    sandbox.map((v) => `{"sandbox":${v}}`),
    fc.constantFrom(...hostPaths).map((path) => JSON.stringify({ thread_data: { outputs_path: path } })),
    fc.constantFrom(...hostPaths).map((path) => JSON.stringify({ skill_context: [{ path }] })),
    // removals of messages the thread may not have
    fc.array(fc.constantFrom("__remove_all__", "nope", ""), { minLength: 1, maxLength: 2 })
      .map((ids) => JSON.stringify({ messages: ids.map((id) => ({ type: "remove", id })) }))
  ).map((values) => `{"values":${values}}`)
  const history = objectOf({ limit: numberText, before: objectOf({ checkpoint_id: fc.oneof(numberText, stringText) }) })
  const checkpoint = objectOf({ checkpoint: objectOf({ checkpoint_id: fc.oneof(numberText, stringText) }) }, [
    "checkpoint"
  ])
  const assistants = objectOf({ graph_id: stringText, name: stringText, limit: numberText, offset: numberText })
  const patch = objectOf({ metadata: record })
  const byKind: Record<Exclude<BodyKind, "none" | "upload">, FastCheck.Arbitrary<string>> = {
    run,
    thread,
    search,
    patch,
    state: fc.oneof({ weight: 2, arbitrary: state }, { weight: 1, arbitrary: hostileState }),
    history,
    checkpoint,
    assistants,
    feedback: objectOf({ rating: fc.constantFrom("1", "-1", "0", "\"1\""), comment: stringText }, ["rating"]),
    goal: objectOf({ objective: stringText, max_continuations: numberText }, ["objective"]),
    regenerate: objectOf({ message_id: stringText }, ["message_id"]),
    edit: objectOf({ human_message_id: stringText, replacement_text: stringText }, ["human_message_id"]),
    branch: objectOf({ message_id: stringText, message_ids: fc.constant("[]"), title: stringText }, ["message_id"]),
    account: objectOf({ email: stringText, password: stringText, remember_me: fc.constantFrom("true", "1", "null") }),
    login: objectOf({ username: stringText, password: stringText, remember_me: stringText }),
    password: objectOf({ current_password: stringText, new_password: stringText, new_email: stringText }),
    suggest: objectOf({
      messages: fc.array(objectOf({ role: stringText, content: stringText }), { maxLength: 3 })
        .map((items) => `[${items.join(",")}]`),
      n: numberText,
      model_name: stringText
    }),
    polish: objectOf({ text: stringText, locale: stringText, thread_id: stringText }),
    artifact: objectOf({ content: stringText, expected_sha256: stringText }),
    cron,
    store,
    compact: objectOf({
      force: fc.constantFrom("true", "false", "1", "null"),
      keep: fc.constantFrom("{\"type\":\"messages\",\"value\":2}", "{\"type\":\"fraction\",\"value\":3}", "null"),
      agent_name: stringText,
      model_name: stringText
    })
  }

  /** A JSON body nested `depth` deep, as arrays or objects (the limit is 100). */
  const deep = fc.tuple(
    fc.oneof(fc.integer({ min: 95, max: 105 }), fc.constantFrom(1000, 100_000)),
    fc.boolean(),
    fc.constantFrom("", "\"metadata\":")
  ).map(([depth, arrays, key]) => {
    const inner = arrays
      ? `${"[".repeat(depth)}1${"]".repeat(depth)}`
      : `${"{\"a\":".repeat(depth)}1${"}".repeat(depth)}`
    return key === "" ? inner : `{${key}${inner}}`
  })
  const broken = fc.oneof(
    fc.constantFrom("{", "{\"a\":}", "[1,]", "{'a':1}", "\ufeff{}", "{\"a\":1}x", "nul", "NaN", "\"\\ud800\"", "1e999"),
    fc.string({ maxLength: 40 })
  )
  const huge = fc.tuple(fc.integer({ min: 100_000, max: 3_000_000 }), fc.constantFrom("metadata", "input", "values"))
    .map(([size, key]) => `{"${key}":{"blob":"${"y".repeat(size)}"}}`)

  const jsonBody = (kind: BodyKind): FastCheck.Arbitrary<readonly [string, string]> =>
    fc.oneof(
      {
        weight: 12,
        arbitrary: (kind in byKind ? byKind[kind as keyof typeof byKind] : value).map((t) => ["json", t] as const)
      },
      { weight: 3, arbitrary: value.map((t) => ["json value", t] as const) },
      { weight: 1, arbitrary: deep.map((t) => ["deep json", t] as const) },
      { weight: 1, arbitrary: broken.map((t) => ["broken json", t] as const) },
      { weight: 1, arbitrary: huge.map((t) => ["huge json", t] as const) }
    )

  const fileName = fc.oneof(
    fc.constantFrom(
      "notes.txt",
      "report.pdf",
      "sheet.xlsx",
      "doc.docx",
      "deck.pptx",
      "page.html",
      "..",
      "../escape.txt",
      "..%2fescape.txt",
      "/etc/passwd",
      "a\\b.txt",
      ".upload-x.part",
      "a\"b.txt",
      "x".repeat(300),
      "😀.txt",
      "\u202etxt.exe",
      EXPOSED.uploadName,
      ...bobIds.uploads
    ),
    fc.string({ maxLength: 20 })
  )
  const part = fc.tuple(
    fc.constantFrom("files", "files", "file", "other"),
    fc.option(fileName, { nil: undefined }),
    fc.oneof(
      fc.string({ maxLength: 50 }),
      fc.constantFrom("%PDF-1.4 broken", "PK\u0003\u0004garbage", "<html><script>x</script>")
    )
  )
  /** How a form's Content-Type may give its boundary (`{b}`): plainly, quoted, and in ways parsers read apart. */
  const formType = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.constantFrom("multipart/form-data; boundary={b}", "multipart/form-data; boundary=\"{b}\"")
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "multipart/form-data; boundary={b};",
        "multipart/form-data;;boundary={b}",
        "multipart/form-data ; boundary={b}",
        "Multipart/Form-Data; BOUNDARY={b}",
        "multipart/form-data; charset=utf-8; boundary={b}",
        "multipart/form-data; boundary={b}; boundary=other",
        "multipart/form-data; boundary=\"{b}\"x",
        "multipart/form-data; boundary= {b}",
        "multipart/form-data; boundary={b} ",
        "multipart/form-data; boundary=\"{b}",
        "multipart/form-data; boundary={b}, text/plain",
        "multipart/form-data; boundary=other",
        "multipart/form-data"
      )
    }
  )
  const multipart = fc.tuple(
    fc.array(part, { maxLength: 4 }),
    fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    formType
  ).map(([parts, closed, type]) => {
    const boundary = "fuzzboundary42"
    const body = parts.map(([field, name, data]) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="${field}"` +
      `${name === undefined ? "" : `; filename="${name}"`}\r\nContent-Type: application/octet-stream\r\n\r\n${data}\r\n`
    ).join("") + (closed ? `--${boundary}--\r\n` : "")
    return [body, type.replaceAll("{b}", boundary)] as const
  })

  /** Content types: none, JSON (with charsets), the ones any page may send, multipart with or without a boundary. */
  const contentType = fc.constantFrom(
    undefined,
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin1",
    "APPLICATION/JSON",
    "application/json;;;",
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "multipart/form-data; boundary=",
    `multipart/form-data; boundary=${"b".repeat(80)}`,
    "application/problem+json",
    "bogus",
    "",
    "application/json, text/plain"
  )

  /** A body for a route: what it reads (mostly), or anything else. */
  const body = (route: Route, clean: boolean): FastCheck.Arbitrary<{ body?: string; type?: string; label: string }> => {
    const jsonWith = (kind: BodyKind) =>
      fc.tuple(jsonBody(kind), fc.oneof({ weight: 6, arbitrary: fc.constant("application/json") }, {
        weight: 2,
        arbitrary: contentType
      })).map(([[label, text], type]) => ({ body: text, label, ...(type === undefined ? {} : { type }) }))
    const none = fc.constant({ label: "none" })
    const noneWithType = contentType.map((type) => ({ label: "none", ...(type === undefined ? {} : { type }) }))
    const form = fc.constantFrom(
      { body: "a=1&b=2", type: "application/x-www-form-urlencoded", label: "form" },
      { body: "{\"input\":{}}", type: "text/plain", label: "text" },
      { body: "\u00ff\u00fe\u0000garbage", type: "application/octet-stream", label: "bytes" }
    )
    const upload = multipart.map(([text, type]) => ({ body: text, label: "multipart", type }))
    if (clean) {
      if (route.body === "none") return none
      if (route.body === "upload") return upload
      const kind = byKind[route.body]
      return kind.map((text) => ({ body: text, label: "json", type: "application/json" }))
    }
    if (route.body === "none") {
      return fc.oneof({ weight: 8, arbitrary: none }, { weight: 2, arbitrary: noneWithType }, {
        weight: 2,
        arbitrary: jsonWith("none")
      }, { weight: 1, arbitrary: form })
    }
    if (route.body === "upload") {
      return fc.oneof({ weight: 8, arbitrary: upload }, { weight: 1, arbitrary: none }, {
        weight: 1,
        arbitrary: jsonWith("none")
      }, { weight: 1, arbitrary: form })
    }
    return fc.oneof({ weight: 2, arbitrary: noneWithType }, { weight: 14, arbitrary: jsonWith(route.body) }, {
      weight: 1,
      arbitrary: form
    }, { weight: 1, arbitrary: upload })
  }

  // path parameters (each a raw path segment: node:http sends it as is)
  const encoded = (arb: FastCheck.Arbitrary<string>) => arb.map(encodeURIComponent)
  const badId = fc.oneof(
    fc.constantFrom(
      "..",
      ".",
      "%2e%2e",
      "..%2f..%2fusers",
      "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
      "%00",
      "%zz",
      "%",
      "%ff%fe",
      "\u00e9",
      "%F0%9F%98%80",
      "x".repeat(129),
      "y".repeat(5000),
      `${EXPOSED.thread}${EXPOSED.tag}`,
      `${EXPOSED.thread}.u000000000000`,
      EXPOSED.thread.toUpperCase(),
      `${EXPOSED.thread}%2F..`,
      "__proto__",
      "constructor",
      "default",
      "-leading",
      "null"
    ),
    encoded(fc.string({ maxLength: 12 })),
    encoded(fc.string({ unit: "grapheme", maxLength: 8 }))
  )
  /** A thread id: bob's (deletes go to his disposable threads only), alice's or a bad one; mostly bob's if clean. */
  const threadId = (method: string, clean: boolean) =>
    fc.oneof(
      {
        weight: clean ? 10 : 6,
        arbitrary: fc.constantFrom(...(method === "DELETE" ? [] : bobIds.threads), ...bobIds.disposable)
      },
      { weight: clean ? 2 : 4, arbitrary: fc.constantFrom(...aliceIds.exposed) },
      { weight: clean ? 1 : 3, arbitrary: badId }
    )
  const runId = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...bobIds.runs) },
    { weight: 4, arbitrary: fc.constantFrom(...aliceIds.runs) },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: badId }
  )
  const cronId = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...bobIds.crons) },
    { weight: 4, arbitrary: fc.constantFrom(...aliceIds.crons) },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: badId }
  )
  const checkpointId = fc.oneof(
    fc.nat(12).map(String),
    fc.constantFrom("-1", "1e400", "NaN", "Infinity", "0x1", "1.5", "99999999999999999999999", "%20", "1%00"),
    badId
  )
  const filename = fc.oneof(
    fc.constantFrom(...bobIds.uploads, EXPOSED.uploadName, "notes.txt"),
    fileName.map(encodeURIComponent),
    badId
  )
  const artifact = fc.oneof(
    fc.constantFrom(
      `mnt/user-data/outputs/${EXPOSED.artifactName}`,
      `mnt/user-data/uploads/${EXPOSED.uploadName}`,
      "mnt/user-data/uploads/bob-notes.txt",
      "mnt/user-data/uploads/",
      "mnt/user-data/outputs",
      "mnt/user-data/../../../etc/passwd",
      "mnt/user-data/outputs/..%2f..%2f..%2fusers%2falice",
      "mnt/user-data/outputs/%2e%2e/%2e%2e/uploads",
      `mnt/user-data/../../alice/threads/${EXPOSED.thread}${EXPOSED.tag}/user-data/uploads/${EXPOSED.uploadName}`,
      "mnt/skills/public",
      "etc/passwd",
      "",
      "mnt/user-data/workspace/%00"
    ),
    encoded(fc.string({ maxLength: 12 })).map((s) => `mnt/user-data/outputs/${s}`)
  )
  const assistantId = fc.oneof(fc.constantFrom("lead_agent", EXPOSED.agent, "bob-agent", "alice"), badId)
  const segment = (name: string, method: string, clean: boolean): FastCheck.Arbitrary<string> => {
    switch (name) {
      case ":thread_id":
        return threadId(method, clean)
      case ":run_id":
        return runId
      case ":cron_id":
        return cronId
      case ":checkpoint_id":
        return checkpointId
      case ":filename":
        return filename
      case ":assistant_id":
        return assistantId
      case "*":
        return artifact
      default:
        return fc.constant(name)
    }
  }
  const queryPair = fc.tuple(
    fc.constantFrom(
      "limit",
      "offset",
      "status",
      "stream_mode",
      "action",
      "wait",
      "download",
      "cancel_on_disconnect",
      "__proto__",
      "constructor",
      "x",
      "limit[]",
      "a[b]"
    ),
    fc.oneof(
      fc.constantFrom(
        "-1",
        "0",
        "1",
        "1e309",
        "NaN",
        "abc",
        "values",
        "messages-tuple",
        "bogus",
        "interrupt",
        "rollback",
        "true",
        "",
        "%zz",
        "%",
        "99999999999999999999"
      ),
      encoded(fc.string({ maxLength: 10 }))
    )
  ).map(([k, v]) => `${k}=${v}`)
  const query = fc.oneof(
    { weight: 6, arbitrary: fc.constant("") },
    { weight: 4, arbitrary: fc.array(queryPair, { minLength: 1, maxLength: 4 }).map((pairs) => `?${pairs.join("&")}`) },
    { weight: 1, arbitrary: fc.constantFrom("?", "?&&=", "?=x", `?${"q=1&".repeat(2000)}`, "?%") }
  )

  // headers
  const identity = fc.oneof(
    { weight: 16, arbitrary: fc.constant<Record<string, string>>({ authorization: `Bearer ${BOB}` }) },
    { weight: 2, arbitrary: fc.constant<Record<string, string>>({ "x-api-key": BOB }) },
    { weight: 1, arbitrary: fc.constant<Record<string, string>>({ authorization: `bearer   ${BOB}  ` }) },
    { weight: 2, arbitrary: fc.constant<Record<string, string>>({}) },
    {
      weight: 3,
      arbitrary: fc.oneof(
        fc.constantFrom(
          `Bearer ${BOB}x`,
          `Bearer ${BOB.slice(0, -1)}`,
          `Basic ${Buffer.from(`bob:${BOB}`).toString("base64")}`,
          "Bearer",
          "Bearer ",
          `Token ${BOB}`,
          `Bearer ${BOB} extra`,
          `Bearer ${"z".repeat(20_000)}`
        ),
        fc.string({ maxLength: 30 }).filter((s) => /^[\x20-\x7e]*$/.test(s)).map((s) => `Bearer ${s}`)
      ).map((authorization) => ({ authorization }))
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<Record<string, string>>({ "x-api-key": "" }, { "x-api-key": `${BOB} ` }, {
        authorization: "Bearer wrong",
        "x-api-key": BOB
      })
    }
  )
  const host = fc.oneof(
    { weight: 20, arbitrary: fc.constant<string | undefined>(`127.0.0.1:${port}`) },
    {
      weight: 3,
      arbitrary: fc.constantFrom<string | undefined>(
        undefined,
        "",
        `localhost:${port}`,
        `[::1]:${port}`,
        "127.0.0.1",
        "evil.example",
        `evil.example:${port}`,
        `127.0.0.1:${port + 1}`,
        "127.0.0.1:99999",
        `127.0.0.1:${port}, evil.example`,
        `${"h".repeat(300)}:${port}`,
        "[::1",
        `user@127.0.0.1:${port}`
      )
    }
  )
  const origin = fc.oneof(
    { weight: 12, arbitrary: fc.constant<string | undefined>(undefined) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<string | undefined>(
        `http://127.0.0.1:${port}`,
        ALLOWED_ORIGIN,
        "http://evil.example",
        "null",
        "file://",
        "garbage",
        `http://127.0.0.1:${port}.evil.example`,
        `https://127.0.0.1:${port}`
      )
    }
  )
  const fetchSite = fc.oneof(
    { weight: 12, arbitrary: fc.constant<string | undefined>(undefined) },
    { weight: 1, arbitrary: fc.constantFrom<string | undefined>("cross-site", "same-site", "same-origin", "none", "x") }
  )
  const lastEventId = fc.oneof(
    { weight: 3, arbitrary: fc.constant<string | undefined>(undefined) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<string | undefined>(
        "",
        "0",
        "1",
        "3",
        "-1",
        "1.5",
        "abc",
        "1e3",
        "0x10",
        " 3 ",
        "99999999999999999999",
        "9".repeat(400),
        "Infinity",
        "NaN",
        "\u00b2\u00b3"
      )
    }
  )
  const filler = fc.oneof(
    { weight: 10, arbitrary: fc.constant<Record<string, string>>({}) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(1_000, 8_000, 15_000, 17_000, 40_000, 100_000)
        .map((n) => ({ "x-fill": "f".repeat(n) }))
    },
    { weight: 1, arbitrary: fc.constantFrom<Record<string, string>>({ accept: "*/*" }, { cookie: "a=1; b" }) }
  )
  const wrongMethod = fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND", "FOO")

  // each route path as likely as any other (the LangGraph API's, served under three prefixes, a third as often
  // each), those that take a body twice as likely
  const routeChoice = fc.oneof(
    ...[...ROUTES, ...UNROUTED].map((route) => ({
      weight: (LANGGRAPH.some(([method, path]) => method === route.method && route.path.endsWith(path)) ? 1 : 3) *
        (route.body === "none" ? 1 : 2),
      arbitrary: fc.constant(route)
    }))
  )
  const spec: FastCheck.Arbitrary<Spec> = fc.tuple(
    routeChoice,
    fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: wrongMethod }),
    // a clean request (bob's own, well formed but for its ids, query and body's fields) reaches deep into the
    // routes; the others get every header and body wrong too
    fc.boolean()
  ).chain(([route, wrong, clean]) =>
    fc.record({
      segments: fc.tuple(...route.path.split("/").map((name) => segment(name, wrong ?? route.method, clean))),
      method: fc.constant(wrong ?? route.method),
      query,
      body: body(route, clean && wrong === undefined),
      identity: clean ? fc.constant({ authorization: `Bearer ${BOB}` }) : identity,
      host: clean ? fc.constant(`127.0.0.1:${port}`) : host,
      origin: clean ? fc.constant(undefined) : origin,
      fetchSite: clean ? fc.constant(undefined) : fetchSite,
      lastEventId,
      filler: clean ? fc.constant({}) : filler,
      chunked: fc.boolean()
    }).map((r): Spec => {
      const headers: Record<string, string> = { ...r.identity, ...r.filler }
      if (r.host !== undefined) headers.host = r.host
      if (r.origin !== undefined) headers.origin = r.origin
      if (r.fetchSite !== undefined) headers["sec-fetch-site"] = r.fetchSite
      if (r.lastEventId !== undefined && route.path.includes(":run_id")) headers["last-event-id"] = r.lastEventId
      if (r.body.type !== undefined) headers["content-type"] = r.body.type
      // (a huge header gets a 431 before the body is read: no body goes with it)
      const big = Object.values(headers).some((v) => v.length > 12_000)
      return {
        route,
        method: r.method,
        path: `${r.segments.join("/") || "/"}${r.query}`,
        headers,
        body: r.body.body === undefined || big ? undefined : Buffer.from(r.body.body, "utf8"),
        chunked: r.chunked,
        label: r.body.label
      }
    })
  )
  return spec
}

// ---------------------------------------------------------------------------------------------------------
// Properties

/** Alice's exposed names that bob has made his own (sent in a body: stored under his threads, echoed back). */
const claimed = new Set<string>()

interface Tally {
  requests: number
  routes: Set<string>
  serverErrors: Array<string>
  leaks: Array<string>
  malformed: Array<string>
  hangs: Array<string>
  dropped: Array<string>
}

const tally: Tally = {
  requests: 0,
  routes: new Set(),
  serverErrors: [],
  leaks: [],
  malformed: [],
  hangs: [],
  dropped: []
}

/** What is wrong with an answer as a well-formed HTTP answer (a JSON problem for errors), if anything. */
const malformedness = (spec: Spec, answer: Answer): string | undefined => {
  if (!Number.isInteger(answer.status) || answer.status < 100 || answer.status > 599) return "no valid status"
  if (spec.method === "HEAD") return undefined
  const type = answer.headers["content-type"] ?? ""
  if (answer.status >= 400) {
    if (type !== "application/problem+json") return `an error of content type ${JSON.stringify(type)}, not a problem`
    let problem: Record<string, unknown>
    try {
      problem = JSON.parse(answer.body.toString("utf8"))
    } catch {
      return "an error whose body is not JSON"
    }
    if (
      typeof problem.type !== "string" || typeof problem.title !== "string" || typeof problem.detail !== "string" ||
      problem.status !== answer.status
    ) return "a problem without type, title, detail and its status"
    return undefined
  }
  if (type.startsWith("application/json") && !answer.partial) {
    try {
      JSON.parse(answer.body.toString("utf8"))
    } catch {
      return "a JSON answer that is not JSON"
    }
  }
  return undefined
}

/** Alice's names that bob's requests use. */
const exposedNames = (): ReadonlyArray<string> => [
  ...Object.values(EXPOSED),
  ...aliceIds.exposed,
  ...aliceIds.runs,
  ...aliceIds.crons
]

/** Alice's data in an answer to bob, beyond what his request carried itself. */
const leaked = (spec: Spec, answer: Answer): ReadonlyArray<string> => {
  const text = [
    ...Object.entries(answer.headers).map(([name, value]) => `${name}: ${String(value)}`),
    answer.body.toString("utf8")
  ].join("\n")
  const sent = [spec.path, ...Object.values(spec.headers), spec.body?.toString("utf8") ?? ""].join("\n")
  return [
    ...secretCanaries().filter((canary) => text.includes(canary)),
    ...exposedNames().filter((name) => text.includes(name) && !sent.includes(name) && !claimed.has(name))
  ]
}

const check = async (spec: Spec) => {
  // names bob sends in a body may become his own (a thread of that id, a file of that name, a metadata value)
  const sentBody = spec.body?.toString("utf8") ?? ""
  for (const name of exposedNames()) {
    if (sentBody.includes(name) || (spec.method === "POST" && spec.path.includes(`/threads/${name}/runs`))) {
      claimed.add(name)
    }
  }
  // (a join of a run that never ends waits for it, as it should; so does a wait for a run queued behind it)
  const longPoll = (spec.route.path.endsWith("/join") && spec.path.includes(bobIds.stalled)) ||
    (spec.route.path.endsWith("/runs/wait") && spec.path.includes("/threads/bob-busy/") &&
      sentBody.includes("\"enqueue\""))
  const outcome = await send(spec, longPoll ? LONG_POLL_MS : HANG_MS)
  tally.requests++
  tally.routes.add(`${spec.route.method} ${spec.route.path}`)
  const what = describeSpec(spec)
  switch (outcome._tag) {
    case "hang":
      if (!longPoll) tally.hangs.push(`no answer in ${HANG_MS} ms:\n${what}`)
      return
    case "dropped":
      tally.dropped.push(`connection dropped (${outcome.error}):\n${what}`)
      return
  }
  const answer = outcome.answer
  if (answer.status >= 500) tally.serverErrors.push(`${describeAnswer(answer)}\n${what}`)
  const wrong = malformedness(spec, answer)
  if (wrong !== undefined) tally.malformed.push(`${wrong}: ${describeAnswer(answer)}\n${what}`)
  const found = leaked(spec, answer)
  if (found.length > 0) tally.leaks.push(`${found.join(", ")} in ${describeAnswer(answer)}\n${what}`)
  // a change that succeeded on a thread named in its path (a goal, an upload) made bob a thread of that id
  if (answer.status < 300 && !["GET", "HEAD", "OPTIONS"].includes(spec.method)) {
    for (const name of exposedNames()) if (spec.path.includes(`/threads/${name}/`)) claimed.add(name)
  }
}

const summary = () =>
  `[fuzz] ${tally.requests} requests over ${tally.routes.size} routes (seed ${SEED}; GATEWAY_FUZZ_SEED=${SEED} ` +
  `repeats them): ${tally.serverErrors.length} server errors, ${tally.leaks.length + promptLeaks.length} leaks, ` +
  `${tally.malformed.length} malformed answers, ${tally.hangs.length} hangs, ${tally.dropped.length} dropped ` +
  "connections\n"

afterAll(async () => {
  if (tally.requests > 0) process.stdout.write(summary())
  await gateway?.stop()
})

describe("gateway fuzzing", () => {
  it("fuzzes every route the gateway's sources declare (its API's endpoints, its HttpRouter routes)", () => {
    assert.deepStrictEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort(), declaredRoutes())
  })

  it(`${REQUESTS} generated requests: no 5xx, every error a JSON problem, nothing of alice's reaches bob`, async () => {
    const specs = fc.sample(arbitraries(), { seed: SEED, numRuns: REQUESTS })
    watching = true
    for (let i = 0; i < specs.length; i += BATCH) {
      await Promise.all(specs.slice(i, i + BATCH).map(check))
    }
    const report = (name: string, list: ReadonlyArray<string>) =>
      list.length === 0 ? [] : [`${list.length} ${name} (seed ${SEED}):\n\n${list.slice(0, 8).join("\n\n")}`]
    const failures = [
      ...report("server errors", tally.serverErrors),
      ...report("leaks", tally.leaks),
      ...report("model calls of bob's sent alice's data", promptLeaks),
      ...report("malformed answers", tally.malformed),
      ...report("hangs", tally.hangs),
      ...report("dropped connections", tally.dropped)
    ]
    assert.strictEqual(failures.length, 0, failures.join("\n\n"))
  }, 240_000)

  it("afterwards: alice's data is as it was, her running run still runs, and both users' fresh runs work", async () => {
    assert.isAbove(tally.requests, 0, "runs after the fuzzing test")
    assert.deepStrictEqual(await aliceView(), before)
    const hanging = await alice("GET", `/threads/${EXPOSED.hangingThread}/runs/${aliceIds.hangingRun}`)
    assert.strictEqual(hanging.json().status, "running")
    const fresh = await alice("POST", `/threads/${SECRET.thread}/runs/wait`, human(ALICE_AFTER))
    assert.strictEqual(fresh.status, 200, fresh.text)
    assert.include(fresh.text, "Fresh answer.")
    const bobs = await bob("POST", "/runs/wait", human("one more"))
    assert.strictEqual(bobs.status, 200, bobs.text)
    assert.include(bobs.text, "Noted.")
    assert.strictEqual((await bob("GET", "/ok")).status, 200)
    assert.deepStrictEqual(promptLeaks, [])
  })
})
