/**
 * The 16 MiB bound on one message of an MCP HTTP server (`mcp/Bounds.ts`), seen from a run of the gateway: a real
 * loopback MCP server process (test/fixtures/mcp-flood.mjs) answers a call with a `Content-Length` of 17 MiB and
 * then only 1 KiB of it (a reader waiting for the body's end would wait for ever), or with one event of an event
 * stream growing past 16 MiB with no length at all. The model's call fails promptly with an error naming the server
 * and the bound, the body unread to its end (the server sees its connection closed before it sent it all); the run
 * ends, its tool call paired with that error, and the next call of the server works.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Child from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Support from "../programs/gateway/support.js"
import { until } from "../support/poll.js"
import * as Requests from "../support/requests.js"

const SLOW = 120_000
const FLOOD = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/mcp-flood.mjs")

let flood: { readonly child: Child.ChildProcess; readonly url: string; readonly out: () => string }
let gateway: Support.TestGateway
const request = Requests.as(() => gateway)

beforeAll(async () => {
  flood = await new Promise((resolve, reject) => {
    const child = Child.spawn(process.execPath, [FLOOD, "http"], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (text: string) => {
      out += text
      const port = /listening (\d+)/.exec(out)?.[1]
      if (port !== undefined) resolve({ child, url: `http://127.0.0.1:${port}/mcp`, out: () => out })
    })
    child.once("exit", () => reject(new Error(`the flood server exited: ${out}`)))
  })
  const dir = Support.tempDir("antler-mcp-http-bound-")
  Fs.writeFileSync(
    Path.join(dir, "extensions_config.json"),
    JSON.stringify({ mcpServers: { flood: { type: "http", url: flood.url } } })
  )
  gateway = await Support.start({
    script: (body) => {
      if (body.messages.at(-1)?.role === "tool") return "Done."
      const tool = /call (\w+)/.exec(Support.lastUserText(body))?.[1] ?? "ping"
      return { toolCalls: [{ name: `flood_${tool}`, arguments: {} }] }
    },
    source: Path.join(dir, "config.yaml"),
    config: { sandbox: { allow_host_bash: false } }
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
  flood?.child.kill("SIGKILL")
})

/** Runs `prompt` on a new thread to its end: how long it took, and the thread's messages after it. */
const run = async (prompt: string) => {
  const thread = (await request("POST", "/threads", {})).json().thread_id as string
  const started = Date.now()
  const answer = await request("POST", `/threads/${thread}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(prompt)
  })
  const took = Date.now() - started
  assert.strictEqual(answer.status, 200, answer.text)
  const state = (await request("GET", `/threads/${thread}/state`)).json()
  const runs = (await request("GET", `/threads/${thread}/runs`)).json() as Array<{ status: string }>
  return { took, messages: state.values.messages as Array<any>, runs }
}

/** The run's one tool call and its result, checked paired; the run ended with the model's answer. */
const pairedResult = (messages: Array<any>, runs: Array<{ status: string }>) => {
  const calls = messages.filter((m) => m.type === "ai").flatMap((m) => m.tool_calls ?? [])
  const results = messages.filter((m) => m.type === "tool")
  assert.lengthOf(calls, 1)
  assert.lengthOf(results, 1)
  assert.strictEqual(results[0].tool_call_id, calls[0].id)
  assert.strictEqual(messages.at(-1).content, "Done.")
  assert.deepStrictEqual(runs.map((r) => r.status), ["success"])
  return results[0]
}

describe("an MCP HTTP server's message past the 16 MiB bound, in a run", () => {
  it("a Content-Length over the bound fails the call at once, the body unread; the run ends paired", async () => {
    const { took, messages, runs } = await run("call declared")
    const result = pairedResult(messages, runs)
    assert.strictEqual(result.status, "error")
    assert.include(
      String(result.content),
      "MCP server 'flood' sent a response body over the 16 MiB limit on one message; it was dropped unread"
    )
    // (the server never sends the rest: a call reading the body to its end would still be waiting)
    assert.isBelow(took, 15_000)
    await until(() => flood.out().includes("closed-early"), "the connection was closed")
    const next = await run("call ping")
    assert.strictEqual(pairedResult(next.messages, next.runs).content, "pong")
  }, SLOW)

  it("an event stream growing past the bound with no length fails the call while the server writes", async () => {
    const before = flood.out().split("closed-early").length
    const { messages, runs } = await run("call bigevent")
    const result = pairedResult(messages, runs)
    assert.strictEqual(result.status, "error")
    assert.include(String(result.content), "MCP server 'flood' sent an event over the 16 MiB limit on one message")
    await until(() => flood.out().split("closed-early").length > before, "the event stream was cut off")
    assert.notInclude(flood.out(), "sent-all")
  }, SLOW)
})
