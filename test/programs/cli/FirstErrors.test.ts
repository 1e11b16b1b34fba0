/**
 * The errors a newcomer meets first, as they see them (child processes from sources, each with its own data
 * directory): each says what is wrong and where, in one readable message, with no stack trace.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import { antlerCommand, childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"
import * as HttpServer from "../../support/httpServer.js"

const SLOW = 120_000

const antler = (args: ReadonlyArray<string>, cwd: string) =>
  Effect.promise(() => runAntler(args, { cwd, env: childEnv({ ANTLER_HOME: Path.join(cwd, "home") }) }))

/** No line of a JavaScript stack (`    at fn (file:1:2)`). */
const noStack = (text: string) => assert.notMatch(text, /^\s+at .+:\d+:\d+\)?$/m, text)

describe("the first errors", () => {
  it.live("serve on a port another program listens on: exit 2, the address, that it is in use and what to do", () =>
    Effect.gen(function*() {
      const taken = yield* HttpServer.start((_, response) => response.end("someone else"))
      const dir = tempDir("antler-first-serve-")
      const serve = yield* antler(["serve", "--port", String(taken.port), "--base-url", "http://127.0.0.1:9/v1"], dir)
      assert.strictEqual(serve.code, 2, serve.stderr)
      assert.include(
        serve.stderr,
        `antler serve: cannot listen on 127.0.0.1:${taken.port}: the address is in use (another antler serve, or ` +
          "another program, listens there); stop it, or choose another port with --port or gateway.port"
      )
      assert.notInclude(serve.stdout, "listening")
      noStack(serve.stderr)
    }).pipe(Effect.scoped), SLOW)

  it.live("a model that refuses a call without a key: the run's error says no key was sent and where to set one", () =>
    Effect.gen(function*() {
      const provider = yield* HttpServer.start((_, response) => {
        response.writeHead(401, { "content-type": "application/json" })
        response.end(JSON.stringify({ error: { message: "Unauthorized", type: "invalid_request_error", code: null } }))
      })
      const dir = tempDir("antler-first-key-")
      Fs.writeFileSync(
        Path.join(dir, "config.yaml"),
        `models:\n  - name: main\n    model: m\n    base_url: ${provider.url}/v1\nmemory:\n  enabled: false\n`
      )
      const run = yield* antler(["run", "hello"], dir)
      assert.strictEqual(run.code, 1, run.stderr)
      const both = run.stdout + run.stderr
      assert.include(both, `The model call failed (model m at ${provider.url}/v1): 401 Unauthorized No API key was sent`)
      assert.include(both, "(api_key in its config.yaml entry, --api-key, or OPENAI_API_KEY)")
      assert.strictEqual(provider.requests.length, 1, "an authentication failure is not retried")
      noStack(both)
    }).pipe(Effect.scoped), SLOW)
})

describe("a reader that goes away", () => {
  it.live("antler run ... | head -1: the run is cancelled as by Ctrl-C (exit 130, thread cancelled), no EPIPE stack", () =>
    Effect.gen(function*() {
      // (a long answer, streamed slowly, that never ends: only the cancellation can end the run)
      const model = yield* ScriptedChatServer.start([{ content: "word ".repeat(4000), stall: true }], {
        chunkSize: 5,
        delayMs: 2
      })
      const dir = tempDir("antler-first-pipe-")
      Fs.writeFileSync(Path.join(dir, "config.yaml"), "memory:\n  enabled: false\n")
      const env = childEnv({ ANTLER_HOME: Path.join(dir, "home") })
      const args = ["run", "--thread", "pipe1", "--base-url", model.url, "--api-key", "none", "hello"]
      const ended = yield* Effect.promise(() =>
        new Promise<{ code: number | null; stderr: string }>((resolve) => {
          const child = ChildProcess.spawn(process.execPath, [...antlerCommand, ...args], { cwd: dir, env })
          let stderr = ""
          child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
          // (head -1: the first output read, then the pipe closed)
          child.stdout.once("data", () => child.stdout.destroy())
          child.on("close", (code) => resolve({ code, stderr }))
        })
      )
      assert.strictEqual(ended.code, 130, ended.stderr)
      assert.notInclude(ended.stderr, "EPIPE")
      noStack(ended.stderr)
      const listed = yield* antler(["threads", "list", "--json"], dir)
      const thread = (JSON.parse(listed.stdout) as Array<{ thread_id: string; status: string }>).find((t) => t.thread_id === "pipe1")
      assert.strictEqual(thread?.status, "cancelled", listed.stdout)
    }).pipe(Effect.scoped), SLOW)
})
