/**
 * No child outlives Antler: a stdio MCP server that ignores the end of its stdin and SIGTERM (the worst
 * behaved kind) is gone soon after the `antler` that started it is killed with SIGKILL, which gives Antler no
 * chance to stop it. Through the real CLI, with the server named in `extensions_config.json`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { processAlive } from "../../src/services/ThreadStore.js"
import { antlerCommand, childEnv } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"

const SLOW = 300_000

/** A "server" that writes its pid, then ignores SIGTERM, SIGHUP, SIGINT and the end of its stdin, for good. */
const STUBBORN = `
const fs = require("fs")
for (const signal of ["SIGTERM", "SIGHUP", "SIGINT"]) process.on(signal, () => {})
process.stdin.on("data", () => {})
process.stdin.on("end", () => {})
process.stdin.on("error", () => {})
fs.writeFileSync(process.argv[2], String(process.pid))
setInterval(() => {}, 1 << 30)
`

/** Polls `check` every 20 ms until it holds or `ms` have passed; whether it held. */
const until = (check: () => boolean, ms: number) =>
  Effect.promise(async () => {
    const started = Date.now()
    while (!check()) {
      if (Date.now() - started > ms) return false
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return true
  })

describe("MCP servers die with Antler", () => {
  it.scopedLive("a stdio server that ignores stdin EOF and SIGTERM is gone soon after antler is SIGKILLed", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-mcp-life-")
      const home = Path.join(dir, "home")
      Fs.mkdirSync(home)
      const script = Path.join(dir, "stubborn.cjs")
      const pidFile = Path.join(dir, "server.pid")
      Fs.writeFileSync(script, STUBBORN)
      Fs.writeFileSync(Path.join(dir, "config.yaml"), "memory:\n  enabled: false\n")
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: { stubborn: { type: "stdio", command: process.execPath, args: [script, pidFile] } }
      }))
      let serverPid: number | undefined
      // whatever happens, the server does not outlive the test
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (serverPid !== undefined && processAlive(serverPid)) process.kill(serverPid, "SIGKILL")
        })
      )
      const child = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(
            process.execPath,
            [...antlerCommand, "run", "--config", Path.join(dir, "config.yaml"), "--base-url", "http://127.0.0.1:9/v1", "hi"],
            { env: childEnv({ ANTLER_HOME: home }), cwd: dir, stdio: ["ignore", "pipe", "pipe"] }
          )
        ),
        (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
      )
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
      const closed = new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, signal) => resolve(signal)))
      // antler starts the server when its agent is built (the handshake then waits: this server never answers)
      const started = yield* until(() => Fs.existsSync(pidFile) && Fs.readFileSync(pidFile, "utf8") !== "", 120_000)
      assert.isTrue(started, `the server was started; antler said:\n${output}`)
      serverPid = Number(Fs.readFileSync(pidFile, "utf8"))
      assert.isTrue(processAlive(serverPid))
      child.kill("SIGKILL")
      assert.strictEqual(yield* Effect.promise(() => closed), "SIGKILL")
      const gone = yield* until(() => !processAlive(serverPid!), 10_000)
      assert.isTrue(gone, `server ${serverPid} still runs after antler was killed`)
      assert.notInclude(output, "parent-death signal", "no warning: setpriv is on this machine")
    }), SLOW)
})
