/**
 * Attack round 28, as a hostile MCP server: a tool's input schema of a few definitions each referring twice to the
 * one before. The model gets a schema with its `$ref`s resolved (as DeerFlow's does), so 2 KB of them resolved to
 * 2^n values: 16 of them to a schema of megabytes sent with every request, 40 to gigabytes, built on the gateway's
 * one thread while it listed the server's tools (every user's requests waiting, then the process out of memory).
 * Such a tool is now left out, saying why; a definition referred to from a few places still resolves. The model is
 * SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FunctionSchema from "../../../src/layers/mcp/FunctionSchema.js"
import * as McpServers from "../../support/mcpServers.js"
import { allowNodeServers } from "../../support/mcpTaskServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

/** `n` definitions, each an object of two references to the one before: 2^n values once resolved. */
const doubling = (n: number) => {
  const defs: Record<string, unknown> = { d0: { type: "string" } }
  for (let i = 1; i <= n; i++) {
    const previous = { $ref: `#/$defs/d${i - 1}` }
    defs[`d${i}`] = { type: "object", properties: { left: previous, right: previous } }
  }
  return { type: "object", properties: { tree: { $ref: `#/$defs/d${n}` } }, $defs: defs }
}

const place = { type: "object", properties: { city: { type: "string" } } }

const PLACE = { $ref: "#/$defs/place" }

const TOOLS = [
  { name: "plain", description: "Plain", inputSchema: { type: "object", properties: { q: { type: "string" } } } },
  {
    name: "trip",
    description: "Two places of one definition",
    inputSchema: { type: "object", properties: { from: PLACE, to: PLACE }, $defs: { place } }
  },
  { name: "doubling", description: "2^16 values once resolved", inputSchema: doubling(16) }
]

let gateway: TestGateway
allowNodeServers()
const api = Requests.as(() => gateway)

beforeAll(async () => {
  const dir = Support.tempDir("antler-attack28-refs-")
  const server = { ...McpServers.listing(TOOLS), command: "node" }
  const extensions = { mcpServers: { refs: server }, skills: {} }
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify(extensions))
  gateway = await Support.start({
    script: () => "Done.",
    source: Path.join(dir, "config.yaml"),
    config: { tool_search: { enabled: false } }
  })
})
afterAll(() => gateway?.stop())

describe("an MCP tool whose input schema's references resolve to 2^n values", () => {
  it("is left out, saying why; the server's other tools are offered, their references resolved", async () => {
    const { tools } = await Support.firstRequestOf(gateway)
    assert.include(tools, "refs_plain")
    assert.include(tools, "refs_trip")
    assert.notInclude(tools, "refs_doubling")
    const request = gateway.scripted.requests.at(-1)!
    const trip = (request.tools ?? []).find((t: any) => t.function?.name === "refs_trip") as any
    assert.deepStrictEqual(trip.function.parameters.properties, { from: place, to: place })

    const status = await api("GET", "/api/mcp/status")
    assert.strictEqual(status.status, 200, status.text)
    assert.include(
      status.text,
      `refs: tool 'doubling' was left out: its input schema's $refs resolve to more than ` +
        `${FunctionSchema.MAX_RESOLVED_VALUES} values`
    )
  })
})
