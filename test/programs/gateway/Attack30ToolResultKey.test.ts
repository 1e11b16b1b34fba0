/**
 * Attack round 30 on a tool result holding one of the process's own secrets whole (an MCP server's configured env
 * value: in a file the user uploaded, read with `read_file`; said back by another MCP server sharing the credential):
 * the stream's and the store's masks hid it, but the model read the result before either, and the next request of the
 * run carried it to the model's provider. Only `bash` masked it in its own output.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as McpErrorCut from "../../support/mcpErrorCut.js"
import * as Servers from "../../support/mcpServers.js"
import * as Requests from "../../support/requests.js"
import { uploadThenRun } from "../../support/uploadRun.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const KEY = "VAULTKEY-a30-tool-0123456789abcdefghij"

// what the model read as each tool's result, by the tool it called
const seenByModel: Record<string, Array<string>> = {}
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  const asked = Support.lastUserText(body)
  const tool = asked.includes("report") ? "erp_report" : "read_file"
  if (last?.role === "tool") {
    ;(seenByModel[tool] ??= []).push(JSON.stringify(last.content))
    return "Read it."
  }
  const args = tool === "read_file"
    ? { description: "read the upload", path: "/mnt/user-data/uploads/config.txt" }
    : {}
  return { toolCalls: [{ name: tool, arguments: args }] }
}

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  const erp = { type: "stdio", command: process.execPath, args: ["--input-type=module", "-e",
    McpErrorCut.answeringReport(JSON.stringify(KEY))] }
  // (the vault server does not start: its env value is one of the process's secrets all the same)
  const vault = { type: "stdio", command: process.execPath, args: ["-e", "process.exit(1)"] }
  gateway = await Support.startOverMcp("antler-attack30-tool-", {
    erp: Servers.server(erp),
    vault: { ...Servers.server(vault), env: { VAULT_KEY: KEY } }
  }, { script })
}, SLOW)
afterAll(() => gateway?.stop())

const streamed = { stream_mode: ["values", "messages-tuple", "custom"] }

describe("Attack30: a tool result holding one of the process's own secrets whole", () => {
  it("read_file: the model reads the file, none of the key", async () => {
    const { run: stream, state } = await uploadThenRun(alice, "a30-read", `vault_key: ${KEY}\n`, "stream", {
      input: Support.userInput("read my config"),
      ...streamed
    })
    assert.lengthOf(seenByModel.read_file ?? [], 1)
    assert.include(seenByModel.read_file![0], "vault_key: [redacted]", "the model read the file, masked")
    assert.notInclude(seenByModel.read_file![0], KEY, "what the model read")
    assert.notInclude(stream.text, KEY, "the stream")
    assert.notInclude(state.text, KEY, "the thread")
  }, SLOW)

  it("an MCP tool: the model reads its answer, none of the key", async () => {
    const thread = "a30-mcp"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("get the report"),
      ...streamed
    })
    assert.strictEqual(stream.status, 200, stream.text)
    assert.lengthOf(seenByModel.erp_report ?? [], 1)
    assert.include(seenByModel.erp_report![0], "upstream key [redacted] in use", "the model read the answer, masked")
    assert.notInclude(seenByModel.erp_report![0], KEY, "what the model read")
    assert.notInclude(stream.text, KEY, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.notInclude(state.text, KEY, "the thread")
  }, SLOW)
})
