/**
 * Attack round 25 on the per-run MCP listing's problems and roles (`authorization.enabled`): a server that lists its
 * tools only with a request secret is told to a run that did not give it as a warning naming the server and its
 * secrets (`SecretRefs.notListed`), streamed to the run's user. A role whose `mcp_servers` policy denies that server
 * never gets its tools, but got the warning: the server's name, its secrets' names, and the text of its failure
 * reached a user who should not learn of it; so did a subagent's refusal of a call of one of its tools, saying why it
 * has none (`SubagentGatedTools`). A real stdio server, through the gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import { rbac } from "../../support/rbac.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const GUEST = "guest-token-0123456789abcdef"
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const guest = Requests.as(() => gateway, GUEST)

const isSubagent = (body: ChatRequestBody) => JSON.stringify(body.messages).includes("general-purpose subagent")

/** "delegate": a subagent, whose model calls the server's tool though it is not offered; else an echo. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (isSubagent(body)) {
    if (last?.role === "tool") return "Sub done."
    return { toolCalls: [{ name: "ledger_report", arguments: {} }] }
  }
  if (!Support.lastUserText(body).includes("delegate")) return `You said: ${Support.lastUserText(body)}`
  if (last?.role === "tool") return "Parent done."
  const args = { description: "ask the ledger", prompt: "the report", subagent_type: "general-purpose" }
  return { toolCalls: [{ name: "task", arguments: args }] }
}

beforeAll(async () => {
  const dir = Support.tempDir("antler-attack25-role-")
  Fs.writeFileSync(
    Path.join(dir, "extensions_config.json"),
    JSON.stringify({
      mcpServers: {
        // (it lists nothing without its user's credential: it exits)
        ledger: {
          type: "stdio",
          command: process.execPath,
          args: ["-e", "process.stderr.write('ledger.internal:5432 refused\\n', () => process.exit(1))"],
          env: { LEDGER_TOKEN: "${secret:LEDGER_TOKEN}" }
        }
      },
      skills: {}
    })
  )
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      authorization: rbac({ user: {}, guest: { mcp_servers: { deny: ["ledger"] } } })
    }
  })
}, SLOW)
afterAll(() => gateway?.stop())

const streamed = async (as: typeof alice, thread: string, text = "hello", context: Record<string, unknown> = {}) => {
  assert.strictEqual((await as("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await as("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context,
    stream_mode: ["values", "custom"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  return stream.text
}

describe("Attack25: a server the role may not use, in the per-run listing's warnings", () => {
  it("is told to a role that may use it, never to one that may not", async () => {
    // (a user who may use it is told why it has none of its tools)
    const hers = await streamed(alice, "role-alice")
    assert.include(hers, "ledger")
    assert.include(hers, "LEDGER_TOKEN")
    const his = await streamed(guest, "role-guest")
    assert.include(his, "You said: ")
    assert.notInclude(his, "ledger")
    assert.notInclude(his, "LEDGER_TOKEN")
  }, SLOW)

  it("a subagent's call of its tool is not told why, to a role that may not use it", async () => {
    const subResult = async (as: typeof alice, thread: string) => {
      const before = gateway.scripted.requests.length
      await streamed(as, thread, "delegate please", { subagent_enabled: true })
      const sub = gateway.scripted.requests.slice(before).filter(isSubagent)
      assert.isAbove(sub.length, 1)
      return contentText(sub.at(-1)!.messages.at(-1)!.content as never)
    }
    assert.include(await subResult(alice, "sub-alice"), "MCP server 'ledger'")
    const his = await subResult(guest, "sub-guest")
    assert.include(his, "Error: Tool 'ledger_report' does not exist.")
    assert.notInclude(his, "ledger'", his)
    assert.notInclude(his, "LEDGER_TOKEN")
  }, SLOW)
})
