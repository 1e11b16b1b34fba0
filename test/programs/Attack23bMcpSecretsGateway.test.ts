/**
 * Attack round 23b on request secrets for MCP servers through the gateway: a stdio server that, started with the
 * run's `$ERP_TOKEN`, refuses it, writes it to its stderr and exits (as a server rejecting a bad credential may),
 * fails the start of the call's own process; the start's failure carries the tail of the server's stderr. The value
 * must reach neither the stream, the thread, the run's record and events, the store, the model nor the logs.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../src/state/Message.js"
import { captureLogs } from "../support/logs.js"
import * as Requests from "../support/requests.js"
import type { TestGateway } from "./gateway/support.js"
import * as Support from "./gateway/support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const SECRET = "sk-mcp-stderr-5a9e-DO-NOT-LEAK"
const SLOW = 120_000

// (without a token it is the echo server, so its tools are listed; with one it says it is bad and exits)
const START = `if (process.env.ERP_TOKEN) { console.error("rejected token " + process.env.ERP_TOKEN); process.exit(1) }
import(${JSON.stringify(`file://${ECHO}`)})`

let gateway: TestGateway
const logs = captureLogs()
const alice = Requests.as(() => gateway, Support.ALICE)

const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") return `It said: ${contentText(last.content as never)}`
  return { toolCalls: [{ name: "picky_whoami", arguments: {} }] }
}

beforeAll(async () => {
  const picky = { type: "stdio", command: process.execPath, args: ["-e", START, "x", "stdio"], env: {
    ERP_TOKEN: "${secret:ERP_TOKEN}"
  } }
  gateway = await Support.startOverMcp("antler-mcp-secret-stderr-", { picky }, { script, logger: logs.capture })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
})

describe("Attack23b: a secret-bearing MCP start that fails writing the secret to its stderr", () => {
  it("the value is in nothing the run shows, keeps or logs", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "t-stderr" })).status, 200)
    const stream = await alice("POST", "/threads/t-stderr/runs/stream", {
      assistant_id: "lead_agent",
      input: Support.userInput("who am I"),
      context: { secrets: { ERP_TOKEN: SECRET } },
      stream_mode: ["values", "messages-tuple", "custom", "events"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const runId = (await alice("GET", "/threads/t-stderr/runs")).json()[0].run_id as string
    const record = await alice("GET", `/threads/t-stderr/runs/${runId}`)
    const events = await alice("GET", `/api/threads/t-stderr/runs/${runId}/events`)
    const state = (await alice("GET", "/threads/t-stderr/state")).json()
    const tool = (state.values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
    // the call failed at the start, saying why (its stderr's tail, the value masked)
    assert.include(String(tool.content), "rejected token")
    const stored = JSON.stringify(await Effect.runPromise(gateway.store.load("t-stderr")))
    for (const text of [stream.text, record.text, events.text, JSON.stringify(state), stored]) {
      assert.notInclude(text, SECRET)
    }
    for (const body of gateway.scripted.bodies) assert.notInclude(body, SECRET)
    assert.notInclude(logs.logged.join("\n"), SECRET)
  }, SLOW)
})
