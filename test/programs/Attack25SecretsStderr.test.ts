/**
 * Attack round 25 on the stderr of MCP server starts: it is redacted as it streams, and the redactor holds back a
 * last word that may still become a URL with credentials (`db:5432`) or the beginning of a secret. A server that
 * wrote its last words without a line break and exited had them lost from the failed start's error (the stream was
 * never ended); they are shown now, a held-back beginning of the request secret masked, and the secret said back
 * base64-encoded is masked too. The MCP service alone, with real server processes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as McpClient from "../../src/layers/McpClient.js"
import * as Servers from "../support/mcpServers.js"

const SECRET = "sk-erp-stderr-7c2d-0123456789-DO-NOT-LEAK"

/** A server that, given the token, writes `script`'s text (with `t` the token) to its stderr, then exits. */
const dying = (script: string) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [
      "-e",
      `const t = process.env.ERP_TOKEN; if (t) { process.stderr.write(${script}, () => process.exit(1)) } ` +
      `else setInterval(() => {}, 1e6)`
    ],
    env: { ERP_TOKEN: "${secret:ERP_TOKEN}" }
  })

describe("Attack25: the last words of a failed MCP start's stderr", () => {
  it.scopedLive("are shown (a held-back word, not lost), with the secret's beginning and its base64 masked", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: {
          word: dying(`"fatal: cannot reach erp.internal:8443"`),
          cut: dying(`"auth failed for " + Buffer.from(t).toString("base64") + " using " + t.slice(0, 12)`)
        },
        initTimeoutMs: 20_000
      })
      const run = { userId: "alice", threadId: "t1", secrets: Redacted.make(new Map([["ERP_TOKEN", SECRET]])) }
      const word = JSON.stringify(yield* Effect.exit(mcp.call("word", "whoami", {}, run)))
      assert.include(word, "its stderr", word)
      assert.include(word, "cannot reach erp.internal:8443", word)
      const cut = JSON.stringify(yield* Effect.exit(mcp.call("cut", "whoami", {}, run)))
      assert.include(cut, "its stderr", cut)
      assert.include(cut, "auth failed for [redacted] using [redacted]", cut)
      assert.notInclude(cut, SECRET.slice(0, 6))
      assert.notInclude(cut, Buffer.from(SECRET).toString("base64").slice(0, 12))
    }), 120_000)
})
