/**
 * Attack round 24 on request secrets for MCP servers: a stdio server started with the run's `$ERP_TOKEN` that writes
 * it to its stderr and exits fails the call's start, whose error carries the tail of that stderr. The tail is cut
 * (its last 2000 characters kept, 300 shown): a value the cut split was shown in part (its start, or its end), which
 * no mask of the whole value hides; so was one of the server's own configured secrets. The MCP service alone, with
 * real server processes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as McpClient from "../../src/layers/McpClient.js"
import * as Servers from "../support/mcpServers.js"

const SECRET = "sk-mcp-split-4b7d-0123456789-DO-NOT-LEAK"

/** A server that, given a token, writes `before`, the token and `after` to its stderr, then exits. */
const picky = (before: number, after: number) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [
      "-e",
      `const t = process.env.ERP_TOKEN; if (t) { process.stderr.write("x".repeat(${before}) + t + ` +
      `"y".repeat(${after}), () => process.exit(1)) } else setInterval(() => {}, 1e6)`
    ],
    env: { ERP_TOKEN: "${secret:ERP_TOKEN}" }
  })

const CONFIGURED = "sk-config-split-8e2a-0123456789-DO-NOT-LEAK"

/** A server whose configured `API_KEY` (the operator's) it writes to its stderr after `before` characters. */
const leaky = (before: number) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [
      "-e",
      `process.stderr.write("x".repeat(${before}) + process.env.API_KEY + "\\n", () => process.exit(1))`
    ],
    env: { API_KEY: CONFIGURED }
  })

describe("Attack24: a request secret cut by the stderr tail of a failed MCP start", () => {
  it.scopedLive("neither its start nor its end is shown in the call's error", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: { head: picky(280, 0), tail: picky(0, 1980) },
        initTimeoutMs: 20_000
      })
      const run = { userId: "alice", threadId: "t1", secrets: Redacted.make(new Map([["ERP_TOKEN", SECRET]])) }
      for (const server of ["head", "tail"]) {
        const exit = yield* Effect.exit(mcp.call(server, "whoami", {}, run))
        const shown = JSON.stringify(exit)
        assert.strictEqual(exit._tag, "Failure", shown)
        assert.include(shown, "its stderr", shown)
        assert.notInclude(shown, SECRET.slice(0, 10), server)
        assert.notInclude(shown, SECRET.slice(-10), server)
      }
    }), 120_000)
})

describe("Attack24: a configured secret cut by the stderr tail of a failed MCP start", () => {
  it.scopedLive("a server's own key, split by the cut, is not shown in part either", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({ servers: { leaky: leaky(280) }, initTimeoutMs: 20_000 })
      const shown = JSON.stringify(yield* mcp.catalog)
      assert.include(shown, "its stderr", shown)
      assert.notInclude(shown, CONFIGURED.slice(0, 10))
    }), 120_000)
})
