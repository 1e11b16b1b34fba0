/**
 * Request-scoped secrets from the CLI (`antler run --secret NAME`, the value from `$NAME`), end to end: the CLI as a
 * process, the scripted model server, the real local sandbox. The secret reaches the `bash` command of the skill
 * that declares it (its reverse comes back to the model), and no value is in what the CLI printed (text and
 * `--json`), in the thread as `threads show` reads it, or in any file of the data directory (the SQLite store, the
 * thread's workspace, logs). A value on the command line, a name not set in the environment or not a valid name is
 * a usage error that never repeats a value.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { childEnv, runAntler, writeServeConfig } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"
import { filesHolding } from "../support/filesHolding.js"

const SECRET = "sk-erp-cli-5c1e-DO-NOT-LEAK"
const reversed = (text: string) => [...text].reverse().join("")
const SLOW = 120_000

const COMMAND = "echo \"token:[$ERP_TOKEN]\"; printf '%s' \"$ERP_TOKEN\" | rev; echo; " +
  "printf 'report for %s\\n' \"$ERP_TOKEN\" > report.txt"

const toolTexts = (body: ScriptedChatServer.ChatRequestBody) =>
  body.messages.filter((m) => m.role === "tool").map((m) => String(m.content))

/**
 * bash at once; after its result, an answer that quotes it and turns its reversed line back (as a model may: the
 * value itself then comes from the model, which only the run's redaction hides from what is printed and stored).
 */
const script = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn => {
  const tools = toolTexts(body)
  if (tools.length === 0) {
    return { toolCalls: [{ name: "bash", arguments: { description: "pull the report", command: COMMAND } }] }
  }
  const lines = tools.at(-1)!.split("\n")
  const turned = lines.find((line) => line.includes("KAEL-TON-OD")) ?? ""
  return `The command said: ${tools.at(-1)}\nThe token is ${reversed(turned.trim())}.`
}

const setup = (modelUrl: string) => {
  const dir = tempDir("antler-cli-secrets-")
  const home = Path.join(dir, "home")
  Fs.mkdirSync(Path.join(dir, "skills", "custom", "erp-report"), { recursive: true })
  Fs.writeFileSync(
    Path.join(dir, "skills", "custom", "erp-report", "SKILL.md"),
    "---\nname: erp-report\ndescription: Pull a report from the ERP\nrequired-secrets:\n  - ERP_TOKEN\n---\n" +
      "# erp-report\n\nRun the report script.\n"
  )
  const config = writeServeConfig(Path.join(dir, "config.yaml"), modelUrl, { sandbox: { allow_host_bash: true } })
  const antler = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
    Effect.promise(() =>
      runAntler(["run", "--config", config, ...args], { cwd: dir, env: childEnv({ ANTLER_HOME: home, ...env }) })
    )
  return { dir, home, config, antler }
}

describe("antler run --secret", () => {
  it.live("the skill's bash command gets $NAME's value; nothing printed or stored holds it", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const { antler, dir, home } = setup(server.url)
      const text = yield* antler(["--thread", "t-text", "--secret", "ERP_TOKEN", "/erp-report pull"], {
        ERP_TOKEN: SECRET
      })
      assert.strictEqual(text.code, 0, text.stderr)
      // the command got it: its reverse came back to the model, the value itself masked
      const answered = server.requests.filter((body) => toolTexts(body).length > 0)
      assert.isAbove(answered.length, 0)
      const result = toolTexts(answered[0]!).join("\n")
      assert.include(result, reversed(SECRET))
      assert.include(result, "token:[[redacted]]")
      for (const body of server.bodies) assert.notInclude(body, SECRET)
      assert.include(text.stdout, reversed(SECRET))
      assert.include(text.stdout, "The token is [redacted].")
      const json = yield* antler(["--json", "--thread", "t-json", "--secret", "ERP_TOKEN", "/erp-report pull"], {
        ERP_TOKEN: SECRET
      })
      assert.strictEqual(json.code, 0, json.stderr)
      assert.include(json.stdout, "tool_output")
      assert.include(json.stdout, reversed(SECRET))
      const shown = yield* Effect.promise(() =>
        runAntler(["threads", "show", "t-json", "--json"], {
          cwd: dir,
          env: childEnv({ ANTLER_HOME: home })
        })
      )
      assert.strictEqual(shown.code, 0, shown.stderr)
      assert.include(shown.stdout, "token:[[redacted]]")
      for (const output of [text.stdout, text.stderr, json.stdout, json.stderr, shown.stdout]) {
        assert.notInclude(output, SECRET)
      }
      // the store, the workspace's report.txt (a file the command wrote is the user's: it holds what was written)
      // aside, no file of the data directory holds it
      const holding = filesHolding(home, SECRET)
      assert.deepStrictEqual(holding.filter((file) => !file.endsWith(Path.join("workspace", "report.txt"))), [])
      assert.isAbove(holding.length, 0, "the command wrote its report with the secret")
    })), SLOW)

  it.live("an MCP server naming ${secret:ERP_TOKEN} in its env gets the value for the run's call, hidden after", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start((body) =>
        body.messages.at(-1)?.role === "tool"
          ? `It said: ${String(body.messages.at(-1)!.content)}`
          : { toolCalls: [{ name: "local_whoami", arguments: {} }] }
      )
      const { antler, dir, home } = setup(server.url)
      const echo = Path.resolve(import.meta.dirname, "../fixtures/echo-secrets-mcp.mjs")
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: {
          local: {
            type: "stdio",
            command: process.execPath,
            args: [echo, "stdio"],
            env: { ERP_TOKEN: "${secret:ERP_TOKEN}" }
          }
        }
      }))
      const run = yield* antler(["--json", "--secret", "ERP_TOKEN", "ask the server"], { ERP_TOKEN: SECRET })
      assert.strictEqual(run.code, 0, run.stderr)
      const answered = server.requests.filter((body) => toolTexts(body).length > 0)
      assert.include(toolTexts(answered[0]!).join("\n"), `token:[[redacted]] rev:[${reversed(SECRET)}]`)
      assert.notInclude(run.stdout + run.stderr, SECRET)
      assert.deepStrictEqual(filesHolding(home, SECRET), [])
      // without --secret, the server's env has no ERP_TOKEN, though Antler's has
      const plain = yield* antler(["ask the server"], { ERP_TOKEN: SECRET })
      assert.strictEqual(plain.code, 0, plain.stderr)
      assert.include(toolTexts(server.requests.at(-1)!).join("\n"), "token:[] rev:[]")
    })), SLOW)

  it.live("without --secret the command gets nothing, though the variable is in Antler's environment", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const { antler } = setup(server.url)
      const run = yield* antler(["/erp-report pull"], { ERP_TOKEN: SECRET })
      assert.strictEqual(run.code, 0, run.stderr)
      const answered = server.requests.filter((body) => toolTexts(body).length > 0)
      assert.include(toolTexts(answered[0]!).join("\n"), "token:[]")
    })), SLOW)

  it.live("a value on the command line, an unset variable or a bad name is a usage error; no run starts", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const { antler } = setup(server.url)
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        [["--secret", `ERP_TOKEN=${SECRET}`], "--secret takes a name, never a value"],
        [["--secret", "MISSING_TOKEN"], "--secret MISSING_TOKEN: $MISSING_TOKEN is not set in the environment"],
        [["--secret", "9-bad name"], "\"9-bad name\" is not a valid secret name"]
      ]
      for (const [flags, expected] of cases) {
        const run = yield* antler([...flags, "/erp-report pull"], { ERP_TOKEN: SECRET })
        assert.strictEqual(run.code, 2, run.stderr)
        assert.include(run.stderr, expected)
        assert.notInclude(run.stderr + run.stdout, SECRET)
      }
      assert.strictEqual(server.requests.length, 0)
    })), SLOW)
})
