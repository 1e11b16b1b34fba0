/**
 * Request-scoped secrets for MCP tools: an MCP server's header or env value naming `${secret:NAME}` gets the value of
 * the run that calls it (DeerFlow's custom interceptors reading `config.context.secrets`, declared). Against real
 * servers, each a process that echoes what it got (test/fixtures/echo-secrets-mcp.mjs): over stdio its
 * `$ERP_TOKEN`, over streamable HTTP the call's `Authorization` header. The MCP service alone: tools are listed
 * without the secret, a call given it gets it, one given none or another user's value never gets the first; a
 * template outside a header or env value keeps the server from starting. Through the gateway: the secret reaches the
 * tool, and its value is in none of the stream, the thread's state, the run's record and events, the store, or the
 * gateway's logs.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as McpClient from "../../src/layers/McpClient.js"
import { contentText } from "../../src/state/Message.js"
import type { McpResult } from "../../src/services/Mcp.js"
import { captureLogs } from "../support/logs.js"
import * as Servers from "../support/mcpServers.js"
import * as Requests from "../support/requests.js"
import type { TestGateway } from "./gateway/support.js"
import * as Support from "./gateway/support.js"
import { filesHolding } from "../support/filesHolding.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const ALICE_SECRET = "sk-mcp-alice-42f0-DO-NOT-LEAK"
const BOB_SECRET = "sk-mcp-bob-9d1b-DO-NOT-LEAK"
const SLOW = 120_000

const reversed = (text: string) => [...text].reverse().join("")
const secrets = (values: Record<string, string>) => Redacted.make(new Map(Object.entries(values)))
const textOf = (result: McpResult) => result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n")

/** The echo server over stdio, its `$ERP_TOKEN` the request's. */
const stdioEcho = (log: string) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [ECHO, "stdio"],
    env: { ERP_TOKEN: "${secret:ERP_TOKEN}", ECHO_LOG: log }
  })

/** The echo server over HTTP (a process of its own, started here): its URL, the process, its log of requests. */
const startHttpEcho = async (log: string) => {
  const child = ChildProcess.spawn(process.execPath, [ECHO, "http"], {
    env: { ...process.env, ECHO_LOG: log },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = /^(http:\/\/\S+)\n/.exec(out)
      if (line !== null) resolve(line[1]!)
    })
    child.on("exit", (code) => reject(new Error(`the HTTP echo server exited (${code})`)))
  })
  return { url, child }
}

const httpEcho = (url: string) =>
  Servers.server({ type: "http", url, headers: { Authorization: "Bearer ${secret:ERP_TOKEN}", "X-Static": "kept" } })

describe("an MCP server naming ${secret:NAME}, the MCP service alone", () => {
  it.scopedLive("a call given the secret gets it; the listing, a call without it and another user's never do", () =>
    Effect.gen(function*() {
      const dir = Support.tempDir("antler-mcp-secret-")
      const log = Path.join(dir, "echo.log")
      const http = yield* Effect.acquireRelease(
        Effect.promise(() => startHttpEcho(log)),
        ({ child }) => Effect.sync(() => child.kill())
      )
      const mcp = yield* McpClient.make({ servers: { local: stdioEcho(log), remote: httpEcho(http.url) } })
      const catalog = yield* mcp.catalog
      assert.deepStrictEqual(catalog.problems, [])
      assert.sameMembers(catalog.tools.map((t) => t.name), ["local_whoami", "remote_whoami"])
      const alice = { userId: "alice", threadId: "t1", secrets: secrets({ ERP_TOKEN: ALICE_SECRET }) }
      const bob = { userId: "bob", threadId: "t2", secrets: secrets({ ERP_TOKEN: BOB_SECRET }) }
      const none = { userId: "alice", threadId: "t1" }
      const [a1, b1, a2, b2] = yield* Effect.all([
        mcp.call("local", "whoami", {}, alice),
        mcp.call("local", "whoami", {}, bob),
        mcp.call("remote", "whoami", {}, alice),
        mcp.call("remote", "whoami", {}, bob)
      ], { concurrency: "unbounded" })
      assert.include(textOf(a1), `token:[${ALICE_SECRET}]`)
      assert.include(textOf(b1), `token:[${BOB_SECRET}]`)
      assert.include(textOf(a2), `token:[Bearer ${ALICE_SECRET}]`)
      assert.include(textOf(b2), `token:[Bearer ${BOB_SECRET}]`)
      // the same thread's next call without secrets gets none: no session kept them
      const later = yield* Effect.all([mcp.call("local", "whoami", {}, none), mcp.call("remote", "whoami", {}, none)])
      for (const result of later) assert.include(textOf(result), "token:[]")
      const unscoped = yield* mcp.call("local", "whoami", {})
      assert.include(textOf(unscoped), "token:[]")
      // a value with a line break cannot be a header: the header is left out (the env of a stdio server takes it)
      const broken = {
        userId: "alice",
        threadId: "t1",
        secrets: secrets({ ERP_TOKEN: `${ALICE_SECRET}\r\nX-Evil: 1` })
      }
      assert.include(textOf(yield* mcp.call("remote", "whoami", {}, broken)), "token:[]")
      assert.include(textOf(yield* mcp.call("local", "whoami", {}, broken)), `token:[${ALICE_SECRET}\r\nX-Evil: 1]`)
      // the stdio calls given secrets each had a process of their own, ended after the call
      const pids = [a1, b1].map((r) => Number(/pid:(\d+)/.exec(textOf(r))![1]))
      assert.notStrictEqual(pids[0], pids[1])
      assert.notInclude(pids, Number(/pid:(\d+)/.exec(textOf(later[0]!))![1]))
      const lines = Fs.readFileSync(log, "utf8")
      // the listing (and the calls without) went without the header: the header is left out, never half made
      assert.include(lines, "authorization:(none)")
      assert.notInclude(lines, "authorization:Bearer \n")
      const status = yield* mcp.status
      assert.isTrue(status.every((s) => s.problems.length === 0))
    }), SLOW)

  it.scopedLive("${secret:...} outside a header or env value, or with a bad name, keeps the server from starting", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: {
          args: Servers.server({ type: "stdio", command: process.execPath, args: [ECHO, "${secret:ERP_TOKEN}"] }),
          url: Servers.server({ type: "http", url: "http://127.0.0.1:9/${secret:PATH}" }),
          name: Servers.server({ type: "http", url: "http://127.0.0.1:9/mcp", headers: { A: "${secret:9bad}" } }),
          code: Servers.server({
            type: "stdio",
            command: process.execPath,
            args: [ECHO, "stdio"],
            env: { NODE_OPTIONS: "--require ${secret:ERP_TOKEN}" }
          })
        }
      })
      const catalog = yield* mcp.catalog
      const problems = catalog.problems.map((p) => p.message)
      assert.include(problems.join("\n"), "MCP server 'args': args names a request secret (${secret:...}); only header")
      assert.include(problems.join("\n"), "MCP server 'url': url names a request secret")
      assert.include(problems.join("\n"), "MCP server 'name': headers.A: \"9bad\" is not a valid secret name")
      assert.include(problems.join("\n"), "MCP server 'code': env.NODE_OPTIONS may not name a request secret")
      const call = yield* Effect.either(mcp.call("args", "whoami", {}, {
        userId: "u",
        threadId: "t",
        secrets: secrets({ ERP_TOKEN: ALICE_SECRET })
      }))
      assert.isTrue(call._tag === "Left" && call.left.reason === "config")
    }), SLOW)
})

// ---------------------------------------------------------------------------------------------------------
// Through the gateway

let gateway: TestGateway
let http: Awaited<ReturnType<typeof startHttpEcho>> | undefined
let echoLog = ""
const logs = captureLogs()
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

/** "local" or "remote" in the message: that server's whoami; after its result, an answer quoting it. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") return `It said: ${contentText(last.content as never)}`
  const server = Support.lastUserText(body).includes("remote") ? "remote" : "local"
  return { toolCalls: [{ name: `${server}_whoami`, arguments: {} }] }
}

beforeAll(async () => {
  echoLog = Path.join(Support.tempDir("antler-mcp-secret-gw-"), "echo.log")
  http = await startHttpEcho(echoLog)
  gateway = await Support.startOverMcp("antler-mcp-secret-gw-", {
    local: stdioEcho(echoLog),
    remote: httpEcho(http.url)
  }, { script, logger: logs.capture })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
  http?.child.kill()
})

const run = async (user: typeof alice, thread: string, text: string, context: Record<string, unknown>) => {
  assert.strictEqual((await user("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await user("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context,
    stream_mode: ["values", "messages-tuple", "custom", "events"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  const runId = (await user("GET", `/threads/${thread}/runs`)).json()[0].run_id as string
  const record = await user("GET", `/threads/${thread}/runs/${runId}`)
  const events = await user("GET", `/api/threads/${thread}/runs/${runId}/events`)
  const state = (await user("GET", `/threads/${thread}/state`)).json()
  const tool = (state.values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
  const stored = JSON.stringify(await Effect.runPromise(gateway.store.load(thread)))
  return { texts: [stream.text, record.text, events.text, JSON.stringify(state), stored], tool: String(tool.content) }
}

describe("an MCP server naming ${secret:NAME}, through the gateway", () => {
  it("each user's run gets its own value in the tool; no value in anything read or stored", async () => {
    const [a, b, c, d] = await Promise.all([
      run(alice, "a-local", "ask local", { secrets: { ERP_TOKEN: ALICE_SECRET } }),
      run(bob, "b-local", "ask local", { secrets: { ERP_TOKEN: BOB_SECRET } }),
      run(alice, "a-remote", "ask remote", { secrets: { ERP_TOKEN: ALICE_SECRET } }),
      run(bob, "b-remote", "ask remote", { secrets: { ERP_TOKEN: BOB_SECRET } })
    ])
    // the tool got it (its reverse came back), the value itself masked in the result
    assert.include(a.tool, `rev:[${reversed(ALICE_SECRET)}]`)
    assert.include(a.tool, "token:[[redacted]]")
    assert.include(c.tool, `rev:[${reversed(ALICE_SECRET)} reraeB]`)
    assert.include(b.tool, `rev:[${reversed(BOB_SECRET)}]`)
    assert.include(d.tool, `rev:[${reversed(BOB_SECRET)} reraeB]`)
    for (const seen of [a, c]) assert.notInclude(seen.tool, reversed(BOB_SECRET))
    for (const seen of [a, b, c, d]) {
      for (const text of seen.texts) {
        assert.notInclude(text, ALICE_SECRET)
        assert.notInclude(text, BOB_SECRET)
      }
    }
    for (const body of gateway.scripted.bodies) {
      assert.notInclude(body, ALICE_SECRET)
      assert.notInclude(body, BOB_SECRET)
    }
    // nor any file of the gateway's data directory (its database, the threads' folders)
    assert.deepStrictEqual(filesHolding(gateway.home, [ALICE_SECRET, BOB_SECRET]), [])
    const logged = logs.logged.join("\n")
    assert.notInclude(logged, ALICE_SECRET)
    assert.notInclude(logged, BOB_SECRET)
    // the server did get them: this test's log of what arrived says so
    assert.include(Fs.readFileSync(echoLog, "utf8"), `authorization:Bearer ${ALICE_SECRET}`)
  }, SLOW)

  it("a later run of the thread given no secret gets none", async () => {
    const first = await run(alice, "a-later", "ask local", { secrets: { ERP_TOKEN: ALICE_SECRET } })
    assert.include(first.tool, reversed(ALICE_SECRET))
    const stream = await alice("POST", "/threads/a-later/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("ask remote")
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const state = (await alice("GET", "/threads/a-later/state")).json()
    const tool = (state.values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
    assert.include(String(tool.content), "token:[]")
  }, SLOW)
})
