/**
 * Attack round 23b on request secrets for MCP servers (`${secret:NAME}` in a header): a value no HTTP header can
 * carry must not reach the HTTP client, whose refusal repeats the header's value (a NUL: `Headers.append: "Bearer
 * ..." is an invalid header value`) or fails the call (a character past U+00FF). Against the real echo server over
 * streamable HTTP (test/fixtures/echo-secrets-mcp.mjs), the MCP service alone.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as McpClient from "../../src/layers/McpClient.js"
import type { McpResult } from "../../src/services/Mcp.js"
import * as Servers from "../support/mcpServers.js"
import * as Support from "./gateway/support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const SECRET = "sk-mcp-nul-7c1e-DO-NOT-LEAK"

const textOf = (result: McpResult) => result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n")

const startHttpEcho = async (log: string) => {
  const child = ChildProcess.spawn(process.execPath, [ECHO, "http"], {
    env: { ...process.env, ECHO_LOG: log },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = /^(http:\/\/\S+)\n/.exec(out)
      if (line !== null) resolve(line[1]!)
    })
    child.on("exit", (code) => reject(new Error(`the HTTP echo server exited (${code})`)))
  })
  return { url, child }
}

describe("Attack23b: a request secret no header can carry", () => {
  it.scopedLive("a NUL or a character past U+00FF leaves the header out, never in an error or the result", () =>
    Effect.gen(function*() {
      const dir = Support.tempDir("antler-mcp-secret-nul-")
      const http = yield* Effect.acquireRelease(
        Effect.promise(() => startHttpEcho(Path.join(dir, "echo.log"))),
        ({ child }) => Effect.sync(() => child.kill())
      )
      const headers = { Authorization: "Bearer ${secret:ERP_TOKEN}" }
      const remote = Servers.server({ type: "http", url: http.url, headers })
      const mcp = yield* McpClient.make({ servers: { remote } })
      for (const value of [`${SECRET}\u0000x`, `${SECRET}\u0100x`]) {
        const run = { userId: "alice", threadId: "t1", secrets: Redacted.make(new Map([["ERP_TOKEN", value]])) }
        const exit = yield* Effect.exit(mcp.call("remote", "whoami", {}, run))
        const shown = JSON.stringify(exit)
        assert.notInclude(shown, SECRET)
        assert.strictEqual(exit._tag, "Success", shown)
        if (exit._tag === "Success") assert.include(textOf(exit.value), "token:[]")
      }
    }), 120_000)
})
