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
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as SandboxAudit from "../../../src/middleware/SandboxAudit.js"
import * as App from "../../../src/programs/App.js"
import * as Cli from "../../../src/programs/cli/Cli.js"
import * as CliCommand from "../../../src/programs/cli/CliCommand.js"
import * as Demo from "../../../src/programs/cli/Demo.js"
import * as Render from "../../../src/programs/cli/Render.js"
import { ModelConfig } from "../../../src/services/AppConfig.js"
import type { RunEndEvent, RunEvent } from "../../../src/services/RunEvents.js"
import type { ThreadStatus } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Redact from "../../../src/state/Redact.js"
import * as TS from "../../../src/state/ThreadState.js"
import { antlerCommand, childEnv } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const MAIN = Path.join(ROOT, "src/programs/main.ts")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const AIMOCK = Path.join(ROOT, "node_modules/@copilotkit/aimock/dist/cli.js")
const HELP_FIXTURE = Path.join(ROOT, "test/fixtures/cli-help.ts")
const SLOW = 180_000

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
  options: { readonly env: NodeJS.ProcessEnv; readonly cwd: string; readonly input?: string }
): Spawned => {
  // Every antler a test starts has its own data directory: never the user's ~/.antler.
  if (args.includes(MAIN)) assert.isTrue(options.env.ANTLER_HOME !== undefined || options.env.HOME !== Os.homedir())
  const { input, ...rest } = options
  const stdin = input === undefined ? "ignore" : "pipe"
  const child = ChildProcess.spawn(command, args, { ...rest, stdio: [stdin, "pipe", "pipe"] })
  if (input !== undefined) child.stdin!.end(input)
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const done = new Promise<Result>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })))
  return { child, output: () => stdout, done }
}

/**
 * The config children read unless a test gives its own: long-term memory off, since its update after each run
 * is one more model call that would take a turn of a test's script (memory has its own tests below).
 */
const QUIET_CONFIG = Path.join(tempDir("antler-quiet-"), "config.yaml")
Fs.writeFileSync(QUIET_CONFIG, "memory:\n  enabled: false\n")

/** Runs `antler ...` from sources with `home` as its data directory, in `cwd` (a temp dir by default). */
const antler = (
  home: string,
  args: ReadonlyArray<string>,
  extra: Record<string, string> = {},
  cwd = home,
  input?: string
) =>
  spawn(process.execPath, [...antlerCommand, ...args], {
    env: childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: QUIET_CONFIG, ...extra }),
    cwd,
    ...(input === undefined ? {} : { input })
  })

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
      const pattern = `^thread (\\S+) \\(new; continue it with --continue\\) · model gpt-4o-mini at ${server}$`
      const header = new RegExp(pattern, "m").exec(out)
      assert.isNotNull(header, out)
      threadId = header![1]!
      const lines = out.split("\n")
      const call = lines.indexOf("→ Save the greeting · write_file /mnt/user-data/workspace/hello.txt")
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
      // the run's total usage, named as the gateway's token-usage: at least its answers' own
      const usage = (last as unknown as { usage: Record<string, number> }).usage
      const answered = events.flatMap((e) =>
        e.type === "message" && e.message.type === "ai" ? [e.message.usage_metadata?.total_tokens ?? 0] : []
      )
      assert.isAbove(usage.total_tokens!, 0)
      assert.isAtLeast(usage.total_tokens!, answered.reduce((a, b) => a + b, 0))
      assert.strictEqual(usage.total_tokens, usage.total_input_tokens! + usage.total_output_tokens!)
      // The user's message comes once, as stored (stamped with its name and the run).
      const humans = events.flatMap((e) => (e.type === "message" && e.message.type === "human" ? [e.message] : []))
      assert.strictEqual(humans.length, 1)
      assert.deepInclude(humans[0]!, { name: "user-input", content: "check the greeting" })
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
      // the thread's first message is its date reminder (hidden), which took the user's message's id
      assert.deepStrictEqual(types, ["system", "human", "ai", "tool", "ai", "human", "ai", "tool", "ai"])
      assert.include(thread.state.messages[0].content, "<current_date>")
      assert.strictEqual(thread.state.messages[1].content, "please save a greeting")
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
      // A guardrail provider that cannot be loaded (a DeerFlow Python class path) is a configuration error too,
      // before anything runs.
      Fs.writeFileSync(config, "guardrails:\n  enabled: true\n  provider:\n    use: my_company.guards:Strict\n")
      const guard = yield* antlerDone(home, ["run", "--config", config, "--base-url", "http://127.0.0.1:9/v1", "hello"])
      assert.strictEqual(guard.code, 2)
      assert.include(guard.stderr, `${config}: guardrails.provider.use: "my_company.guards:Strict": could not find`)
      assert.include(guard.stderr, "a Python class path from a DeerFlow config cannot be loaded")
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
      // (the commands it suggests are typed as they work here, as every hint's)
      const antler = CliCommand.invocation(process.env, home)
      assert.include(result.stderr, `  - pass an endpoint:            ${antler} run --base-url http://localhost:11434/v1`)
      assert.include(result.stderr, `Or try the offline demo:         ${antler} demo\n`)
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
      const inNamespace = ["-n", "sh", "-c", script, process.execPath, ...antlerCommand]
      const command = offline
        ? spawn("unshare", [...inNamespace, "demo"], { env: childEnv({ ANTLER_HOME: demoHome }), cwd: demoHome })
        : antler(demoHome, ["demo"])
      const result = yield* Effect.promise(() => command.done)
      assert.strictEqual(result.code, 0, result.stderr + result.stdout)
      const out = result.stdout
      assert.include(out, "This demo uses a SCRIPTED model on a local server; no real model is called.")
      assert.include(out, "I'll write the list to your workspace. \n→ Save the packing list · write_file /mnt/")
      assert.include(out, "\n← OK\nSaved. Reading it back to check. \n→ Read the list back to check it · read_")
      assert.include(out, "packing-list.md now has 3 items: water (2 litres), rain jacket, map and compass.")
      assert.include(out, "now has 4 items: water (2 litres), rain jacket, map and compass, headlamp.")
      const threadId = /^Saved: thread (\S+) /m.exec(out)?.[1]
      assert.isDefined(threadId, out)
      assert.include(out, `antler.js threads show ${threadId}`)
      assert.include(out, `Data:         ${demoHome}`)
      const file = Path.join(demoHome, "users/default/threads", threadId!, "user-data/workspace/packing-list.md")
      assert.strictEqual(
        Fs.readFileSync(file, "utf8"),
        "# Weekend hike\n\n- water (2 litres)\n- rain jacket\n- map and compass\n- headlamp\n"
      )
      const shown = yield* antlerDone(demoHome, ["threads", "show", threadId!, "--json"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const state = JSON.parse(shown.stdout).state
      assert.deepStrictEqual(state.messages.filter((m: M.Message) => m.type === "human").map(M.text), [...Demo.PROMPTS])
      assert.strictEqual(state.messages.length, 13)
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
      assert.include(ask.stdout, "Which colour should the note be?\n\n  1. red\n  2. blue\n")
      assert.include(ask.stdout, ` run --thread q1 "<your answer>"`)
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

describe("options in any order", () => {
  it("the options every command takes are moved to the front from wherever they stand before --", () => {
    const hoist = (...args: Array<string>) => Cli.hoistBuiltIns(Cli.commandSpec, args)
    assert.deepStrictEqual(
      hoist("run", "--config", "c.yaml", "--log-level", "error", "/deep-research", "x"),
      ["--log-level", "error", "run", "--config", "c.yaml", "/deep-research", "x"]
    )
    assert.deepStrictEqual(
      hoist("run", "--verbose", "--log-level=error", "hi"),
      ["--log-level=error", "run", "--verbose", "hi"]
    )
    // an own option's value, and anything after --, stay where they are
    assert.deepStrictEqual(hoist("run", "--model", "--log-level", "hi"), ["run", "--model", "--log-level", "hi"])
    assert.deepStrictEqual(hoist("run", "--", "--log-level", "x"), ["run", "--", "--log-level", "x"])
  })

  it.live("run sends the model the prompt alone, whatever the order of its options", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-order-")
      const lines = [
        ["--json", "--log-level", "error"],
        ["--verbose", "--log-level=error", "--json"],
        ["--log-level", "error", "--json"]
      ]
      const server = yield* ScriptedChatServer.start(lines.map(() => "ok"))
      for (const [i, options] of lines.entries()) {
        const run = yield* antlerDone(home, [
          "run", "--base-url", server.url, "--api-key", "x", ...options, "--thread", `o${i}`, "hi", "there"
        ])
        assert.strictEqual(run.code, 0, run.stderr)
        const sent = server.requests[i]!.messages
        const user = String(sent[sent.length - 1]!.content)
          .replace(/^--- BEGIN USER INPUT ---\n|\n--- END USER INPUT ---$/g, "")
        assert.strictEqual(user, "hi there", options.join(" "))
      }
    })), SLOW)
})

describe("the command the hints name", () => {
  it.live("a usage error's hint is a command that runs where the user is, as printed (npx antler in the clone)", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-hint-")
      // the user is in the clone, whose antler is not on their PATH (the README's npx antler)
      const typo = yield* Effect.promise(() => antler(home, ["run", "--thraed", "t", "hi"], {}, ROOT).done)
      assert.strictEqual(typo.code, 2, typo.stderr)
      const printed = /\nRun `(.+) run --help` for its usage\.\n/.exec(typo.stderr)?.[1]
      assert.strictEqual(printed, CliCommand.invocation(process.env, ROOT), typo.stderr)
      // the command as printed starts this Antler from there (its --version needs no build)...
      const env = childEnv({ ANTLER_HOME: home })
      const version = ChildProcess.spawnSync("sh", ["-c", `${printed} --version`], { cwd: ROOT, env, encoding: "utf8" })
      assert.strictEqual(version.status, 0, version.stderr)
      assert.match(version.stdout, /^antler \d+\.\d+\.\d+/)
      // ...and the rest of it is the run command's help
      const help = yield* Effect.promise(() => antler(home, ["run", "--help"], {}, ROOT).done)
      assert.strictEqual(help.code, 0, help.stderr)
      assert.include(help.stdout, `Usage\n  ${printed} run [options] <prompt>...`)
    }), SLOW)

  it("after npm ci, the clone's antler is linked into its own node_modules/.bin", () => {
    // prepare links it (scripts/link-bin.mjs); npx antler in the clone still installs the clone into npx's cache,
    // whose prepare does not build again (test/programs/Prepare.test.ts)
    assert.strictEqual(
      Fs.realpathSync(Path.join(ROOT, "node_modules/.bin/antler")),
      Fs.realpathSync(Path.join(ROOT, "bin/antler.js"))
    )
  })

  it("is antler only when the user's own PATH has this antler, not when npm put it there for one command", () => {
    const dir = tempDir("antler-path-")
    const linkIn = (folder: string) => {
      Fs.mkdirSync(folder, { recursive: true })
      Fs.symlinkSync(Path.join(ROOT, "bin/antler.js"), Path.join(folder, "antler"))
      return folder
    }
    const npxCache = linkIn(Path.join(dir, ".npm/_npx/0123abcd/node_modules/.bin"))
    const local = linkIn(Path.join(dir, "clone/node_modules/.bin"))
    const global = linkIn(Path.join(dir, "usr/local/bin"))
    assert.strictEqual(CliCommand.invocation({ PATH: [npxCache, local].join(Path.delimiter) }, ROOT), "npx antler")
    assert.strictEqual(CliCommand.invocation({ PATH: [npxCache, global].join(Path.delimiter) }, ROOT), "antler")
    assert.strictEqual(
      CliCommand.invocation({ PATH: local }, dir),
      `node ${Path.join(ROOT, "bin", "antler.js")}`
    )
  })
})

describe("antler demo --model-server", () => {
  it.live("serves the scripted model until stopped; antler run and its tools work against it offline", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-model-server-")
      const server = antler(home, ["demo", "--model-server", "--port", "0"])
      try {
        yield* Effect.promise(() => waitFor(() => /answers at (http:\S+)/.test(server.output()), "the server's address"))
        const url = /answers at (http:\S+)/.exec(server.output())![1]!
        assert.include(server.output(), "SCRIPTED model (no real model is called)")
        // (the key the hint names: the command as printed)
        const key = new RegExp(`run --base-url ${url} --api-key (\\S+) "write a file of notes"`).exec(server.output())?.[1]
        assert.isDefined(key, server.output())
        const plain = yield* antlerDone(home, ["run", "--base-url", url, "--api-key", key!, "hello there"])
        assert.strictEqual(plain.code, 0, plain.stderr)
        assert.include(plain.stdout, "Scripted answer to: hello there (no real model was called)")
        const file = yield* antlerDone(home, ["run", "--base-url", url, "--api-key", key!, "--thread", "f1", "a file"])
        assert.strictEqual(file.code, 0, file.stderr)
        assert.include(file.stdout, "write_file /mnt/user-data/outputs/notes.md")
        const notes = Path.join(home, "users/default/threads/f1/user-data/outputs/notes.md")
        assert.strictEqual(Fs.readFileSync(notes, "utf8"), "# Notes\n\na file\n")
        // the model's name, as the server reports it, reads as such in the thread's token usage (the hinted key is
        // no word of the answers, which would be redacted as a secret)
        const shown = yield* antlerDone(home, ["threads", "show", "f1"])
        assert.include(shown.stdout.split("token usage\n")[1], "  scripted: ", shown.stdout)
        assert.notInclude(shown.stdout, "[redacted]")
      } finally {
        server.child.kill("SIGINT")
        yield* Effect.promise(() => server.done)
      }
    }), SLOW)
})

describe("configuration warnings", () => {
  it.live("unused keys are named shortly, once per configuration, and not below the warning level", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-warned-")
      const config = Path.join(home, "config.yaml")
      const keys = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
      Fs.writeFileSync(config, `memory:\n  enabled: false\n${keys.map((key) => `${key}: 1\n`).join("")}`)
      const quiet = yield* antlerDone(home, ["--log-level", "error", "skills", "list"], { ANTLER_CONFIG: config })
      assert.strictEqual(quiet.code, 0, quiet.stderr)
      assert.notInclude(quiet.stderr, "not used")
      const first = yield* antlerDone(home, ["skills", "list"], { ANTLER_CONFIG: config })
      assert.strictEqual(
        first.stderr,
        `warning: ${config}: 7 keys not used by Antler (ignored): alpha, beta, gamma, delta, epsilon, and 2 more ` +
          "(--log-level debug lists them). Said once for this configuration.\n"
      )
      const again = yield* antlerDone(home, ["skills", "list"], { ANTLER_CONFIG: config })
      assert.notInclude(again.stderr, "not used")
      const all = yield* antlerDone(home, ["--log-level", "debug", "skills", "list"], { ANTLER_CONFIG: config })
      assert.include(all.stderr, "alpha, beta, gamma, delta, epsilon, zeta, eta.")
      Fs.appendFileSync(config, "theta: 1\n")
      const changed = yield* antlerDone(home, ["skills", "list"], { ANTLER_CONFIG: config })
      assert.include(changed.stderr, "8 keys not used by Antler")
    }), SLOW)

  it.live("a key a typo away from one Antler reads beside it is named with that key, first, before the unused others", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-typo-")
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(
        config,
        "memory:\n  enabled: false\nalpha: 1\nbeta: 1\ngamma: 1\ndelta: 1\nepsilon: 1\ntitel:\n  enabled: false\n" +
          "models:\n  - name: m\n    model: x\n    api_kye: some-key\n"
      )
      const first = yield* antlerDone(home, ["skills", "list"], { ANTLER_CONFIG: config })
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(
        first.stderr,
        `warning: ${config}: 7 keys not used by Antler (ignored): titel (did you mean title?), models[].api_kye ` +
          "(did you mean api_key?), alpha, beta, gamma, and 2 more (--log-level debug lists them). Said once for " +
          "this configuration.\n"
      )
    }), SLOW)
})

describe("threads compact", () => {
  it.live("summarises a thread's older messages through the model, with --force below the trigger", () =>
    Effect.scoped(Effect.gen(function*() {
      const summaryOf = (body: ScriptedChatServer.ChatRequestBody) =>
        String(body.messages.at(-1)?.content ?? "").includes("You are compacting the history")
      const server = yield* ScriptedChatServer.start((body) =>
        summaryOf(body) ? "## Session intent\nCompacted SUMMARY-CLI-3307" : "Answered."
      )
      const compactHome = tempDir("antler-compact-")
      const config = Path.join(compactHome, "config.yaml")
      // no automatic trigger: only the manual compaction summarises
      Fs.writeFileSync(config, "memory:\n  enabled: false\nsummarization:\n  enabled: true\n  keep:\n" +
        "    type: messages\n    value: 2\n")
      const endpoint = ["--config", config, "--base-url", server.url, "--api-key", "x"]
      for (const prompt of ["first question", "second question"]) {
        const run = yield* antlerDone(compactHome, ["run", ...endpoint, "--thread", "c1", prompt])
        assert.strictEqual(run.code, 0, run.stderr)
      }
      const calls = server.requests.length

      const unforced = yield* antlerDone(compactHome, ["threads", "compact", ...endpoint, "c1"])
      assert.strictEqual(unforced.code, 0, unforced.stderr)
      assert.include(unforced.stdout, "Nothing compacted: The thread does not need compaction yet")
      assert.strictEqual(server.requests.length, calls, "no model call without --force below the trigger")

      const forced = yield* antlerDone(compactHome, ["threads", "compact", "--force", ...endpoint, "c1"])
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.match(forced.stdout, /^Compacted thread c1: 2 older messages summarised, \d+ kept/)
      const call = server.requests.at(-1)!
      assert.isTrue(summaryOf(call))
      assert.include(String(call.messages.at(-1)!.content), "first question")
      assert.deepStrictEqual(call.tools ?? [], [])
      const shown = yield* antlerDone(compactHome, ["threads", "show", "c1", "--json"])
      const state = JSON.parse(shown.stdout).state
      assert.strictEqual(state.summary_text, "## Session intent\nCompacted SUMMARY-CLI-3307")
      assert.notInclude(JSON.stringify(state.messages), "first question")
      assert.include(JSON.stringify(state.messages), "second question")

      // the next run of the thread reads the summary
      const next = yield* antlerDone(compactHome, ["run", ...endpoint, "--thread", "c1", "third question"])
      assert.strictEqual(next.code, 0, next.stderr)
      assert.include(JSON.stringify(server.requests.at(-1)!.messages), "SUMMARY-CLI-3307")

      const json = yield* antlerDone(compactHome, ["threads", "compact", "--force", "--json", ...endpoint, "c1"])
      assert.strictEqual(json.code, 0, json.stderr)
      assert.strictEqual(JSON.parse(json.stdout).compacted, true)
      const missing = yield* antlerDone(compactHome, ["threads", "compact", "--force", ...endpoint, "nope"])
      assert.strictEqual(missing.code, 1)
      assert.include(missing.stderr, "No thread \"nope\"")
    })), SLOW)

  it.live("--agent summarises a custom agent's thread with the agent's model, unless --model is given", () =>
    Effect.scoped(Effect.gen(function*() {
      const summaryOf = (body: ScriptedChatServer.ChatRequestBody) =>
        String(body.messages.at(-1)?.content ?? "").includes("You are compacting the history")
      const server = yield* ScriptedChatServer.start((body) =>
        summaryOf(body) ? "## Session intent\nCompacted by the agent's model" : "Answered."
      )
      const home = tempDir("antler-compact-agent-")
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(
        config,
        "memory:\n  enabled: false\nsummarization:\n  enabled: true\n  keep:\n    type: messages\n    value: 2\n" +
          "models:\n" +
          ["main", "special"].map((name) =>
            `  - name: ${name}\n    use: langchain_openai:ChatOpenAI\n    model: ${name}-model\n` +
            `    base_url: ${server.url}\n    api_key: x\n`
          ).join("")
      )
      const agent = Path.join(home, "users", "default", "agents", "ada")
      Fs.mkdirSync(agent, { recursive: true })
      Fs.writeFileSync(Path.join(agent, "config.yaml"), "name: ada\ndescription: A helper\nmodel: special\n")
      Fs.writeFileSync(Path.join(agent, "SOUL.md"), "You are Ada.")
      for (const prompt of ["first question", "second question"]) {
        const run = yield* antlerDone(home, ["run", "--config", config, "--agent", "ada", "--thread", "a1", prompt])
        assert.strictEqual(run.code, 0, run.stderr)
        assert.strictEqual(server.requests.at(-1)!.model, "special-model")
      }
      const summaryModel = () => server.requests.filter(summaryOf).at(-1)?.model

      const compact = ["threads", "compact", "--force", "--config", config]
      const byAgent = yield* antlerDone(home, [...compact, "--agent", "ada", "a1"])
      assert.strictEqual(byAgent.code, 0, byAgent.stderr)
      assert.match(byAgent.stdout, /^Compacted thread a1: /)
      assert.strictEqual(summaryModel(), "special-model")

      const third = yield* antlerDone(home, ["run", "--config", config, "--agent", "ada", "--thread", "a1", "third"])
      assert.strictEqual(third.code, 0, third.stderr)
      const byFlag = yield* antlerDone(home, [...compact, "--agent", "ada", "--model", "main", "a1"])
      assert.strictEqual(byFlag.code, 0, byFlag.stderr)
      assert.match(byFlag.stdout, /^Compacted thread a1: /)
      assert.strictEqual(summaryModel(), "main-model")

      const calls = server.requests.length
      const unknown = yield* antlerDone(home, [...compact, "--agent", "bob", "a1"])
      assert.strictEqual(unknown.code, 2)
      assert.include(unknown.stderr, "No agent named \"bob\"")
      const invalid = yield* antlerDone(home, [...compact, "--agent", "../ada", "a1"])
      assert.strictEqual(invalid.code, 2, invalid.stderr)
      assert.strictEqual(server.requests.length, calls, "no model call for an agent that is not there")
    })), SLOW)

  it.live("a failed compaction's error hides the configured tools' keys", () =>
    Effect.scoped(Effect.gen(function*() {
      const key = "tvly-compact-secret-0123456789"
      const compacting = (body: ScriptedChatServer.ChatRequestBody) =>
        String(body.messages.at(-1)?.content ?? "").includes("You are compacting the history")
      // the provider's error repeats what it was sent, the tool's key among it
      const server = yield* ScriptedChatServer.start((body) =>
        compacting(body)
          ? { status: 400, body: { error: { message: `bad request near ${key}`, type: "invalid_request_error" } } }
          : "Answered."
      )
      const home = tempDir("antler-compact-secret-")
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(config, "memory:\n  enabled: false\nsummarization:\n  enabled: true\n  keep:\n" +
        "    type: messages\n    value: 2\n" +
        `tools:\n  - name: web_search\n    group: web\n    use: deerflow.community.tavily.tools:web_search_tool\n` +
        `    api_key: ${key}\n`)
      const endpoint = ["--config", config, "--base-url", server.url, "--api-key", "x"]
      for (const prompt of ["first question", "second question"]) {
        const run = yield* antlerDone(home, ["run", ...endpoint, "--thread", "c3", prompt])
        assert.strictEqual(run.code, 0, run.stderr)
      }
      const failed = yield* antlerDone(home, ["threads", "compact", "--force", ...endpoint, "c3"])
      assert.strictEqual(failed.code, 1)
      assert.include(failed.stderr, "No summary could be made")
      assert.include(failed.stderr, "bad request near")
      assert.notInclude(failed.stderr + failed.stdout, key)
    })), SLOW)

  it.live("with summarization off, compaction is refused, saying how to turn it on", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["Answered."])
      const offHome = tempDir("antler-compact-off-")
      const endpoint = ["--base-url", server.url, "--api-key", "x"]
      const run = yield* antlerDone(offHome, ["run", ...endpoint, "--thread", "c2", "a question"])
      assert.strictEqual(run.code, 0, run.stderr)
      const off = yield* antlerDone(offHome, ["threads", "compact", "--force", ...endpoint, "c2"])
      assert.strictEqual(off.code, 1)
      assert.include(off.stderr, "summarization.enabled: true")
      assert.strictEqual(server.requests.length, 1)
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
      assert.include(bogus.stderr, "antler run: unknown option --bogus. Its options: --thread, --continue, --model")
      assert.include(bogus.stderr, `goes after --: ${CliCommand.invocation(process.env, careless)} run -- "--bogus ..."`)
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
      assert.include(proc.stderr, "Cannot use the data directory /proc/nope (ANTLER_HOME, default ~/.antler): ")
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
        `Your keys are ${MAIN_KEY} and ${OTHER_KEY}.`,
        { status: 401, body: ScriptedChatServer.errorBody(echo, "invalid_request_error", "invalid_api_key") },
        { status: 500, body: ScriptedChatServer.errorBody(`${echo} \x1b]52;c;ZXZpbA==\x07`, "server_error") },
        `Again: ${MAIN_KEY}, ${OTHER_KEY}.`
      ], { chunkSize: 3 })
      const secretsHome = tempDir("antler-secrets-")
      const config = Path.join(secretsHome, "config.yaml")
      Fs.writeFileSync(config, [
        // memory off: its update after each run would take a turn of the script
        "memory:",
        "  enabled: false",
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
      const echoed = yield* run(["--thread", "s1", "tell me the keys"])
      // On a thread with a history (a failed run on a new thread keeps nothing), the failure is stored.
      const rejected = yield* run(["--json", "--thread", "s1", "hello"])
      const failed = yield* run(["--thread", "s2", "hello"])
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
      assert.include(failed.stdout, "temporarily unavailable")
      // The error line gives the server's answer as its cause, neutralised (once: no log line repeats it).
      assert.include(failed.stdout, "Cause: ")
      assert.include(failed.stdout, "500 Incorrect API key provided: Bearer [redacted] (also tried [redacted])")
      assert.include(failed.stdout, "␛]52;c;ZXZpbA==␇")
      assert.notInclude(failed.stderr, "Incorrect API key")
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
  it.live("SIGINT cancels the run, exits 130, and the completed step and the streamed answer stay saved", () =>
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
      // the completed step, then the start of the answer the model was streaming at the stop
      const types = thread.state.messages.map((m: M.Message) => m.type)
      assert.deepStrictEqual(types, ["system", "human", "ai", "tool", "ai"])
      assert.strictEqual(M.text(thread.state.messages[3]), "OK")
      assert.strictEqual(M.text(thread.state.messages[4]), "Now thinking for a long time")
      assert.deepStrictEqual(M.toolCalls(thread.state.messages[4]), [])
      assert.deepStrictEqual(thread.runs.map((r: { status: string }) => r.status), ["cancelled"])
    })), SLOW)
})

describe("what a run prints", () => {
  const script = (): ReadonlyArray<ScriptedChatServer.Turn> => [
    { status: 503, body: ScriptedChatServer.errorBody("The server is overloaded", "server_error") },
    {
      content: "Cleaning up. ",
      toolCalls: [{ name: "bash", arguments: { description: "Remove everything", command: "rm -rf /" } }]
    },
    {
      status: 401,
      body: ScriptedChatServer.errorBody("Incorrect API key provided", "invalid_request_error", "invalid_api_key")
    }
  ]
  const configFor = (dir: string, url: string) => {
    const config = Path.join(dir, "config.yaml")
    Fs.writeFileSync(config, [
      "llm_call:",
      "  retry_base_delay_ms: 200",
      "  retry_cap_delay_ms: 200",
      "models:",
      "  - name: main",
      "    model: main-model",
      `    base_url: ${url}`,
      "    api_key: sk-snapshot-0123456789",
      ""
    ].join("\n"))
    return config
  }

  it.live("a retry, a blocked command and a failure: one readable line each, the error once with its cause", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script())
      const dir = tempDir("antler-snapshot-")
      const config = configFor(dir, server.url)
      const result = yield* antlerDone(dir, ["run", "--config", config, "--thread", "snap", "clean up"])
      assert.strictEqual(result.code, 1, result.stderr)
      assert.strictEqual(
        result.stdout.replaceAll(server.url, "URL"),
        [
          "thread snap (new; continue it with --continue) · model main-model at URL",
          "↻ LLM request retry 1/3: provider request failed temporarily. Retrying in 1s.",
          "Cleaning up. ",
          "→ Remove everything · bash rm -rf /",
          "⛔ Blocked `rm -rf /`: recursive delete of the root, home or /root directory.",
          "error: The configured LLM provider rejected the request because authentication or access is invalid. " +
          "Please check the provider credentials and try again. Cause: The model call failed (model main-model " +
          "at URL): 401 Incorrect API key provided",
          "— failed · thread snap",
          ""
        ].join("\n")
      )
      // Nothing of it again on stderr (the log lines that repeat the events are left out).
      for (const repeated of ["model call failed", "401", "sandbox audit", "Blocked"]) {
        assert.notInclude(result.stderr, repeated)
      }
    })), SLOW)

  it.live("--verbose adds the raw forms (event data, full arguments, log lines); --json keeps the events as is", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = tempDir("antler-verbose-")
      const verboseServer = yield* ScriptedChatServer.start(script())
      const verbose = yield* antlerDone(dir, ["run", "--config", configFor(dir, verboseServer.url), "--verbose", "x"])
      assert.strictEqual(verbose.code, 1, verbose.stderr)
      assert.include(verbose.stdout, "↻ LLM request retry 1/3:")
      assert.match(verbose.stdout, /^\[llm_retry\] \{"type":"llm_retry","attempt":1,"max_attempts":3,"wait_ms":200,/m)
      const args = JSON.stringify({ description: "Remove everything", command: "rm -rf /" })
      assert.include(verbose.stdout, `→ Remove everything · bash rm -rf /\n  ${args}\n`)
      assert.match(verbose.stdout, /^\[sandbox_audit\] \{.*"verdict":"block"/m)
      assert.include(verbose.stderr, "model call failed")

      const jsonServer = yield* ScriptedChatServer.start(script())
      const json = yield* antlerDone(dir, ["run", "--config", configFor(dir, jsonServer.url), "--json", "x"])
      assert.strictEqual(json.code, 1, json.stderr)
      const events = jsonLines(json.stdout)
      const custom = events.flatMap((e) => (e.type === "custom" ? [e] : []))
      assert.deepStrictEqual(custom.map((e) => e.name), ["llm_retry", "sandbox_audit"])
      assert.deepInclude(custom[0]!.data as object, { type: "llm_retry", attempt: 1, max_attempts: 3, wait_ms: 200 })
      assert.deepInclude(custom[1]!.data as object, { command: "rm -rf /", verdict: "block" })
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "error", stop_reason: "error" })
    })), SLOW)

  it.live("a run that cannot reach its model says why once, and a new thread it started is not kept", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = tempDir("antler-unreachable-")
      const port = yield* Effect.promise(() => closedPort())
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "llm_call:\n  retry_max_attempts: 1\n")
      const url = `http://127.0.0.1:${port}/v1`
      const failed = yield* antlerDone(dir, ["run", "--config", config, "--base-url", url, "--api-key", "x", "hello"])
      assert.strictEqual(failed.code, 1, failed.stderr)
      const both = failed.stdout + failed.stderr
      assert.strictEqual(both.split(`ECONNREFUSED 127.0.0.1:${port}`).length - 1, 1, both)
      assert.match(failed.stdout, /^error: .* Cause: Could not connect to the model server .*ECONNREFUSED/m)
      assert.match(failed.stdout, /— failed before the model replied; nothing was saved\n$/)
      const listed = yield* antlerDone(dir, ["threads", "list"])
      assert.include(listed.stdout, "No threads yet")
      assert.isFalse(Fs.existsSync(Path.join(dir, "users", "default", "threads")) &&
        Fs.readdirSync(Path.join(dir, "users", "default", "threads")).length > 0)

      // A thread with a history is kept when a later run fails, and listed as failed.
      const server = yield* ScriptedChatServer.start(["Hello!"])
      const ok = yield* antlerDone(dir, ["run", "--base-url", server.url, "--api-key", "x", "--thread", "keep", "hi"])
      assert.strictEqual(ok.code, 0, ok.stderr)
      const later = yield* antlerDone(dir, [
        "run", "--config", config, "--base-url", url, "--api-key", "x", "--thread", "keep", "again"
      ])
      assert.strictEqual(later.code, 1)
      assert.match(later.stdout, /— failed · thread keep\n$/)
      const after = yield* antlerDone(dir, ["threads", "list"])
      assert.match(after.stdout, /^keep {2}\S+ \S+ {2}failed {2}/m)
    })), SLOW)
})

/** A loopback port nobody listens on. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

describe("threads you can find again", () => {
  it.live("from another directory threads list finds the thread; --continue continues it; delete removes it", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["Paris.", "About two million."])
      // No ANTLER_HOME: the data directory is the user's (~/.antler), here in a HOME of the test's own.
      const user = tempDir("antler-user-")
      const [a, b] = [tempDir("antler-cwd-a-"), tempDir("antler-cwd-b-")]
      const inDir = (cwd: string, args: ReadonlyArray<string>) =>
        Effect.promise(() =>
          spawn(process.execPath, [...antlerCommand, ...args], { env: childEnv({ HOME: user, ANTLER_CONFIG: QUIET_CONFIG }), cwd }).done
        )
      const endpoint = ["--base-url", server.url, "--api-key", "x"]
      const first = yield* inDir(a, ["run", ...endpoint, "Capital of France?"])
      assert.strictEqual(first.code, 0, first.stderr)
      const threadId = /^thread (\S+) \(new; continue it with --continue\)/m.exec(first.stdout)?.[1]
      assert.isDefined(threadId, first.stdout)
      assert.isTrue(Fs.existsSync(Path.join(user, ".antler", "antler.sqlite")))
      assert.isFalse(Fs.existsSync(Path.join(a, ".antler")))

      const listed = yield* inDir(b, ["threads", "list"])
      assert.strictEqual(listed.code, 0, listed.stderr)
      assert.match(
        listed.stdout,
        new RegExp(
          `^${threadId} {2}\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d {2}completed {2} +\\d+ steps {2}Capital of France\\?$`,
          "m"
        )
      )
      assert.include(listed.stdout, `1 thread in ${Path.join(user, ".antler")}`)

      const next = yield* inDir(b, ["run", ...endpoint, "--continue", "How many people?"])
      assert.strictEqual(next.code, 0, next.stderr)
      assert.include(next.stdout, `thread ${threadId} (continuing)`)
      assert.include(next.stdout, "About two million.")
      const sent = server.requests[1]!.messages.map((m) => JSON.stringify(m.content))
      assert.isTrue(sent.some((c) => c.includes("Capital of France?")) && sent.some((c) => c.includes("Paris.")))

      const files = Path.join(user, ".antler", "users", "default", "threads", threadId!)
      Fs.mkdirSync(Path.join(files, "user-data", "workspace"), { recursive: true })
      Fs.writeFileSync(Path.join(files, "user-data", "workspace", "notes.txt"), "x")
      const deleted = yield* inDir(a, ["threads", "delete", threadId!])
      assert.strictEqual(deleted.code, 0, deleted.stderr)
      assert.include(deleted.stdout, `Deleted thread ${threadId} and its files.`)
      assert.isFalse(Fs.existsSync(files))
      const after = yield* inDir(b, ["threads", "list"])
      assert.include(after.stdout, "No threads yet")
      const shown = yield* inDir(b, ["threads", "show", threadId!])
      assert.strictEqual(shown.code, 1)
      const again = yield* inDir(a, ["threads", "delete", threadId!])
      assert.strictEqual(again.code, 1)
      assert.include(again.stderr, `No thread "${threadId}"`)
      const nothing = yield* inDir(a, ["run", ...endpoint, "--continue", "hi"])
      assert.strictEqual(nothing.code, 1)
      assert.include(nothing.stderr, "No thread to continue")
    })), SLOW)

  it.live("a prompt from stdin: a pipe with no prompt, or - among the words; an empty one is a usage error", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["one", "two"])
      const dir = tempDir("antler-stdin-")
      const endpoint = ["run", "--base-url", server.url, "--api-key", "x"]
      const lastUser = (i: number) => String(server.requests[i]!.messages.at(-1)!.content)
      const piped = yield* Effect.promise(() => antler(dir, endpoint, {}, dir, "Summarise this text\n").done)
      assert.strictEqual(piped.code, 0, piped.stderr)
      assert.match(lastUser(0), /\nSummarise this text\n/)
      const dashed = yield* Effect.promise(() =>
        antler(dir, [...endpoint, "Review:", "-"], {}, dir, "line 1\nline 2\n").done
      )
      assert.strictEqual(dashed.code, 0, dashed.stderr)
      assert.match(lastUser(1), /\nReview: line 1\nline 2\n/)
      const empty = yield* antlerDone(dir, endpoint)
      assert.strictEqual(empty.code, 2)
      assert.include(
        empty.stderr,
        `antler run: the prompt is empty.\nRun \`${CliCommand.invocation(process.env, dir)} run --help\` for its usage.`
      )
      const both = yield* antlerDone(dir, [...endpoint, "--continue", "--thread", "t", "hi"])
      assert.strictEqual(both.code, 2)
      assert.include(both.stderr, "give only one of them")
      assert.strictEqual(server.requests.length, 2)
    })), SLOW)
})

describe("help", () => {
  const paths = [
    [],
    ["run"],
    ["threads"],
    ["threads", "list"],
    ["threads", "show"],
    ["threads", "delete"],
    ["upload"],
    ["demo"]
  ]

  it.live("antler --help and every command's help, piped: plain text, every option described, examples", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-help-")
      const lines = [...paths.map((path) => [...path, "--help"]), [], ["threads"], ["--version"]]
      // NO_COLOR unset: piped output has no colour all the same. The program's and run's help from the real
      // command; every command's from one process that answers each the same way (see test/fixtures/cli-help.ts).
      const root = yield* antlerDone(dir, ["--help"], { NO_COLOR: "" })
      const run = yield* antlerDone(dir, ["run", "--help"], { NO_COLOR: "" })
      const all = yield* Effect.promise(() =>
        spawn(process.execPath, ["--import", TSX, HELP_FIXTURE, JSON.stringify(lines)], {
          env: childEnv({ ANTLER_HOME: dir, NO_COLOR: "" }),
          cwd: dir
        }).done
      )
      assert.strictEqual(all.code, 0, all.stderr)
      const outputs = all.stdout.split("=====\n").slice(0, -1)
      assert.strictEqual(outputs.length, lines.length)
      const texts = outputs.slice(0, paths.length)
      // `antler` alone and a group without its subcommand give their help; --version the version.
      const [bare, group, version] = outputs.slice(paths.length)
      assert.strictEqual(bare, texts[0])
      assert.strictEqual(group, texts[2])
      assert.match(version!, /^antler \d+\.\d+\.\d+\n$/)
      assert.strictEqual(texts[0], root.stdout)
      assert.strictEqual(texts[1], run.stdout)
      for (const [i, text] of texts.entries()) {
        const path = paths[i]!
        const what = path.join(" ")
        for (const result of i === 0 ? [root] : i === 1 ? [run] : []) assert.strictEqual(result.code, 0, result.stderr)
        assert.notInclude(text, "\x1b", what)
        assert.notInclude(text, "A user-defined piece of text", what)
        assert.notInclude(text, "--wizard", what)
        let spec = Cli.commandSpec
        for (const name of path) spec = spec.subcommands[name]!
        for (const option of Object.keys(spec.options)) {
          assert.match(text, new RegExp(`^  ${option}( [A-Z]+)? +\\S`, "m"), `${what} ${option}`)
        }
        if (path.length === 0) {
          assert.include(
            text.replace(/\s+/g, " "),
            `Threads, uploads and the agent's files: $ANTLER_HOME, else ~/.antler (here: ${dir})`
          )
          for (const name of Object.keys(Cli.commandSpec.subcommands)) assert.match(text, new RegExp(`^  ${name}`, "m"))
        }
        if (Object.keys(spec.subcommands).length === 0) assert.include(text, "Examples", what)
      }
      // @effect/cli's own messages are plain too.
      const missing = yield* antlerDone(dir, ["run", "--file", Path.join(dir, "no-such-file"), "hi"], { NO_COLOR: "" })
      assert.strictEqual(missing.code, 2)
      assert.notInclude(missing.stdout + missing.stderr, "\x1b")
      assert.include(missing.stderr, "no-such-file")
    }), SLOW)
})

// ---------------------------------------------------------------------------------------------------------
// Pure parts

const model = (name: string, extra: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(ModelConfig)({ name, model: `${name}-id`, ...extra })

describe("context commands", () => {
  it.live("run --plan shows the todo list as it changes; threads show keeps it", () =>
    Effect.scoped(Effect.gen(function*() {
      const todos = (statuses: ReadonlyArray<string>) => ({
        toolCalls: [{
          name: "write_todos",
          arguments: { todos: ["Find a route", "Pack"].map((content, i) => ({ content, status: statuses[i] })) }
        }]
      })
      const server = yield* ScriptedChatServer.start([
        todos(["in_progress", "pending"]),
        todos(["completed", "in_progress"]),
        "Route found; packing next.",
        // an answer with open items is asked again (Todo's completion reminder, at most twice a run)
        "Packing is still open: it needs your gear list.",
        "Packing is still open: it needs your gear list."
      ])
      const planHome = tempDir("antler-plan-")
      const run = yield* antlerDone(planHome, [
        "run", "--plan", "--base-url", server.url, "--api-key", "x", "--thread", "p1", "plan a hike"
      ])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.include(run.stdout, "todos\n  [~] Find a route\n  [ ] Pack\n")
      assert.include(run.stdout, "todos\n  [x] Find a route\n  [~] Pack\n")
      // plan mode gave the model write_todos and its guidance
      assert.isTrue((server.requests[0]!.tools ?? []).some((t) => JSON.stringify(t).includes("\"write_todos\"")))
      assert.include(String(server.requests[0]!.messages[0]!.content), "<todo_list_system>")
      const shown = yield* antlerDone(planHome, ["threads", "show", "p1"])
      assert.include(shown.stdout, "todos\n  [x] Find a route\n  [~] Pack")
    })), SLOW)

  it.live("memory: run 1 states a fact; run 2 (a new thread) gets it; memory show lists it, memory clear forgets it", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start((body) => {
        const first = String(body.messages[0]?.content ?? "")
        if (first.startsWith("You maintain the long-term memory")) {
          return JSON.stringify({
            // labelled as the write gate keeps them: the user's, durable, descriptive
            user: {
              workContext: {
                summary: "Data engineer at Acme.",
                shouldUpdate: true,
                scope: "user",
                authority: "descriptive"
              }
            },
            newFacts: [{
              content: "Uses uv, never pip",
              category: "preference",
              confidence: 0.95,
              scope: "user",
              durability: "durable",
              authority: "descriptive"
            }]
          })
        }
        return "Noted."
      })
      const memHome = tempDir("antler-memory-cli-")
      const config = Path.join(memHome, "config.yaml")
      Fs.writeFileSync(config, "memory:\n  enabled: true\n")
      const endpoint = ["--base-url", server.url, "--api-key", "x", "--config", config]
      const first = yield* antlerDone(memHome, ["run", ...endpoint, "--thread", "m1", "I'm a data engineer at Acme; I use uv, never pip."])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.include(first.stdout, "updating long-term memory…")
      const second = yield* antlerDone(memHome, ["run", ...endpoint, "--thread", "m2", "Start a Python project"])
      assert.strictEqual(second.code, 0, second.stderr)
      const sent = server.requests.find((r) => r.messages.some((m) => String(m.content).includes("Start a Python project")))!
      assert.isTrue(sent.messages.some((m) => String(m.content).includes("- [preference | 0.95] Uses uv, never pip")))
      const shown = yield* antlerDone(memHome, ["memory", "show", "--config", config])
      assert.strictEqual(shown.code, 0, shown.stderr)
      assert.include(shown.stdout, `memory ${Path.join(memHome, "users", "default", "memory.json")}`)
      assert.include(shown.stdout, "- Work: Data engineer at Acme.")
      assert.match(shown.stdout, /\[preference 0\.95\] Uses uv, never pip fact_/)
      const json = yield* antlerDone(memHome, ["memory", "show", "--json", "--config", config])
      assert.strictEqual(JSON.parse(json.stdout).facts[0].content, "Uses uv, never pip")
      // the memory's recall records and eviction audit go with it
      const sidecars = Path.join(memHome, "users", "default", "agents", "__default__", ".metadata")
      Fs.mkdirSync(sidecars, { recursive: true })
      Fs.writeFileSync(Path.join(sidecars, "eviction-audit.json"), "[]")
      const cleared = yield* antlerDone(memHome, ["memory", "clear", "--config", config])
      assert.strictEqual(cleared.code, 0, cleared.stderr)
      assert.isFalse(Fs.existsSync(Path.join(memHome, "users", "default", "agents", "__default__")))
      const after = yield* antlerDone(memHome, ["memory", "show", "--config", config])
      assert.include(after.stdout, "(nothing remembered yet)")
      const unsafe = yield* antlerDone(memHome, ["memory", "show", "--user", "../x", "--config", config])
      assert.strictEqual(unsafe.code, 2)
    })), SLOW)

  it.live("run /skill says the skill was activated, and names allowed-tools the agent does not have, once", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = tempDir("antler-skill-run-")
      Fs.mkdirSync(Path.join(dir, "skills/public/notes"), { recursive: true })
      Fs.writeFileSync(
        Path.join(dir, "skills/public/notes/SKILL.md"),
        "---\nname: notes\ndescription: Take notes.\nallowed-tools: [read_file, write_file, web_zap]\n---\nBe brief.\n"
      )
      Fs.writeFileSync(Path.join(dir, "config.yaml"), "memory:\n  enabled: false\ntitle:\n  enabled: false\n")
      const server = yield* ScriptedChatServer.start([
        { toolCalls: [{ name: "write_file", arguments: { path: "/mnt/user-data/workspace/n.md", content: "x" } }] },
        "noted"
      ])
      const run = yield* antlerDone(dir, [
        "run", "--base-url", server.url, "--api-key", "x", "--config", Path.join(dir, "config.yaml"), "/notes", "hi"
      ])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.include(run.stdout, "✦ Skill notes activated for this run.")
      const warning = "The allowed-tools of the active skill notes names tool this agent does not have: web_zap."
      assert.strictEqual(run.stdout.split(warning).length - 1, 1, run.stdout)
      // the model was offered what the skill allows and the agent has, and what every skill allows
      // (review_skill_package, as DeerFlow's skill tool policy)
      assert.deepStrictEqual(
        server.requests[0]!.tools!.map((tool: any) => tool.function.name).sort(),
        ["read_file", "review_skill_package", "write_file"]
      )
    })), SLOW)

  it.live("threads show lists the skills /skill activated in the thread, not a refused one", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = tempDir("antler-skill-show-")
      Fs.mkdirSync(Path.join(dir, "skills/public/notes"), { recursive: true })
      Fs.writeFileSync(
        Path.join(dir, "skills/public/notes/SKILL.md"),
        "---\nname: notes\ndescription: Take notes.\n---\nBe brief.\n"
      )
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "memory:\n  enabled: false\ntitle:\n  enabled: false\n")
      const server = yield* ScriptedChatServer.start(["noted", "plain answer"])
      const endpoint = ["--base-url", server.url, "--api-key", "x", "--config", config, "--thread", "skilled"]
      for (const prompt of ["/notes take this down", "/nosuchskill hi", "no skill now"]) {
        const run = yield* antlerDone(dir, ["run", ...endpoint, prompt])
        assert.strictEqual(run.code, 0, run.stderr)
      }
      const shown = yield* antlerDone(dir, ["threads", "show", "skilled"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const section = shown.stdout.split("skills activated\n")[1]
      assert.isDefined(section, shown.stdout)
      assert.deepStrictEqual(section!.split("\n\n")[0]!.trim().split("\n").map((line) => line.trim()), ["/notes"])
    })), SLOW)

  it.live("skills list shows what was found next to the config, enabled or not, and why a skill was rejected", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-skills-cli-")
      const write = (relative: string, content: string) => {
        Fs.mkdirSync(Path.dirname(Path.join(dir, relative)), { recursive: true })
        Fs.writeFileSync(Path.join(dir, relative), content)
      }
      write("config.yaml", "title:\n  enabled: true\n")
      write("skills/public/notes/SKILL.md", "---\nname: notes\ndescription: Take notes.\nallowed-tools: [read_file]\n---\n")
      write("skills/custom/mine/SKILL.md", "---\nname: mine\ndescription: Mine.\n---\n")
      write("skills/custom/broken/SKILL.md", "no front matter here\n")
      write("extensions_config.json", JSON.stringify({ skills: { mine: { enabled: false } } }))
      const result = yield* antlerDone(dir, ["skills", "list", "--config", Path.join(dir, "config.yaml")])
      assert.strictEqual(result.code, 0, result.stderr)
      const out = result.stdout
      assert.include(out, `skills in ${Path.join(dir, "skills")} (skills/ next to the config file): 2 found, 1 enabled`)
      assert.match(out, /enabled  notes \(public\)  \/mnt\/skills\/public\/notes\/SKILL\.md  allowed-tools: read_file/)
      assert.match(out, /disabled mine \(custom\)  \/mnt\/skills\/custom\/mine\/SKILL\.md/)
      assert.include(out, `${Path.join(dir, "skills/custom/broken/SKILL.md")}: no YAML front matter`)
      const json = yield* antlerDone(dir, ["skills", "list", "--json", "--config", Path.join(dir, "config.yaml")])
      assert.lengthOf(JSON.parse(json.stdout).skills, 2)
    }), SLOW)
})

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
      ["--continue", false],
      ["--model", true],
      ["--base-url", true],
      ["--api-key", true],
      ["--config", true],
      ["--file", true],
      ["--plan", false],
      ["--agent", true],
      ["--subagents", false],
      ["--secret", true],
      ["--wait-tasks", true],
      ["--json", false],
      ["--verbose", false]
    ])
    assert.isTrue(run.args)
    assert.deepStrictEqual(
      Object.keys(Cli.commandSpec.subcommands),
      ["run", "threads", "upload", "tools", "skills", "memory", "agents", "serve", "demo"]
    )
    assert.deepStrictEqual(Object.keys(Cli.commandSpec.subcommands.agents!.subcommands), ["list", "show", "create"])
    assert.deepStrictEqual(Object.entries(Cli.commandSpec.subcommands.agents!.subcommands.create!.options), [
      ["--thread", true],
      ["--model", true],
      ["--base-url", true],
      ["--api-key", true],
      ["--config", true],
      ["--verbose", false]
    ])
    assert.deepStrictEqual(Object.keys(Cli.commandSpec.subcommands.memory!.subcommands), ["show", "clear"])
    assert.deepStrictEqual(Object.keys(Cli.commandSpec.subcommands.threads!.subcommands), ["list", "show", "delete", "compact"])
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
        ["serve", "--host", "127.0.0.1", "--port", "0", "--config", "c.yaml"],
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
      "antler run: unknown option --bogus. Its options: --thread, --continue, --model, --base-url, --api-key, " +
        "--config, --file, --plan, --agent, --subagents, --secret, --wait-tasks, --json, --verbose.\n" +
        "An argument that starts with \"-\" goes after --: antler run -- \"--bogus ...\"\n" +
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
    assert.include(
      problem("deploy")!,
      "antler: unknown command deploy. Commands: run, threads, upload, tools, skills, memory, agents, serve, demo."
    )
    assert.include(problem("serv")!, "antler: unknown command serv; did you mean serve?")
    assert.include(problem("serve", "--prot", "8001")!, "antler serve: unknown option --prot; did you mean --port?")
    assert.include(problem("constructor")!, "antler: unknown command constructor.")
  })

  it("the commands a problem suggests are typed as Antler is run where the user is (npx antler in the clone)", () => {
    const npx = (...args: ReadonlyArray<string>) => Cli.commandLineProblem(Cli.commandSpec, args, "npx antler")
    assert.strictEqual(
      npx("run", "--bogus", "1", "hi"),
      "antler run: unknown option --bogus. Its options: --thread, --continue, --model, --base-url, --api-key, " +
        "--config, --file, --plan, --agent, --subagents, --secret, --wait-tasks, --json, --verbose.\n" +
        "An argument that starts with \"-\" goes after --: npx antler run -- \"--bogus ...\"\n" +
        "Run `npx antler run --help` for its usage."
    )
    assert.match(npx("run", "--thread")!, /\nRun `npx antler run --help` for its usage\.$/)
    assert.match(npx("threads", "lst")!, /^antler threads: unknown command lst; did you mean list\?\n/)
    assert.match(npx("threads", "lst")!, /\nRun `npx antler threads --help` for its usage\.$/)
    assert.match(npx("deploy")!, /\nRun `npx antler --help` for its usage\.$/)
  })

  it("every command's help describes each of its options and arguments (a new option without help fails here)", () => {
    const check = (entries: ReadonlyArray<CliCommand.Entry>, parent: Cli.CommandSpec) => {
      for (const entry of entries) {
        const spec = parent.subcommands[entry.name]!
        const described = (entry.help.options ?? []).map(([flag]) => flag.split(" ")[0])
        assert.deepStrictEqual(described.toSorted(), Object.keys(spec.options).toSorted(), spec.name)
        for (const [, text] of [...(entry.help.options ?? []), ...(entry.help.arguments ?? [])]) {
          assert.isAbove(text.length, 10, spec.name)
        }
        assert.strictEqual((entry.help.arguments ?? []).length > 0, spec.args, spec.name)
        check(entry.subcommands ?? [], spec)
      }
    }
    check(Cli.COMMANDS, Cli.commandSpec)
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
    assert.deepStrictEqual(out, [
      "",
      "Hel",
      "lo.",
      "",
      "\n\n[stopped: loop]",
      "\n— stopped: the model kept repeating the same tool calls (loop_capped) · thread t1\n"
    ])
  })

  it("shows each tool call once and clips long results to their first lines", () => {
    const render = Render.human({ color: false })
    const call = { id: "c1", name: "bash", args: { command: "seq 1 100" } }
    const ai = M.ai("", { id: "m1", tool_calls: [call] })
    const first = render(runStart) + render({ type: "message", message: ai })
    assert.strictEqual(first, "→ bash seq 1 100\n")
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
    assert.strictEqual(text, "error: ModelError: 401\n— failed · thread t1\n")
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
      "→ f {\"a\":[[[[[[[[…]]]]]]]]}\n→ g␛]0;x␇(The arguments nest too deep.)\n"
    )
    assert.include(Render.message(ai, Render.style(false)), "→ f({\"a\":[[[[[[[[…]]]]]]]]})")
  })

  it("custom events show their message; secrets split across token deltas never print", () => {
    const render = Render.human({ color: false, redact: Redact.make(["sk-abcdefghijkl"]) })
    render({ type: "run_start", thread_id: "t1", run_id: "r1" })
    const retry = { type: "llm_retry", message: "Model call attempt 1 of 3 failed; trying again in 2s." }
    assert.strictEqual(
      render({ type: "custom", name: "llm_retry", data: retry }),
      "↻ Model call attempt 1 of 3 failed; trying again in 2s.\n"
    )
    const out = ["key: sk-abc", "defghi", "jkl done"].map((text) => render({ type: "token", message_id: "m", text }))
    assert.deepStrictEqual(out, ["key: ", "", "[redacted] done"])
    assert.strictEqual(render({ type: "message", message: M.ai("key: sk-abcdefghijkl done", { id: "m" }) }), "")
  })

  it("custom events read as one sentence each; passed audits and the raw data only with --verbose", () => {
    const say = (name: string, data: unknown, verbose = false) => Render.eventSentence(name, data, { verbose })
    assert.strictEqual(
      say("llm_retry", { attempt: 1, message: "Model call attempt 1 of 3 failed (busy); trying again in 2s." }),
      "↻ Model call attempt 1 of 3 failed (busy); trying again in 2s."
    )
    assert.strictEqual(
      say("llm_waiting", { message: "Waiting for model m: no answer yet." }),
      "… Waiting for model m: no answer yet."
    )
    // setup_agent's new agent: run with the command as typed where the user is
    assert.strictEqual(
      Render.eventSentence("agent_created", { name: "ada", message: "m" }, { antler: "npx antler" }),
      "✦ Agent 'ada' created. Run it with: npx antler run --agent ada \"...\""
    )
    assert.strictEqual(say("agent_created", { name: null, message: "The default agent's SOUL.md was written." }),
      "The default agent's SOUL.md was written.")
    const audit = { thread_id: "t", command: "ls -la\nrm x", verdict: "pass" }
    assert.isUndefined(say("sandbox_audit", audit))
    assert.strictEqual(say("sandbox_audit", audit, true), "✓ Audit passed `ls -la …`.")
    assert.strictEqual(
      say("sandbox_audit", { ...audit, command: "rm -rf /", verdict: "block", reason: "recursive delete" }),
      "⛔ Blocked `rm -rf /`: recursive delete."
    )
    assert.strictEqual(
      say("sandbox_audit", { ...audit, command: "pip install x", verdict: "warn", reason: "installs packages" }),
      "⚠ Ran `pip install x` with a warning: installs packages."
    )
    const guard = { tool_name: "bash", reason_codes: ["oap.denied"], reason_messages: ["not on the allowlist"] }
    assert.strictEqual(
      say("guardrail", { ...guard, action: "deny_tool_call" }),
      "⛔ The guardrail refused bash: not on the allowlist."
    )
    assert.strictEqual(
      say("guardrail", { ...guard, action: "allow_tool_call_after_provider_error", reason_messages: [] }),
      "⚠ The guardrail provider failed, so bash was allowed (oap.denied)."
    )
    assert.strictEqual(
      say("summarization", { status: "completed", summarized_messages: 12, tokens_before: 9000, tokens_after: 2100 }),
      "Summarised 12 earlier messages to keep the context small (9000 → 2100 tokens)."
    )
    assert.strictEqual(
      say("summarization", { status: "failed", errors: ["the model timed out"] }),
      "⚠ Could not summarise earlier messages: the model timed out."
    )
    assert.strictEqual(
      say("safety_termination", {
        reason_field: "finish_reason",
        reason_value: "content_filter",
        suppressed_tool_call_count: 2
      }),
      "⛔ The model provider stopped the answer for safety (finish_reason: content_filter); 2 tool calls were not run."
    )
    assert.strictEqual(say("task_started", { message: "Subagent started." }), "· Subagent started.")
    assert.isUndefined(say("task_started", { id: 1 }))
    // In a run: the sentence, and with verbose the raw form too.
    const quiet = Render.human({ color: false })
    const loud = Render.human({ color: false, verbose: true })
    const event: RunEvent = { type: "custom", name: "sandbox_audit", data: audit }
    assert.strictEqual(quiet(event), "")
    assert.strictEqual(
      loud(event),
      `✓ Audit passed \`ls -la …\`.\n[sandbox_audit] ${JSON.stringify(audit)}\n`
    )
  })

  it("a tool call is one line: its description, the tool and its key argument", () => {
    const line = (name: string, args: Record<string, unknown>) => Render.toolLine({ name, args })
    assert.strictEqual(
      line("write_file", { description: "Save the list", path: "/mnt/user-data/workspace/a.md", content: "x" }),
      "Save the list · write_file /mnt/user-data/workspace/a.md"
    )
    assert.strictEqual(
      line("bash", { description: "Build", command: "cd app &&   npm run build\nnpm test" }),
      "Build · bash cd app && npm run build …"
    )
    assert.strictEqual(line("grep", { pattern: "TODO", path: "/mnt/user-data" }), "grep TODO in /mnt/user-data")
    assert.strictEqual(line("ls", { description: "Look", path: "/mnt/user-data" }), "Look · ls /mnt/user-data")
    assert.strictEqual(line("present_files", { filepaths: ["/a", "/b"] }), "present_files /a /b")
    assert.strictEqual(line("multiply", { a: 6, b: 7 }), "multiply {\"a\":6,\"b\":7}")
    assert.strictEqual(line("now", {}), "now")
    assert.strictEqual(line("bash", { command: "x".repeat(300) }), `bash ${"x".repeat(99)}…`)
  })

  it("a command's output shows as it comes, under its call; the result then adds only what is new", () => {
    const render = Render.human({ color: false, redact: Redact.make(["sk-secret-123456"]) })
    render(runStart)
    const call = { id: "c1", name: "bash", args: { description: "Build", command: "make" } }
    const ai = M.ai("", { id: "a1", tool_calls: [call] })
    assert.strictEqual(render({ type: "message", message: ai }), "→ Build · bash make\n")
    assert.strictEqual(render.activity(), "running bash")
    const output = (text: string, id = "c1"): RunEvent => ({
      type: "custom",
      name: "tool_output",
      data: { type: "tool_output", tool_call_id: id, tool_name: "bash", text }
    })
    assert.strictEqual(render(output("compiling\n")), "  │ compiling\n")
    assert.strictEqual(render(output("50%\r100%\r")), "  │ 50%\n  │ 100%\n")
    assert.strictEqual(render(output("key sk-secret")), "  │ key ")
    assert.strictEqual(render(output("-123456 ok\n\x1b]52;x\x07\n")), "[redacted] ok\n  │ ␛]52;x␇\n")
    const result = "compiling\n50%\r100%\rkey sk-secret-123456 ok\n\x1b]52;x\x07\n"
    assert.strictEqual(render({ type: "message", message: M.tool(result, "c1", { name: "bash" }) }), "← done\n")
    assert.strictEqual(render.activity(), "waiting for the model")
    // A failing command: the result line says what the output did not.
    render({ type: "message", message: M.ai("", { id: "a2", tool_calls: [{ ...call, id: "c2" }] }) })
    render(output("oops\n", "c2"))
    assert.strictEqual(
      render({ type: "message", message: M.tool("oops\n[exit code: 2]", "c2", { name: "bash" }) }),
      "← [exit code: 2]\n"
    )
    // Long output: the first lines, then a note; the result keeps its start and end.
    render({ type: "message", message: M.ai("", { id: "a3", tool_calls: [{ ...call, id: "c3" }] }) })
    const many = Array.from({ length: Render.LIVE_OUTPUT_LINES + 5 }, (_, i) => `line ${i}\n`).join("")
    const shown = render(output(many, "c3"))
    assert.strictEqual(shown.split("\n").length - 1, Render.LIVE_OUTPUT_LINES + 1)
    assert.match(shown, /  │ … \(more output; the result keeps its start and end\)\n$/)
  })

  it("a blocked or risky command: the audit's sentence, and the result does not say it again", () => {
    const render = Render.human({ color: false })
    render(runStart)
    const call = (id: string, command: string) => ({ id, name: "bash", args: { description: "Do it", command } })
    const audit = (command: string, verdict: string, reason: string): RunEvent => ({
      type: "custom",
      name: "sandbox_audit",
      data: { thread_id: "t1", command, verdict, reason }
    })
    const out = [
      render({ type: "message", message: M.ai("", { id: "a1", tool_calls: [call("c1", "rm -rf /")] }) }),
      render(audit("rm -rf /", "block", "recursive delete of the root")),
      render({
        type: "message",
        message: M.tool(SandboxAudit.blockedText("recursive delete of the root"), "c1", { name: "bash", status: "error" })
      }),
      render({ type: "message", message: M.ai("", { id: "a2", tool_calls: [call("c2", "pip install x")] }) }),
      render(audit("pip install x", "warn", "installs packages")),
      render({
        type: "message",
        message: M.tool(`installed\n\n${SandboxAudit.warningText("pip install x", "installs packages")}`, "c2", {
          name: "bash"
        })
      })
    ].join("")
    assert.strictEqual(
      out,
      [
        "→ Do it · bash rm -rf /",
        "⛔ Blocked `rm -rf /`: recursive delete of the root.",
        "→ Do it · bash pip install x",
        "⚠ Ran `pip install x` with a warning: installs packages.",
        "← installed",
        ""
      ].join("\n")
    )
  })

  it("a run that could not reach its model: the error once, with its cause; a new thread is not kept", () => {
    const render = Render.human({ color: false, newThread: true })
    render(runStart)
    const fallback = M.ai("The model provider is still unavailable after several attempts.", {
      additional_kwargs: {
        deerflow_error_fallback: true,
        error_detail: "Could not connect to the model server (model m at http://127.0.0.1:9/v1): ECONNREFUSED"
      }
    })
    assert.strictEqual(render({ type: "message", message: fallback }), "")
    const error = { name: "APIConnectionError", message: M.text(fallback) }
    const end: RunEvent = { type: "run_end", status: "error", stop_reason: "error", error }
    assert.strictEqual(
      render(end),
      "error: The model provider is still unavailable after several attempts. Cause: Could not connect to the model " +
        "server (model m at http://127.0.0.1:9/v1): ECONNREFUSED\n" +
        "— failed before the model replied; nothing was saved\n"
    )
    assert.isFalse(render.replied())
    assert.isTrue(Render.discardable(end as RunEndEvent, render.replied(), true))
    assert.isFalse(Render.discardable(end as RunEndEvent, render.replied(), false))
    assert.isFalse(Render.discardable(end as RunEndEvent, true, true))
    // a run refused because another run holds the thread: the thread (and its files) are the other run's
    const busy = { ...end, error: { name: "ThreadBusy", message: "Thread t already has a run in progress" } }
    assert.isFalse(Render.discardable(busy as RunEndEvent, false, true))
  })

  it("--json sends the user's message once, as stored (the run writes it, then stamps it with the same id)", () => {
    const render = Render.json("t1", "r1")
    const raw = M.human("hi", { id: "h1" })
    const stamped = { ...raw, name: "user-input", additional_kwargs: { run_id: "r1" } }
    const lines = [
      render(runStart),
      render({ type: "message", message: raw }),
      render({ type: "message", message: stamped }),
      render({ type: "state", update: { title: "hi" } }),
      render({ type: "message", message: M.human("answer", { id: "h2" }) }),
      render({ type: "run_end", status: "success", stop_reason: "completed" })
    ].join("").trim().split("\n").map((line) => JSON.parse(line))
    assert.deepStrictEqual(lines.map((l) => l.type), ["run_start", "message", "state", "message", "run_end"])
    assert.deepStrictEqual(lines[1].message, stamped)
    assert.strictEqual(lines[3].message.id, "h2")
  })

  it("--json's run_end carries the run's total token usage: every token_usage delta of its state events", () => {
    const render = Render.json("t1", "r1")
    const delta = (purpose: string, input: number, output: number) => ({
      model: "m",
      purpose,
      input_tokens: input,
      output_tokens: output,
      total_tokens: input + output
    })
    const lines = [
      render(runStart),
      render({ type: "state", update: { token_usage: [delta("agent", 100, 20)] } }),
      render({ type: "state", update: { title: "hi", token_usage: [delta("title", 30, 5), delta("subagent", 7, 3)] } }),
      render({ type: "run_end", status: "success", stop_reason: "completed" })
    ].join("").trim().split("\n").map((line) => JSON.parse(line))
    assert.deepStrictEqual(lines.at(-1), {
      type: "run_end",
      status: "success",
      stop_reason: "completed",
      usage: { total_input_tokens: 137, total_output_tokens: 28, total_tokens: 165 },
      thread_id: "t1",
      run_id: "r1"
    })
    // a run stopped with Ctrl-C: the end the CLI writes carries what was used until then
    const stopped = Render.json("t2", "r2")
    stopped({ type: "state", update: { token_usage: [delta("agent", 4, 1)] } })
    assert.deepInclude(JSON.parse(stopped.end({ type: "run_end", status: "cancelled", stop_reason: "cancelled" })), {
      usage: { total_input_tokens: 4, total_output_tokens: 1, total_tokens: 5 }
    })
  })

  it("threads list: one line per thread with its status in words, newest first, and how to go on", () => {
    const thread = (id: string, updated: string, status?: ThreadStatus, stop_reason?: string) => ({
      thread_id: id,
      title: id === "t3" ? null : `About ${id}`,
      created_at: updated,
      updated_at: updated,
      checkpoints: 3,
      ...(status === undefined ? {} : { status, stop_reason: (stop_reason ?? null) as never })
    })
    const text = Render.threadList([
      thread("t1", "2026-01-01T10:00:00.000Z", "success", "completed"),
      thread("t2", "2026-01-03T10:00:00.000Z", "interrupted", "interrupted"),
      thread("t3", "2026-01-02T10:00:00.000Z", "error", "error"),
      thread("t4", "2026-01-04T10:00:00.000Z", "running")
    ], "/home/u/.antler", { color: false, invocation: "npx antler" })
    const rows = text.split("\n").map((line) => line.split(/ {2,}/))
    assert.deepStrictEqual(rows.slice(0, 4).map((r) => [r[0], r[2], r[4]]), [
      ["t4", "running", "About t4"],
      ["t2", "waiting for your answer", "About t2"],
      ["t3", "failed", "(untitled)"],
      ["t1", "completed", "About t1"]
    ])
    assert.include(text, "4 threads in /home/u/.antler · show one: npx antler threads show ID")
    assert.strictEqual(Render.statusWords("success", "loop_capped"), "completed (loop_capped)")
    assert.strictEqual(Render.statusWords("stopped"), "stopped (its process ended)")
    assert.include(Render.threadList([], "/h", { color: false, invocation: "antler" }), "Start one with: antler run")
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
