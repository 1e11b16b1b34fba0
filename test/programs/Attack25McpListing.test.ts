/**
 * Attack round 25 on the per-run MCP listing (`Mcp.catalogWith`): a server naming `${secret:NAME}` that does not list
 * its tools without it is listed for each run with the run's values, on a connection of its own. A stdio server
 * started so that writes the value to its stderr and exits fails the listing's start, whose error (the run's warning,
 * streamed and kept in its journal) carries the tail of that stderr, cut to its last characters. A call's connection
 * hides the run's values from its stderr as it arrives (round 24); the listing's did not: with the value inside a
 * longer variable (`Bearer ${secret:ERP_TOKEN}`, which is what its entry's own secrets hide whole), the cut showed the
 * start or the end of the value, which no mask of the whole value hides. The MCP service alone, real server processes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as McpClient from "../../src/layers/McpClient.js"
import * as Servers from "../support/mcpServers.js"

const SECRET = "sk-list-split-5c9e-0123456789-DO-NOT-LEAK"

/**
 * A server that, given its `ERP_AUTH` (`Bearer <token>`), writes `before` characters, the token and `after` to its
 * stderr, then exits; without one it exits at once (it lists nothing without the user's credential).
 */
const picky = (before: number, after: number) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [
      "-e",
      `const a = process.env.ERP_AUTH ?? ""; const t = a.replace(/^Bearer /, ""); if (t) { process.stderr.write(` +
      `"x".repeat(${before}) + t + "y".repeat(${after}), () => process.exit(1)) } else process.exit(1)`
    ],
    env: { ERP_AUTH: "Bearer ${secret:ERP_TOKEN}" }
  })

const LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-0123456789-DO-NOT-LEAK"
const KEY = `-----BEGIN ERP KEY-----\n${LINE}\n-----END ERP KEY-----`

/** A server that, given its key, writes `before` characters and the key's body (its second line) to its stderr. */
const keyed = (before: number) =>
  Servers.server({
    type: "stdio",
    command: process.execPath,
    args: [
      "-e",
      `const k = process.env.ERP_KEY ?? ""; if (k) { process.stderr.write("x".repeat(${before}) + ` +
      `k.split("\\n")[1], () => process.exit(1)) } else process.exit(1)`
    ],
    env: { ERP_KEY: "${secret:ERP_KEY}" }
  })

describe("Attack25: a request secret cut by the stderr tail of a failed per-run MCP listing", () => {
  it.scopedLive("neither its start nor its end is shown in the run's listing problems", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({
        servers: { head: picky(280, 0), tail: picky(0, 1980) },
        initTimeoutMs: 20_000
      })
      // (without the secret neither lists: listed per run)
      const shared = yield* mcp.catalog
      assert.lengthOf(shared.tools, 0)
      const listed = yield* mcp.catalogWith!(Redacted.make(new Map([["ERP_TOKEN", SECRET]])))
      const shown = JSON.stringify(listed.problems)
      for (const server of ["head", "tail"]) {
        const problem = listed.problems.find((p) => p.server === server)?.message ?? ""
        assert.include(problem, "its stderr", shown)
      }
      assert.notInclude(shown, SECRET.slice(0, 10))
      assert.notInclude(shown, SECRET.slice(-10))
    }), 120_000)

  it.scopedLive("a line of a value of several lines (a key's body), split by the cut, is not shown in part", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({ servers: { key: keyed(280) }, initTimeoutMs: 20_000 })
      const listed = yield* mcp.catalogWith!(Redacted.make(new Map([["ERP_KEY", KEY]])))
      const shown = JSON.stringify(listed.problems)
      assert.include(shown, "its stderr", shown)
      assert.notInclude(shown, LINE.slice(0, 10))
      // (a call's connection, made so too)
      const call = JSON.stringify(yield* Effect.exit(mcp.call("key", "whoami", {}, {
        userId: "alice",
        threadId: "t1",
        secrets: Redacted.make(new Map([["ERP_KEY", KEY]]))
      })))
      assert.include(call, "its stderr", call)
      assert.notInclude(call, LINE.slice(0, 10))
    }), 120_000)
})
