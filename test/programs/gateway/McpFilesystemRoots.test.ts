/**
 * An MCP filesystem server's roots through the whole app: the gateway's agent reads a file under the root of the
 * enabled `server-filesystem` entry of `extensions_config.json` with `read_file` (the sandbox takes the roots from
 * the app's MCP service), and once the gateway's MCP settings switch the server off, the next run's `read_file`
 * is refused, without a restart. The server itself never needs to start (a stub command that fails): only its
 * configuration matters here, as in DeerFlow.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let root: string

const toolResults = (body: ChatRequestBody) =>
  body.messages.filter((m) => m.role === "tool").map((m) => String(m.content))

const script = (body: ChatRequestBody): Turn =>
  toolResults(body).length === 0
    ? { toolCalls: [{ name: "read_file", arguments: { description: "read it", path: `${root}/shared.txt` } }] }
    : "done"

beforeAll(async () => {
  const home = Support.tempDir("antler-mcp-roots-")
  root = Support.tempDir("antler-mcp-root-")
  Fs.writeFileSync(Path.join(root, "shared.txt"), "shared through the filesystem server")
  Fs.writeFileSync(
    Path.join(home, "extensions_config.json"),
    JSON.stringify({
      mcpServers: {
        files: {
          enabled: true,
          command: process.execPath,
          args: ["-e", "process.exit(1)", "@modelcontextprotocol/server-filesystem", root],
          session_init_timeout: 5
        }
      }
    })
  )
  gateway = await Support.start({ script, home, source: Path.join(home, "config.yaml") })
})
afterAll(async () => {
  await gateway?.stop()
})

/** What `read_file` answered in a fresh run. */
const readResult = async (thread: string) => {
  const before = gateway.scripted.requests.length
  const run = await fetch(`${gateway.url}/api/threads/${thread}/runs/wait`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead-agent",
      input: { messages: [{ role: "user", content: "read the shared file" }] },
      if_not_exists: "create"
    })
  })
  assert.strictEqual(run.status, 200, await run.clone().text())
  const requests = gateway.scripted.requests.slice(before)
  return toolResults(requests[requests.length - 1]!).join("\n")
}

describe("an enabled MCP filesystem server's roots in the gateway's runs", () => {
  it("are readable while the server is enabled and refused once the MCP settings switch it off", async () => {
    assert.include(await readResult("t-roots-1"), "shared through the filesystem server")
    const patched = await fetch(`${gateway.url}/api/mcp/config`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ server_name: "files", enabled: false })
    })
    assert.strictEqual(patched.status, 200, await patched.clone().text())
    const after = await readResult("t-roots-2")
    assert.notInclude(after, "shared through the filesystem server")
    assert.include(after, "outside the sandbox")
  })
})
