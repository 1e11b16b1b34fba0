/**
 * Attack round 24 on a gateway run's request secrets (`context.secrets`), through the gateway with a real stdio MCP
 * server naming `${secret:ERP_TOKEN}` in its env:
 * - an MCP server (or a skill's script) that says back what it was given in another form than the value itself: as
 *   JSON text (a configuration it prints, a `"` of the value escaped) and URL-encoded (the URL of
 *   a request it made, in an error): only the value itself was masked in the tool's result, so the thread, the
 *   database and the model's next request held the escaped and encoded forms;
 * - the model writing the value out in its answer (it decoded a form nothing masks, reversed; base64 is masked since
 *   round 25, `test/state/Attack25SecretsRedact.test.ts`): the stream hid it (the
 *   run's redactor), the thread's state and the database kept it (the store knows only the process's secrets).
 * A token like `…/…+…=` (base64) or one holding a `"` is an ordinary secret; a server echoing its request's URL
 * in an error is an ordinary server.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import { captureLogs } from "../../support/logs.js"
import * as Servers from "../../support/mcpServers.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { filesHolding } from "../../support/filesHolding.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
/** What no form of the secret may show: in the value, its JSON escape, its URL encoding and escapes of those. */
const MARK = "DO-NOT-LEAK"
const SECRET = `sk-erp/"alice"+9f3c=${MARK}`
const SLOW = 120_000

/**
 * A stdio MCP server whose `whoami` answers with its `$ERP_TOKEN` as a server may say it back: in its configuration
 * as JSON, URL-encoded in a failed request's URL, base64-encoded, reversed, and its length (what proves it got it).
 */
const ECHO = `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const server = new Server({ name: "forms", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "whoami", description: "Says which credential it was given", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => {
    const token = process.env.ERP_TOKEN ?? ""
    const url = "https://erp.example/api/report?token=" + encodeURIComponent(token)
    return {
      content: [{ type: "text", text: "len:" + token.length + " GET " + url + " failed: 401 b64:" +
        Buffer.from(token).toString("base64") + " rev:" + [...token].reverse().join("") + "\\nconfig: " +
        JSON.stringify({ authorization: token }) }]
    }
  })
  await server.connect(new StdioServerTransport())
`

let gateway: TestGateway
const logs = captureLogs()
const alice = Requests.as(() => gateway, Support.ALICE)

/**
 * "ask": the tool; after its result, "decode": an answer with the reversed form read back, else a plain one. "echo":
 * the decoded value said with a second call of the tool, whose next request the provider refuses quoting the value.
 */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (Support.lastUserText(body).includes("echo") && last?.role === "tool") {
    const said = body.messages.filter((m) => m.role === "assistant").map((m) => String(m.content ?? "")).join(" ")
    if (said.includes(MARK)) return { status: 400, body: { error: { message: `Refused content: ${said}` } } }
    const rev = /rev:(\S+)/.exec(contentText(last.content as never))![1]!
    const value = [...rev].reverse().join("")
    return { content: `Checking ${value} again.`, toolCalls: [{ name: "forms_whoami", arguments: {} }] }
  }
  if (last?.role === "tool") {
    const said = contentText(last.content as never)
    const rev = /rev:(\S+)/.exec(said)?.[1]
    return Support.lastUserText(body).includes("decode") && rev !== undefined
      ? `Your token is ${[...rev].reverse().join("")} (decoded).`
      : "The server answered."
  }
  return { toolCalls: [{ name: "forms_whoami", arguments: {} }] }
}

beforeAll(async () => {
  const forms = { type: "stdio", command: process.execPath, args: ["--input-type=module", "-e", ECHO] }
  gateway = await Support.startOverMcp("antler-attack24-secrets-", {
    forms: { ...Servers.server(forms), env: { ERP_TOKEN: "${secret:ERP_TOKEN}" } }
  }, { script, logger: logs.capture })
}, SLOW)
afterAll(() => gateway?.stop())

const run = async (thread: string, text: string) => {
  assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context: { secrets: { ERP_TOKEN: SECRET } },
    stream_mode: ["values", "messages-tuple", "custom", "events"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  const runId = (await alice("GET", `/threads/${thread}/runs`)).json()[0].run_id as string
  const record = await alice("GET", `/threads/${thread}/runs/${runId}`)
  const events = await alice("GET", `/api/threads/${thread}/runs/${runId}/events`)
  const state = (await alice("GET", `/threads/${thread}/state`)).json()
  const history = await alice("POST", `/threads/${thread}/history`, {})
  const messages = state.values.messages as ReadonlyArray<any>
  const stored = JSON.stringify(await Effect.runPromise(gateway.store.load(thread)))
  return {
    read: { stream: stream.text, record: record.text, events: events.text, state: JSON.stringify(state) },
    history: history.text,
    stored,
    tool: String(messages.filter((m) => m.type === "tool").at(-1)?.content),
    answer: String(messages.filter((m) => m.type === "ai").at(-1)?.content)
  }
}

describe("Attack24: a request secret said back in another form", () => {
  it("a server's JSON and URL-encoded echoes are masked in its result, the thread, the model's request", async () => {
    const seen = await run("a-forms", "ask the server")
    // the server got it (its length), and said it back in each form; each is masked
    assert.include(seen.tool, `len:${SECRET.length}`)
    assert.include(seen.tool, "token=[redacted]")
    assert.include(seen.tool, `config: {"authorization":"[redacted]"}`)
    // (round 25: base64 too; `b64:` before the server's text, so the model could decode it)
    assert.include(seen.tool, "b64:[redacted]")
    const b64 = Buffer.from(SECRET).toString("base64").slice(2, 22)
    for (const [where, text] of Object.entries({ ...seen.read, history: seen.history, stored: seen.stored })) {
      assert.notInclude(text, MARK, where)
      assert.notInclude(text, b64, where)
    }
    for (const body of gateway.scripted.bodies) {
      assert.notInclude(body, MARK)
      assert.notInclude(body, b64)
    }
    assert.deepStrictEqual(filesHolding(gateway.home, MARK), [])
    assert.notInclude(logs.logged.join("\n"), MARK)
  }, SLOW)

  it("the model writing the value out is hidden from the thread and the database, as from the stream", async () => {
    const seen = await run("a-decoded", "ask the server and decode")
    assert.include(seen.answer, "Your token is [redacted] (decoded).")
    for (const [where, text] of Object.entries({ ...seen.read, history: seen.history, stored: seen.stored })) {
      assert.notInclude(text, MARK, where)
    }
    assert.deepStrictEqual(filesHolding(gateway.home, MARK), [])
    // a later run of the thread without the secret reads the thread as kept: the value is not there to be read
    const later = await alice("POST", "/threads/a-decoded/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("ask the server")
    })
    assert.strictEqual(later.status, 200, later.text)
    assert.notInclude(later.text, MARK)
  }, SLOW)

  it("a provider's refusal quoting the value fails the run; its record's error hides it, as events do", async () => {
    const seen = await run("a-refused", "ask the server and echo")
    const record = JSON.parse(seen.read.record)
    assert.strictEqual(record.status, "error", seen.read.record)
    assert.include(seen.read.record, "Refused content")
    for (const [where, text] of Object.entries({ ...seen.read, history: seen.history, stored: seen.stored })) {
      assert.notInclude(text, MARK, where)
    }
    assert.deepStrictEqual(filesHolding(gateway.home, MARK), [])
    assert.notInclude(logs.logged.join("\n"), MARK)
  }, SLOW)

  it("a stateless run's answer (POST /runs/wait) hides the value the model wrote out, as its stream does", async () => {
    const answer = await alice("POST", "/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("ask the server and decode"),
      context: { secrets: { ERP_TOKEN: SECRET } }
    })
    assert.strictEqual(answer.status, 200, answer.text)
    assert.include(answer.text, "Your token is [redacted] (decoded).")
    assert.notInclude(answer.text, MARK)
  }, SLOW)
})
