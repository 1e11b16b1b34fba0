/**
 * The `antler` CLI end to end, as a user runs it: child processes (`node --import tsx src/programs/main.ts`)
 * with their own data directory, against aimock started as a separate process (a Chat Completions server
 * nobody here wrote), and against the scripted server for Ctrl-C. Plus the pure parts: model choice and
 * rendering.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as Cli from "../../src/programs/Cli.js"
import * as Demo from "../../src/programs/Demo.js"
import * as Render from "../../src/programs/Render.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as TS from "../../src/state/ThreadState.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const MAIN = Path.join(ROOT, "src/programs/main.ts")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const AIMOCK = Path.join(ROOT, "node_modules/@copilotkit/aimock/dist/cli.js")
const SLOW = 180_000

const tempDir = (prefix: string) => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix)))

/** The environment of a child: no OPENAI_* / ANTLER_* from outside, no colour. */
const childEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
  }
  return { ...env, NO_COLOR: "1", ...extra }
}

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

interface Spawned {
  readonly child: ChildProcess.ChildProcess
  readonly output: () => string
  readonly done: Promise<Result>
}

const spawn = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly env: NodeJS.ProcessEnv; readonly cwd: string }
): Spawned => {
  const child = ChildProcess.spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const done = new Promise<Result>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })))
  return { child, output: () => stdout, done }
}

/** Runs `antler ...` from sources with `home` as its data directory, in `cwd` (a temp dir by default). */
const antler = (home: string, args: ReadonlyArray<string>, extra: Record<string, string> = {}, cwd = home) =>
  spawn(process.execPath, ["--import", TSX, MAIN, ...args], { env: childEnv({ ANTLER_HOME: home, ...extra }), cwd })

const antlerDone = (home: string, args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
  Effect.promise(() => antler(home, args, extra).done)

const waitFor = async (check: () => boolean, what: string, ms = 120_000) => {
  const started = Date.now()
  while (!check()) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const jsonLines = (stdout: string) =>
  stdout.split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as RunEvent & { thread_id: string; run_id: string })

// ---------------------------------------------------------------------------------------------------------
// aimock, as a separate process

const FIXTURES = {
  fixtures: [
    // Answers only after the tool really ran: the tool's result must be `OK`.
    {
      match: { toolCallId: "call_e2e_write", toolResultContains: "OK" },
      response: { content: "Saved hello.txt in your workspace." }
    },
    {
      match: { toolCallId: "call_e2e_read" },
      response: { content: "The greeting file is still there." }
    },
    {
      match: { userMessage: "save a greeting" },
      response: {
        content: "I'll save it now.",
        toolCalls: [{
          name: "write_file",
          arguments: JSON.stringify({
            description: "Save the greeting",
            path: "/mnt/user-data/workspace/hello.txt",
            content: "hello from aimock\n"
          }),
          id: "call_e2e_write"
        }]
      }
    },
    {
      match: { userMessage: "check the greeting" },
      response: {
        content: "Checking.",
        toolCalls: [{
          name: "read_file",
          arguments: JSON.stringify({ description: "Check it", path: "/mnt/user-data/workspace/hello.txt" }),
          id: "call_e2e_read"
        }]
      }
    }
  ]
}

let aimock: Spawned | undefined
let aimockUrl = ""
const home = tempDir("antler-cli-home-")

beforeAll(async () => {
  const dir = tempDir("antler-aimock-")
  Fs.writeFileSync(Path.join(dir, "fixtures.json"), JSON.stringify(FIXTURES))
  const args = [AIMOCK, "-p", "0", "-h", "127.0.0.1", "-f", dir, "-c", "5", "--log-level", "info"]
  aimock = spawn(process.execPath, args, { env: childEnv({}), cwd: dir })
  await waitFor(() => /listening on (http:\/\/\S+)/.test(aimock!.output()), "aimock to listen", 60_000)
  aimockUrl = /listening on (http:\/\/\S+)/.exec(aimock.output())![1]!
}, 90_000)

afterAll(() => {
  aimock?.child.kill("SIGTERM")
})

// ---------------------------------------------------------------------------------------------------------

describe("antler run (against aimock, a separate process)", () => {
  let threadId = ""

  it.live("streams the answer, shows the tool call and its result, and runs the tool for real", () =>
    Effect.gen(function*() {
      const result = yield* antlerDone(home, [
        "run", "--base-url", `${aimockUrl}/v1`, "--api-key", "x", "please", "save a greeting"
      ])
      assert.strictEqual(result.code, 0, result.stderr)
      const out = result.stdout
      const server = "http:\\/\\/127\\.0\\.0\\.1:\\d+\\/v1"
      const pattern = `^thread (\\S+) \\(new; continue it with --thread\\) · model gpt-4o-mini at ${server}$`
      const header = new RegExp(pattern, "m").exec(out)
      assert.isNotNull(header, out)
      threadId = header![1]!
      const lines = out.split("\n")
      const call = lines.findIndex((l) => l.startsWith("→ write_file({\"description\":\"Save the greeting\""))
      assert.isAbove(call, 0, out)
      assert.strictEqual(lines[call - 1], "I'll save it now.")
      assert.strictEqual(lines[call + 1], "← OK")
      assert.strictEqual(lines[call + 2], "Saved hello.txt in your workspace.")
      assert.strictEqual(lines[call + 3], `— completed · thread ${threadId}`)
      // The tool really ran: the file is in the thread's workspace under the data directory.
      const file = Path.join(home, "users/default/threads", threadId, "user-data/workspace/hello.txt")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "hello from aimock\n")
    }), SLOW)

  it.live("--json prints one event per line, each with the thread and run ids, ending with run_end", () =>
    Effect.gen(function*() {
      assert.notStrictEqual(threadId, "", "needs the thread of the previous test")
      const result = yield* antlerDone(home, [
        "run", "--json", "--thread", threadId, "--base-url", `${aimockUrl}/v1`, "--api-key", "x", "check the greeting"
      ])
      assert.strictEqual(result.code, 0, result.stderr)
      const events = jsonLines(result.stdout)
      const runId = events[0]!.run_id
      assert.strictEqual(events[0]!.type, "run_start")
      for (const event of events) {
        assert.strictEqual(event.thread_id, threadId)
        assert.strictEqual(event.run_id, runId)
      }
      const last = events[events.length - 1]!
      assert.deepInclude(last, { type: "run_end", status: "success", stop_reason: "completed" })
      // A message may be written again with the same id (the run stamps the human one): keep the last write.
      const byId = new Map<string, M.Message>()
      for (const e of events) if (e.type === "message") byId.set(e.message.id, e.message)
      const messages = [...byId.values()]
      assert.deepStrictEqual(messages.map((m) => m.type), ["human", "ai", "tool", "ai"])
      assert.strictEqual(M.text(messages[2]!), "hello from aimock\n")
      // The answer arrived as several token deltas that add up to the final message.
      const final = messages[3]!
      const tokens = events.flatMap((e) => (e.type === "token" && e.message_id === final.id ? [e.text ?? ""] : []))
      assert.isAbove(tokens.length, 1)
      assert.strictEqual(tokens.join(""), M.text(final))
      assert.strictEqual(M.text(final), "The greeting file is still there.")
    }), SLOW)

  it.live("threads list and threads show present the saved thread", () =>
    Effect.gen(function*() {
      assert.notStrictEqual(threadId, "", "needs the thread of the previous tests")
      const list = yield* antlerDone(home, ["threads", "list"])
      assert.strictEqual(list.code, 0, list.stderr)
      assert.match(list.stdout, new RegExp(`^${threadId} `, "m"))
      const shown = yield* antlerDone(home, ["threads", "show", threadId, "--json"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const thread = JSON.parse(shown.stdout)
      assert.strictEqual(thread.thread_id, threadId)
      const types = thread.state.messages.map((m: M.Message) => m.type)
      assert.deepStrictEqual(types, ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"])
      assert.strictEqual(thread.state.messages[0].content, "please save a greeting")
      assert.deepStrictEqual(thread.runs.map((r: { status: string }) => r.status), ["success", "success"])
      const human = yield* antlerDone(home, ["threads", "show", threadId])
      assert.strictEqual(human.code, 0, human.stderr)
      assert.include(human.stdout, `thread ${threadId}`)
      assert.include(human.stdout, "[user]\n  please save a greeting")
      assert.include(human.stdout, "  → write_file(")
      assert.include(human.stdout, "[tool write_file]\n  OK")
      assert.include(human.stdout, "[assistant]\n  Saved hello.txt in your workspace.")
    }), SLOW)
})

describe("antler errors", () => {
  it.live("a bad config exits 2 with the file, the key path and what was expected", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-badconfig-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "models:\n  - name: main\n    model: gpt-4o\n    supports_vision: maybe\n")
      const result = yield* antlerDone(home, ["run", "--config", config, "hello"])
      assert.strictEqual(result.code, 2)
      assert.include(result.stderr, `${config}: models[0].supports_vision: expected true or false, got "maybe"`)
      assert.strictEqual(result.stdout, "")
      // A guardrail provider Antler does not have is a configuration error too, before anything runs.
      Fs.writeFileSync(config, "guardrails:\n  enabled: true\n  provider:\n    use: my_company.guards:Strict\n")
      const guard = yield* antlerDone(home, ["run", "--config", config, "--base-url", "http://127.0.0.1:9/v1", "hello"])
      assert.strictEqual(guard.code, 2)
      assert.include(guard.stderr, `${config}: guardrails.provider.use: unknown provider 'my_company.guards:Strict'`)
      assert.strictEqual(guard.stdout, "")
    }), SLOW)

  it.live("no model anywhere exits 2 and says how to configure one", () =>
    Effect.gen(function*() {
      const empty = Path.join(tempDir("antler-empty-"), "config.yaml")
      Fs.writeFileSync(empty, "title:\n  enabled: true\n")
      const result = yield* antlerDone(home, ["run", "hello"], { ANTLER_CONFIG: empty })
      assert.strictEqual(result.code, 2)
      assert.include(result.stderr, "No model is configured")
      assert.include(result.stderr, "--base-url")
      assert.include(result.stderr, "OPENAI_API_KEY")
    }), SLOW)

  it.live("threads show of an unknown id is a readable error; an unsafe id is a usage error", () =>
    Effect.gen(function*() {
      const unknown = yield* antlerDone(home, ["threads", "show", "no-such-thread"])
      assert.strictEqual(unknown.code, 1)
      assert.include(unknown.stderr, `No thread "no-such-thread" in ${home}`)
      const unsafe = yield* antlerDone(home, ["threads", "show", "../etc"])
      assert.strictEqual(unsafe.code, 2)
      assert.include(unsafe.stderr, `Invalid thread id "../etc"`)
    }), SLOW)
})

describe("antler demo", () => {
  it.live("runs offline: streamed text, tool calls with results, two turns saved on one thread", () =>
    Effect.gen(function*() {
      const demoHome = tempDir("antler-demo-")
      // Where `unshare` and `ip` work (root on Linux), the demo runs in a network namespace with only loopback.
      const offline = ChildProcess.spawnSync("unshare", ["-n", "sh", "-c", "ip link set lo up"]).status === 0
      const script = `ip link set lo up && exec "$0" "$@"`
      const inNamespace = ["-n", "sh", "-c", script, process.execPath, "--import", TSX, MAIN]
      const command = offline
        ? spawn("unshare", [...inNamespace, "demo"], { env: childEnv({ ANTLER_HOME: demoHome }), cwd: demoHome })
        : antler(demoHome, ["demo"])
      const result = yield* Effect.promise(() => command.done)
      assert.strictEqual(result.code, 0, result.stderr + result.stdout)
      const out = result.stdout
      assert.include(out, "This demo uses a SCRIPTED model on a local server; no real model is called.")
      assert.include(out, "I'll write the list to your workspace. \n→ write_file(")
      assert.include(out, "\n← OK\nSaved. Reading it back to check. \n→ read_file(")
      assert.include(out, "packing-list.md now has 3 items: water (2 litres), rain jacket, map and compass.")
      assert.include(out, "now has 4 items: water (2 litres), rain jacket, map and compass, headlamp.")
      const threadId = /^Saved: thread (\S+) /m.exec(out)?.[1]
      assert.isDefined(threadId, out)
      assert.include(out, `antler threads show ${threadId}`)
      const file = Path.join(demoHome, "users/default/threads", threadId!, "user-data/workspace/packing-list.md")
      assert.strictEqual(
        Fs.readFileSync(file, "utf8"),
        "# Weekend hike\n\n- water (2 litres)\n- rain jacket\n- map and compass\n- headlamp\n"
      )
      const shown = yield* antlerDone(demoHome, ["threads", "show", threadId!, "--json"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const state = JSON.parse(shown.stdout).state
      assert.deepStrictEqual(state.messages.filter((m: M.Message) => m.type === "human").map(M.text), [...Demo.PROMPTS])
      assert.strictEqual(state.messages.length, 12)
    }), SLOW)
})

describe("clarification", () => {
  it.live("a question ends the run with exit code 3; the next run on the thread answers it", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          toolCalls: [{
            name: "ask_clarification",
            arguments: {
              question: "Which colour should the note be?",
              clarification_type: "approach_choice",
              options: ["red", "blue"]
            }
          }]
        },
        "Blue it is."
      ])
      const clarifyHome = tempDir("antler-clarify-")
      const endpoint = ["--base-url", server.url, "--api-key", "x", "--thread", "q1"]
      const ask = yield* antlerDone(clarifyHome, ["run", ...endpoint, "make a note"])
      assert.strictEqual(ask.code, 3, ask.stderr)
      assert.include(ask.stdout, "Which colour should the note be?\n  1. red\n  2. blue\n")
      assert.include(ask.stdout, `Answer with: antler run --thread q1 "<your answer>"`)
      assert.match(ask.stdout, /— waiting for your answer \(interrupted\) · thread q1\n$/)
      const answer = yield* antlerDone(clarifyHome, ["run", ...endpoint, "2"])
      assert.strictEqual(answer.code, 0, answer.stderr)
      assert.include(answer.stdout, "Blue it is.")
      // The model received the chosen option, after its question.
      const sent = server.requests[1]!.messages
      const last = sent[sent.length - 1]!
      assert.strictEqual(last.role, "user")
      assert.match(String(last.content), /^(.*\n)?blue(\n.*)?$/s)
      assert.strictEqual(sent[sent.length - 2]!.role, "tool")
    })), SLOW)

  it.live("a question with null options and an unknown kind (as small models send it) is asked and answered", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          toolCalls: [{
            name: "ask_clarification",
            arguments: {
              question: "Which environment should I deploy to?",
              clarification_type: "environment_choice",
              context: null,
              options: null
            }
          }]
        },
        "Deploying to staging."
      ])
      const clarifyHome = tempDir("antler-clarify-null-")
      const endpoint = ["--base-url", server.url, "--api-key", "x", "--thread", "q2"]
      const ask = yield* antlerDone(clarifyHome, ["run", ...endpoint, "deploy it"])
      assert.strictEqual(ask.code, 3, ask.stderr + ask.stdout)
      assert.include(ask.stdout, "❓ Which environment should I deploy to?\n")
      assert.notInclude(ask.stdout, "Invalid arguments")
      assert.match(ask.stdout, /— waiting for your answer \(interrupted\) · thread q2\n$/)
      const answer = yield* antlerDone(clarifyHome, ["run", ...endpoint, "staging"])
      assert.strictEqual(answer.code, 0, answer.stderr)
      assert.include(answer.stdout, "Deploying to staging.")
      // The model received the question as the call's result, then the answer.
      const sent = server.requests[1]!.messages
      assert.strictEqual(sent[sent.length - 2]!.role, "tool")
      assert.match(String(sent[sent.length - 2]!.content), /Which environment should I deploy to\?/)
      assert.strictEqual(sent[sent.length - 1]!.role, "user")
      assert.match(String(sent[sent.length - 1]!.content), /^(.*\n)?staging(\n.*)?$/s)
    })), SLOW)
})

describe("uploads", () => {
  it.live("run --file shows uploads to the model; antler upload copies into the thread with a Markdown copy", () =>
    Effect.scoped(Effect.gen(function*() {
      const uploadHome = tempDir("antler-upload-")
      const server = yield* ScriptedChatServer.start(["I see the notes."])
      const notes = Path.join(uploadHome, "notes.html")
      Fs.writeFileSync(notes, "<h1>Meeting notes</h1><p>Ship it.</p>")
      const run = yield* antlerDone(uploadHome, [
        "run", "--base-url", server.url, "--api-key", "x", "--thread", "u1", "--file", notes, "summarise the notes"
      ])
      assert.strictEqual(run.code, 0, run.stderr)
      const sent = server.requests[0]!.messages
      const user = String(sent[sent.length - 1]!.content)
      assert.include(user, "<current_uploads>")
      assert.include(user, "/mnt/user-data/uploads/notes.html")
      assert.include(user, "L1: Meeting notes")
      assert.include(user, "summarise the notes")

      const page = Path.join(uploadHome, "report.html")
      Fs.writeFileSync(page, "<html><body><h1>Quarterly report</h1><p>Up.</p><h2>Costs</h2><p>Down.</p></body></html>")
      const up = yield* antlerDone(uploadHome, ["upload", "u1", page])
      assert.strictEqual(up.code, 0, up.stderr)
      assert.include(up.stdout, "report.html")
      assert.include(up.stdout, "Markdown: /mnt/user-data/uploads/report.md")
      const uploads = Path.join(uploadHome, "users", "default", "threads", "u1", "user-data", "uploads")
      assert.match(Fs.readFileSync(Path.join(uploads, "report.md"), "utf8"), /^# Quarterly report/)
    })), SLOW)
})

describe("careless input", () => {
  it.live("unknown options and options without their value are usage errors with a suggestion; nothing runs", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["answered"])
      const careless = tempDir("antler-careless-")
      const run = (...args: ReadonlyArray<string>) =>
        antlerDone(careless, ["run", "--base-url", server.url, "--api-key", "x", ...args])
      const bogus = yield* run("--bogus", "1", "hi")
      assert.strictEqual(bogus.code, 2, bogus.stderr)
      assert.include(bogus.stderr, "antler run: unknown option --bogus. Its options: --thread, --model, --base-url")
      assert.include(bogus.stderr, `goes after --: antler run -- "--bogus ..."`)
      const typo = yield* run("--thraed", "X", "--model", "M", "hi")
      assert.strictEqual(typo.code, 2, typo.stderr)
      assert.include(typo.stderr, "antler run: unknown option --thraed; did you mean --thread?")
      const bare = yield* run("--thread")
      assert.strictEqual(bare.code, 2, bare.stderr)
      assert.include(bare.stderr, "antler run: --thread needs a value")
      const swallowed = yield* run("--thread", "--model", "M", "hi")
      assert.strictEqual(swallowed.code, 2, swallowed.stderr)
      assert.include(swallowed.stderr, "antler run: --thread needs a value")
      const command = yield* antlerDone(careless, ["threads", "lst"])
      assert.strictEqual(command.code, 2, command.stderr)
      assert.include(command.stderr, "antler threads: unknown command lst; did you mean list?")
      for (const result of [bogus, typo, bare, swallowed, command]) assert.strictEqual(result.stdout, "")
      assert.strictEqual(server.requests.length, 0)
      assert.isFalse(Fs.existsSync(Path.join(careless, "users")))

      // After `--`, a prompt may start with a dash.
      const dashed = yield* run("--", "--not a flag")
      assert.strictEqual(dashed.code, 0, dashed.stderr)
      const sent = server.requests[0]!.messages
      assert.include(String(sent[sent.length - 1]!.content), "\n--not a flag\n")
    })), SLOW)

  it.live("an ANTLER_HOME that cannot be a directory fails at once with the path (exit 2)", () =>
    Effect.gen(function*() {
      const cwd = tempDir("antler-homecwd-")
      const inCwd = (dataHome: string, args: ReadonlyArray<string>) =>
        Effect.promise(() => antler(dataHome, args, {}, cwd).done)
      const proc = yield* inCwd("/proc/nope", ["run", "--base-url", "http://127.0.0.1:9/v1", "hi"])
      assert.strictEqual(proc.code, 2, proc.stderr)
      assert.include(proc.stderr, "Cannot use the data directory /proc/nope (ANTLER_HOME, default ./.antler): ")
      assert.include(proc.stderr, "cannot create /proc/nope: ENOENT")
      const listed = yield* inCwd("/proc/nope", ["threads", "list"])
      assert.strictEqual(listed.code, 2, listed.stderr)
      assert.include(listed.stderr, "/proc/nope")
      const file = Path.join(tempDir("antler-homefile-"), "not-a-dir")
      Fs.writeFileSync(file, "")
      const notDir = yield* inCwd(Path.join(file, "home"), ["threads", "list"])
      assert.strictEqual(notDir.code, 2, notDir.stderr)
      assert.include(notDir.stderr, `${file} is not a directory`)
    }), SLOW)

  it.live("a base URL that is not a URL is a configuration error naming where it came from (exit 2)", () =>
    Effect.gen(function*() {
      const flag = yield* antlerDone(home, ["run", "--base-url", "notaurl", "hi"])
      assert.strictEqual(flag.code, 2, flag.stderr)
      assert.include(flag.stderr, "--base-url: expected an http:// or https:// URL, such as http://localhost:11434/v1")
      assert.strictEqual(flag.stdout, "")
      const env = yield* antlerDone(home, ["run", "hi"], { OPENAI_BASE_URL: "localhost:11434/v1" })
      assert.strictEqual(env.code, 2, env.stderr)
      assert.include(
        env.stderr,
        "OPENAI_BASE_URL: expected an http:// or https:// URL; did you mean http://localhost:11434/v1?"
      )
      const config = Path.join(tempDir("antler-urlconfig-"), "config.yaml")
      Fs.writeFileSync(config, "models:\n  - name: main\n    model: m\n    base_url: notaurl\n")
      const file = yield* antlerDone(home, ["run", "--config", config, "hi"])
      assert.strictEqual(file.code, 2, file.stderr)
      assert.include(file.stderr, `${config}: models[0].base_url: expected an http:// or https:// URL`)
    }), SLOW)

  it.live("upload refuses an unknown thread (nothing created) and a /proc file that reads as empty", () =>
    Effect.scoped(Effect.gen(function*() {
      const uploadHome = tempDir("antler-upload-careless-")
      const threads = Path.join(uploadHome, "users", "default", "threads")
      const page = Path.join(uploadHome, "page.txt")
      Fs.writeFileSync(page, "hello")
      const unknown = yield* antlerDone(uploadHome, ["upload", "no-such-thread", page])
      assert.strictEqual(unknown.code, 1, unknown.stderr)
      assert.include(unknown.stderr, `No thread "no-such-thread" in ${uploadHome}; nothing was uploaded.`)
      assert.isFalse(Fs.existsSync(Path.join(threads, "no-such-thread")))

      const server = yield* ScriptedChatServer.start(["hello"])
      const started = yield* antlerDone(uploadHome, ["run", "--base-url", server.url, "--thread", "t1", "hi"])
      assert.strictEqual(started.code, 0, started.stderr)
      const proc = yield* antlerDone(uploadHome, ["upload", "t1", "/proc/self/status"])
      assert.strictEqual(proc.code, 2, proc.stderr)
      assert.include(proc.stderr, "Cannot upload /proc/self/status: the system reports 0 bytes for it, but reading")
      assert.include(proc.stderr, "cat /proc/self/status > status")
      assert.deepStrictEqual(Fs.readdirSync(Path.join(threads, "t1", "user-data", "uploads")), [])
    })), SLOW)
})

describe("secrets a server echoes", () => {
  const MAIN_KEY = "sk-test-main-0123456789"
  const OTHER_KEY = "sk-test-other-9876543210"
  const leaks = (text: string) =>
    [MAIN_KEY, OTHER_KEY, "hunter2pass", "\x1b]52"].filter((secret) => text.includes(secret))
  const database = (dir: string) =>
    Fs.readdirSync(dir)
      .filter((name) => name.startsWith("antler.sqlite"))
      .map((name) => Fs.readFileSync(Path.join(dir, name)).toString("latin1"))
      .join("\n")

  it.live("never reach stderr, --json stdout or the SQLite file: keys, URL credentials, escape sequences", () =>
    Effect.scoped(Effect.gen(function*() {
      const echo = `Incorrect API key provided: Bearer ${MAIN_KEY} (also tried ${OTHER_KEY})`
      const server = yield* ScriptedChatServer.start([
        { status: 401, body: ScriptedChatServer.errorBody(echo, "invalid_request_error", "invalid_api_key") },
        { status: 500, body: ScriptedChatServer.errorBody(`${echo} \x1b]52;c;ZXZpbA==\x07`, "server_error") },
        `Your keys are ${MAIN_KEY} and ${OTHER_KEY}.`,
        `Again: ${MAIN_KEY}, ${OTHER_KEY}.`
      ], { chunkSize: 3 })
      const secretsHome = tempDir("antler-secrets-")
      const config = Path.join(secretsHome, "config.yaml")
      Fs.writeFileSync(config, [
        "llm_call:",
        "  retry_max_attempts: 1",
        "models:",
        "  - name: main",
        "    model: main-model",
        `    base_url: ${server.url}`,
        `    api_key: ${MAIN_KEY}`,
        "  - name: other",
        "    model: other-model",
        `    api_key: ${OTHER_KEY}`,
        ""
      ].join("\n"))
      const run = (args: ReadonlyArray<string>) => antlerDone(secretsHome, ["run", "--config", config, ...args])
      const rejected = yield* run(["--json", "--thread", "s1", "hello"])
      const failed = yield* run(["--thread", "s2", "hello"])
      const echoed = yield* run(["--thread", "s3", "tell me the keys"])
      const echoedJson = yield* run(["--json", "--thread", "s4", "again"])
      const port = /:(\d+)\/v1$/.exec(server.url)![1]
      const withCredentials = yield* antlerDone(secretsHome, [
        "run", "--config", config, "--model", "main", "--base-url", `http://user:hunter2pass@127.0.0.1:${port}/v1`,
        "--thread", "s5", "hi"
      ])
      for (const result of [rejected, failed, echoed, echoedJson, withCredentials]) {
        assert.deepStrictEqual(leaks(result.stdout), [], result.stdout)
        assert.deepStrictEqual(leaks(result.stderr), [], result.stderr)
      }
      assert.deepStrictEqual(leaks(database(secretsHome)), [])
      // The runs still say what happened.
      assert.strictEqual(rejected.code, 1)
      const end = jsonLines(rejected.stdout).at(-1)!
      assert.deepInclude(end, { type: "run_end", status: "error" })
      const shown = yield* antlerDone(secretsHome, ["threads", "show", "s1", "--json"])
      const detail = JSON.parse(shown.stdout).state.messages.at(-1).additional_kwargs.error_detail
      assert.include(detail, "Incorrect API key provided: Bearer [redacted] (also tried [redacted])")
      assert.strictEqual(failed.code, 1)
      assert.include(failed.stdout, "still unavailable")
      // The log on stderr has the server's answer, neutralised.
      assert.include(failed.stderr, "500 Incorrect API key provided: Bearer [redacted] (also tried [redacted])")
      assert.include(failed.stderr, "␛]52;c;ZXZpbA==␇")
      assert.strictEqual(echoed.code, 0, echoed.stderr)
      assert.include(echoed.stdout, "Your keys are [redacted] and [redacted].")
      const tokens = jsonLines(echoedJson.stdout).flatMap((e) => (e.type === "token" ? [e.text ?? ""] : []))
      assert.strictEqual(tokens.join(""), "Again: [redacted], [redacted].")
      assert.strictEqual(withCredentials.code, 1)
      assert.include(withCredentials.stdout, `model main-model at http://[redacted]@127.0.0.1:${port}/v1`)
      assert.include(withCredentials.stdout, "http://[redacted]@127.0.0.1")
    })), SLOW)
})

describe("Ctrl-C", () => {
  it.live("SIGINT cancels the run, exits 130, and the completed step stays saved", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          content: "Writing first. ",
          toolCalls: [{
            name: "write_file",
            arguments: { description: "Save", path: "/mnt/user-data/workspace/a.txt", content: "a" }
          }]
        },
        { content: "Now thinking for a long time", stall: true }
      ])
      const cancelHome = tempDir("antler-cancel-")
      const run = antler(cancelHome, [
        "run", "--base-url", server.url, "--api-key", "x", "--thread", "cancel-me", "write a"
      ])
      yield* Effect.promise(() =>
        waitFor(
          () => server.requests.length === 2 && run.output().includes("Now thinking"),
          "the second model call to stream"
        )
      )
      run.child.kill("SIGINT")
      const result = yield* Effect.promise(() => run.done)
      assert.strictEqual(result.code, 130, result.stderr)
      assert.match(result.stdout, /— cancelled; completed steps are saved · thread cancel-me\n$/)
      const shown = yield* antlerDone(cancelHome, ["threads", "show", "cancel-me", "--json"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const thread = JSON.parse(shown.stdout)
      assert.deepStrictEqual(thread.state.messages.map((m: M.Message) => m.type), ["human", "ai", "tool"])
      assert.strictEqual(M.text(thread.state.messages[2]), "OK")
      assert.deepStrictEqual(thread.runs.map((r: { status: string }) => r.status), ["cancelled"])
    })), SLOW)
})

// ---------------------------------------------------------------------------------------------------------
// Pure parts

const model = (name: string, extra: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(ModelConfig)({ name, model: `${name}-id`, ...extra })

describe("App.chooseModel", () => {
  const configured = [model("main", { base_url: "https://a.example/v1" }), model("small")]

  it("a --base-url or OPENAI_BASE_URL that is not an http(s) URL is an error naming it, not a TypeError later", () => {
    const message = (result: ReturnType<typeof App.chooseModel>) =>
      Either.match(result, { onLeft: (e) => `${e.reason}: ${e.message}`, onRight: () => "chosen" })
    assert.strictEqual(
      message(App.chooseModel(configured, { baseUrl: "notaurl" }, {})),
      "invalid_base_url: --base-url: expected an http:// or https:// URL, such as http://localhost:11434/v1"
    )
    assert.strictEqual(
      message(App.chooseModel([], {}, { baseUrl: "localhost:11434/v1", apiKey: "k" })),
      "invalid_base_url: OPENAI_BASE_URL: expected an http:// or https:// URL; did you mean http://localhost:11434/v1?"
    )
    assert.strictEqual(message(App.chooseModel([], { baseUrl: "ftp://host/v1" }, {})).split(":")[0], "invalid_base_url")
    assert.strictEqual(message(App.chooseModel([], { baseUrl: " http://127.0.0.1:8000/v1 " }, {})), "chosen")
  })

  it("--model NAME picks that configured model, and --base-url / --api-key override its connection", () => {
    const picked = Either.getOrThrow(App.chooseModel(configured, { model: "small" }, {}))
    assert.strictEqual(picked.name, "small")
    assert.deepStrictEqual(picked.models.map((m) => m.name), ["small", "main"])
    const flags = { model: "main", baseUrl: "http://b/v1", apiKey: "k" }
    const overridden = Either.getOrThrow(App.chooseModel(configured, flags, {}))
    assert.strictEqual(overridden.baseUrl, "http://b/v1")
    assert.strictEqual(Redacted.value(overridden.models[0]!.api_key!), "k")
    assert.strictEqual(overridden.model, "main-id")
  })

  it("--base-url defines an ad-hoc model, with --model as the raw id (else OPENAI_MODEL, else the default)", () => {
    const adHoc = Either.getOrThrow(App.chooseModel(configured, { baseUrl: "http://x/v1", model: "llama3.2" }, {}))
    assert.deepInclude(adHoc, { name: "llama3.2", model: "llama3.2", baseUrl: "http://x/v1", from: "flags" })
    assert.deepStrictEqual(adHoc.models.map((m) => m.name), ["llama3.2", "main", "small"])
    const env = { model: "gpt-4.1", baseUrl: "http://env/v1" }
    const fromEnv = Either.getOrThrow(App.chooseModel([], { apiKey: "k" }, env))
    assert.deepInclude(fromEnv, { model: "gpt-4.1", baseUrl: "http://env/v1" })
    const bare = Either.getOrThrow(App.chooseModel([], { baseUrl: "http://x/v1" }, {}))
    assert.strictEqual(bare.model, App.DEFAULT_MODEL_ID)
  })

  it("without flags: the first configured model, else OPENAI_* from the environment, else a readable error", () => {
    assert.strictEqual(Either.getOrThrow(App.chooseModel(configured, {}, { apiKey: "k" })).name, "main")
    const fromEnv = Either.getOrThrow(App.chooseModel([], {}, { apiKey: "k" }))
    assert.deepInclude(fromEnv, { from: "env", model: App.DEFAULT_MODEL_ID })
    const none = App.chooseModel([], {}, {})
    assert.isTrue(Either.isLeft(none))
    assert.include(Either.isLeft(none) ? none.left.message : "", "No model is configured")
  })

  it("an unknown --model name with models configured is an error listing them (no silent fallback)", () => {
    const result = App.chooseModel(configured, { model: "mian" }, { apiKey: "k" })
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) {
      assert.strictEqual(result.left.reason, "unknown_name")
      assert.include(result.left.message, "Configured models: main, small")
    }
    assert.strictEqual(Either.getOrThrow(App.chooseModel([], { model: "gpt-4.1" }, {})).model, "gpt-4.1")
  })
})

describe("checking the command line", () => {
  const problem = (...args: ReadonlyArray<string>) => Cli.commandLineProblem(Cli.commandSpec, args)

  it("knows each command's options from the commands themselves, with whether they take a value", () => {
    const run = Cli.commandSpec.subcommands.run!
    assert.deepStrictEqual(Object.entries(run.options), [
      ["--thread", true],
      ["--model", true],
      ["--base-url", true],
      ["--api-key", true],
      ["--config", true],
      ["--file", true],
      ["--json", false]
    ])
    assert.isTrue(run.args)
    assert.deepStrictEqual(Object.keys(Cli.commandSpec.subcommands), ["run", "threads", "upload", "demo"])
    assert.deepStrictEqual(Object.keys(Cli.commandSpec.subcommands.threads!.subcommands), ["list", "show"])
  })

  it("accepts well-formed lines, options anywhere, --name=value, built-in options, and anything after --", () => {
    for (
      const line of [
        ["run", "hi"],
        ["run", "hi", "there", "--thread", "t1", "--json"],
        ["run", "--model=m", "--file", "a.pdf", "--file", "b.pdf", "hi"],
        ["run", "--", "--not a flag", "-x"],
        ["run", "-", "hi"],
        ["--log-level", "debug", "run", "hi"],
        ["run", "--help"],
        ["--version"],
        ["threads", "show", "t1", "--json"],
        ["upload", "t1", "a.txt", "b.txt"],
        []
      ]
    ) assert.strictEqual(problem(...line), undefined, line.join(" "))
  })

  it("an unknown option is named, with the closest known one or the list; a missing value is named", () => {
    assert.strictEqual(
      problem("run", "--thraed", "X", "--model", "M", "hi"),
      "antler run: unknown option --thraed; did you mean --thread?\nRun `antler run --help` for its usage."
    )
    assert.include(problem("run", "--base_url", "x", "hi")!, "did you mean --base-url?")
    assert.include(problem("run", "--thr", "x", "hi")!, "did you mean --thread?")
    assert.include(problem("--verison")!, "antler: unknown option --verison; did you mean --version?")
    assert.strictEqual(
      problem("run", "--bogus", "1", "hi"),
      "antler run: unknown option --bogus. Its options: --thread, --model, --base-url, --api-key, --config, " +
        "--file, --agent, --subagents, --json.\nAn argument that starts with \"-\" goes after --: antler run -- \"--bogus ...\"\n" +
        "Run `antler run --help` for its usage."
    )
    assert.include(problem("run", "-5 degrees?")!, "antler run: unknown option -5 degrees?.")
    assert.include(problem("threads", "list", "--jsno")!, "unknown option --jsno; did you mean --json?")
    for (const line of [["run", "--thread"], ["run", "hi", "--thread"], ["run", "--thread", "--model", "M", "hi"]]) {
      assert.strictEqual(
        problem(...line),
        "antler run: --thread needs a value: --thread VALUE (or --thread=VALUE for a value that starts with \"--\")." +
          "\nRun `antler run --help` for its usage.",
        line.join(" ")
      )
    }
    assert.include(problem("rnu", "hi")!, "antler: unknown command rnu; did you mean run?")
    assert.include(problem("serve")!, "antler: unknown command serve. Commands: run, threads, upload, agents, demo.")
    assert.include(problem("constructor")!, "antler: unknown command constructor.")
  })

  it("closestName prefers the one name a prefix extends, else the nearest within a small distance", () => {
    const names = ["--thread", "--model", "--base-url", "--json"]
    assert.strictEqual(Cli.closestName("--thraed", names), "--thread")
    assert.strictEqual(Cli.closestName("--MODEL", names), "--model")
    assert.strictEqual(Cli.closestName("--mdoel", names), "--model")
    assert.strictEqual(Cli.closestName("--base", names), "--base-url")
    assert.strictEqual(Cli.closestName("--jsn", names), "--json")
    assert.strictEqual(Cli.closestName("--bogus", names), undefined)
    assert.strictEqual(Cli.closestName("--x", names), undefined)
  })
})

describe("Render.human", () => {
  const runStart: RunEvent = { type: "run_start", thread_id: "t1", run_id: "r1" }

  it("prints tokens as they come, then only what a rewrite of the same message adds, then the end", () => {
    const render = Render.human({ color: false })
    const out = [
      render(runStart),
      render({ type: "token", message_id: "m1", text: "Hel" }),
      render({ type: "token", message_id: "m1", text: "lo." }),
      render({ type: "message", message: M.ai("Hello.", { id: "m1" }) }),
      render({ type: "message", message: M.ai("Hello.\n\n[stopped: loop]", { id: "m1" }) }),
      render({ type: "run_end", status: "success", stop_reason: "loop_capped" })
    ]
    assert.deepStrictEqual(out, ["", "Hel", "lo.", "", "\n\n[stopped: loop]", "\n— loop_capped · thread t1\n"])
  })

  it("shows each tool call once and clips long results to their first lines", () => {
    const render = Render.human({ color: false })
    const call = { id: "c1", name: "bash", args: { command: "seq 1 100" } }
    const ai = M.ai("", { id: "m1", tool_calls: [call] })
    const first = render(runStart) + render({ type: "message", message: ai })
    assert.strictEqual(first, "→ bash({\"command\":\"seq 1 100\"})\n")
    assert.strictEqual(render({ type: "message", message: ai }), "")
    const long = Array.from({ length: 100 }, (_, i) => String(i + 1)).join("\n")
    const shown = render({ type: "message", message: M.tool(long, "c1", { name: "bash" }) })
    assert.strictEqual(shown, `← 1\n  2\n  3\n  4… (+${long.length - 7} chars)\n`)
  })

  it("a failed run ends with the error and the stop reason", () => {
    const render = Render.human({ color: false })
    render(runStart)
    const error = { name: "ModelError", message: "401" }
    const text = render({ type: "run_end", status: "error", stop_reason: "error", error })
    assert.strictEqual(text, "error: ModelError: 401\n— error · thread t1\n")
  })

  it("threads show gives the token usage per thread, per model and, when summaries or titles cost, per purpose", () => {
    const totals = (input: number, output: number, calls: number) => ({
      input_tokens: input,
      output_tokens: output,
      total_tokens: input + output,
      calls
    })
    const text = Render.thread({
      thread_id: "t1",
      checkpoints: 3,
      runs: [],
      state: {
        ...TS.empty,
        messages: [M.human("hi"), M.ai("hello")],
        token_usage: {
          total: totals(1300, 130, 3),
          by_model: { "gpt-4o-mini": totals(1000, 100, 2), small: totals(300, 30, 1) },
          by_purpose: { agent: totals(1000, 100, 2), summarization: totals(300, 30, 1) }
        }
      }
    }, { color: false })
    assert.include(text, "total: 1300 in, 130 out, 1430 total (3 calls)")
    assert.include(text, "gpt-4o-mini: 1000 in, 100 out (2 calls)")
    assert.include(text, "for summarization: 330 total (1 calls)")
  })

  it("tool arguments of any depth are previewed in bounded time and space (a saved thread may hold any)", () => {
    let deep: unknown = 1
    for (let i = 0; i < 100_000; i++) deep = [deep]
    const line = Render.toolCallLine({ name: "f", args: { a: deep, b: "x".repeat(500) } })
    assert.strictEqual(line, "f({\"a\":[[[[[[[[…]]]]]]]],\"b\":\"" + "x".repeat(91) + "…)")
    const render = Render.human({ color: false })
    render({ type: "run_start", thread_id: "t1", run_id: "r1" })
    const ai = M.ai("", {
      id: "m1",
      tool_calls: [{ id: "c1", name: "f", args: { a: deep } }],
      invalid_tool_calls: [{ id: "c2", name: "g\x1b]0;x\x07", args: "[[[", error: "The arguments nest too deep." }]
    })
    assert.strictEqual(
      render({ type: "message", message: ai }),
      "→ f({\"a\":[[[[[[[[…]]]]]]]]})\n→ g␛]0;x␇(The arguments nest too deep.)\n"
    )
    assert.include(Render.message(ai, Render.style(false)), "→ f({\"a\":[[[[[[[[…]]]]]]]]})")
  })

  it("custom events show their message; secrets split across token deltas never print", () => {
    const render = Render.human({ color: false, redact: Redact.make(["sk-abcdefghijkl"]) })
    render({ type: "run_start", thread_id: "t1", run_id: "r1" })
    const retry = { type: "llm_retry", message: "Model call attempt 1 of 3 failed; trying again in 2s." }
    assert.strictEqual(
      render({ type: "custom", name: "llm_retry", data: retry }),
      "[llm_retry] Model call attempt 1 of 3 failed; trying again in 2s.\n"
    )
    const out = ["key: sk-abc", "defghi", "jkl done"].map((text) => render({ type: "token", message_id: "m", text }))
    assert.deepStrictEqual(out, ["key: ", "", "[redacted] done"])
    assert.strictEqual(render({ type: "message", message: M.ai("key: sk-abcdefghijkl done", { id: "m" }) }), "")
  })

  it("JSON lines carry the thread and run ids", () => {
    const line = Render.jsonLine({ type: "token", message_id: "m", text: "x" }, "t1", "r1")
    const parsed = JSON.parse(line)
    assert.deepStrictEqual(parsed, { type: "token", message_id: "m", text: "x", thread_id: "t1", run_id: "r1" })
    assert.isTrue(line.endsWith("\n"))
  })
})

describe("Demo script", () => {
  it("reads the items of a markdown list", () => {
    assert.deepStrictEqual(Demo.items("# List\n\n- a\n- b c\ntext\n"), ["a", "b c"])
  })

  it("follows the conversation through messages the harness injects", () => {
    const call = (id: string, name: string) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }]
    })
    const messages = [
      { role: "system", content: "You are a helpful agent." },
      { role: "user", content: "<system-reminder>today is Monday</system-reminder>" },
      { role: "user", content: [{ type: "text", text: Demo.PROMPTS[0] }] },
      call("c1", "write_file"),
      { role: "tool", tool_call_id: "c1", content: "OK" },
      { role: "user", content: "<system-reminder>you have called write_file once</system-reminder>" }
    ]
    assert.deepStrictEqual(Demo.progress({ messages: messages.slice(0, 3) }), { turn: 0 })
    assert.deepStrictEqual(Demo.progress({ messages }), { turn: 0, tool: { name: "write_file", result: "OK" } })
    const next = [...messages, { role: "assistant", content: "Done." }, { role: "user", content: Demo.PROMPTS[1] }]
    assert.deepStrictEqual(Demo.progress({ messages: next }), { turn: 1 })
  })
})
