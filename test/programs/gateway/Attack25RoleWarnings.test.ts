/**
 * Attack round 25 on the per-run MCP listing's problems and roles (`authorization.enabled`): a server that lists its
 * tools only with a request secret is told to a run that did not give it as a warning naming the server and its
 * secrets (`SecretRefs.notListed`), streamed to the run's user. A role whose `mcp_servers` policy denies that server
 * never gets its tools, but got the warning: the server's name, its secrets' names, and the text of its failure
 * reached a user who should not learn of it. A real stdio server, through the gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { rbac } from "../../support/rbac.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const GUEST = "guest-token-0123456789abcdef"
const SLOW = 120_000

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const guest = Requests.as(() => gateway, GUEST)

const script = (body: ChatRequestBody): Turn => `You said: ${Support.lastUserText(body)}`

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

const streamed = async (as: typeof alice, thread: string) => {
  assert.strictEqual((await as("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await as("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput("hello"),
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
})
