/**
 * Attack round 25 on a gateway run's request secrets (`context.secrets`) of several lines (a private key): a tool's
 * result has each line of one masked (`SkillSecrets.maskedTexts`: output is masked a line at a time), as the memory
 * update has; but the run's redactor (its stream, its journal, its answer) and the store it writes through
 * (`RunSecretsStore`) hid the whole value only. A hostile model that read a form nothing masks (the server's reversed
 * echo) and wrote out one line of the key, its body, had it streamed and kept in the thread and the database. A real
 * stdio MCP server naming `${secret:ERP_KEY}` in its env.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { filesHolding } from "../../support/filesHolding.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const MARK = "DO-NOT-LEAK"
const BODY = `MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-${MARK}`
const KEY = `-----BEGIN ERP KEY-----\n${BODY}\n-----END ERP KEY-----`
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

/** The agent: calls the server, then writes out the key's body, read from the server's reversed echo. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") {
    const rev = /rev:\[([^\]]+)\]/s.exec(contentText(last.content as never))?.[1] ?? ""
    const key = [...rev].reverse().join("")
    return `The key's body is ${key.split("\n")[1] ?? "(none)"}.`
  }
  return { toolCalls: [{ name: "echo_whoami", arguments: {} }] }
}

beforeAll(async () => {
  const echo = { type: "stdio", command: process.execPath, args: [ECHO, "stdio"] }
  gateway = await Support.startOverMcp("antler-attack25-lines-", {
    echo: { ...echo, env: { ERP_TOKEN: "${secret:ERP_KEY}" } }
  }, { script })
}, SLOW)
afterAll(() => gateway?.stop())

describe("Attack25: a request secret of several lines", () => {
  it("a line of it the model writes out is hidden from the stream, the thread and the database", async () => {
    const thread = "key-lines"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("show me the key"),
      context: { secrets: { ERP_KEY: KEY } },
      stream_mode: ["values", "messages-tuple", "events"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const state = await alice("GET", `/threads/${thread}/state`)
    const messages = state.json().values.messages as ReadonlyArray<any>
    // the server got it, its lines masked in the result; the model wrote one out: hidden
    assert.include(String(messages.find((m) => m.type === "tool")?.content), "token:[[redacted]")
    assert.include(String(messages.filter((m) => m.type === "ai").at(-1)?.content), "The key's body is [redacted].")
    const runId = (await alice("GET", `/threads/${thread}/runs`)).json()[0].run_id as string
    const events = await alice("GET", `/api/threads/${thread}/runs/${runId}/events`)
    const history = await alice("POST", `/threads/${thread}/history`, {})
    const stored = JSON.stringify(await Effect.runPromise(gateway.store.load(thread)))
    const seen = { stream: stream.text, state: state.text, events: events.text, history: history.text, stored }
    for (const [where, text] of Object.entries(seen)) assert.notInclude(text, MARK, where)
    assert.deepStrictEqual(filesHolding(gateway.home, MARK), [])
  }, SLOW)
})
