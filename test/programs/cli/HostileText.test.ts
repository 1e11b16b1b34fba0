/**
 * What the CLI prints of text a hostile model (or a hostile file) wrote: the configured secrets replaced and
 * no control character, escape sequence or bidirectional override reaching the terminal, on every path — not
 * only the run's messages and tool lines, which the hostile-model fuzzing covers.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FileMemory from "../../../src/layers/FileMemory.js"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as CliCommand from "../../../src/programs/cli/CliCommand.js"
import * as MemoryCommand from "../../../src/programs/cli/MemoryCommand.js"
import * as Render from "../../../src/programs/cli/Render.js"
import * as ToolsCommand from "../../../src/programs/cli/ToolsCommand.js"
import * as MemoryDoc from "../../../src/state/Memory.js"
import * as Redact from "../../../src/state/Redact.js"
import { childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"

const SECRET = "sk-hostile-text-0123456789"
const ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e"
/** What must never reach a terminal raw: C0 (but tab and newline), DEL, C1, bidirectional controls. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/
const SLOW = 180_000

/** Runs `antler ...` from sources with `home` as its data directory (memory off unless `config` says more). */
const antler = (home: string, args: ReadonlyArray<string>) =>
  Effect.promise(() => {
    const config = Path.join(home, "config.yaml")
    if (!Fs.existsSync(config)) Fs.writeFileSync(config, "memory:\n  enabled: false\n")
    return runAntler(args, { cwd: home, env: childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config }) })
  })

describe("a run's todo list (plan mode), as the model wrote it", () => {
  it("is printed without the configured secret and without control characters", () => {
    const render = Render.human({ color: false, redact: Redact.make([SECRET]) })
    const out = [
      render({ type: "run_start", thread_id: "t", run_id: "r" }),
      render({
        type: "state",
        update: {
          todos: [
            { content: `Log in with ${SECRET} ${ESCAPES}`, status: "in_progress" },
            { content: "Report back", status: "pending" }
          ]
        }
      })
    ].join("")
    assert.notInclude(out, SECRET)
    assert.notMatch(out, CONTROL)
    assert.include(
      out,
      "todos\n  [~] Log in with [redacted] ␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202e\n  [ ] Report back\n"
    )
  })
})

describe("antler memory show, of a memory the memory model wrote", () => {
  it.effect("prints its summaries without control characters, a line that ends with a colon included", () =>
    Effect.gen(function*() {
      // The memory model's summaries are free text: one may hold line breaks, and a line of it may end with `:`
      // as the section headings do.
      const file = Path.join(tempDir("antler-hostile-memory-show-"), "memory.json")
      const empty = MemoryDoc.empty()
      const hostile = `Builds data pipelines.\n${ESCAPES} Note:`
      yield* FileMemory.writeDocument(file, {
        ...empty,
        user: { ...empty.user, workContext: { summary: hostile, updatedAt: "2026-01-01T00:00:00Z" } }
      })
      const doc = yield* FileMemory.readDocument(file)
      const shown = MemoryCommand.render(doc, file, false)
      assert.include(shown, "Builds data pipelines.")
      assert.notMatch(shown, CONTROL)
      assert.include(shown, "␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202e Note:")
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

describe("--json listings of what a model wrote", () => {
  it.live("escape the control characters JSON leaves raw (C1, bidirectional overrides): the JSON means the same", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([`Here it is: ${ESCAPES} done.`])
      const home = tempDir("antler-hostile-json-")
      const ran = yield* antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--thread", "h1", "hi"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      // the memory model's facts and a custom agent's SOUL (which the model may rewrite) are model text too
      const memory = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(memory), { recursive: true })
      Fs.writeFileSync(memory, JSON.stringify({ facts: [{ id: "f1", content: `Likes ${ESCAPES}`, confidence: 0.9 }] }))
      const agent = Path.join(home, "users", "default", "agents", "ada")
      Fs.mkdirSync(agent, { recursive: true })
      Fs.writeFileSync(Path.join(agent, "config.yaml"), "name: ada\ndescription: A helper\n")
      Fs.writeFileSync(Path.join(agent, "SOUL.md"), `You are Ada. ${ESCAPES}`)
      const listings = [
        ["threads", "show", "h1", "--json"],
        ["threads", "list", "--json"],
        ["memory", "show", "--json"],
        ["agents", "show", "ada", "--json"],
        ["agents", "list", "--json"]
      ]
      for (const args of listings) {
        const shown = yield* antler(home, args)
        assert.strictEqual(shown.code, 0, `${args.join(" ")}: ${shown.stderr}`)
        assert.notMatch(shown.stdout, CONTROL, args.join(" "))
        JSON.parse(shown.stdout)
      }
      const thread = JSON.parse((yield* antler(home, ["threads", "show", "h1", "--json"])).stdout)
      assert.include(JSON.stringify(thread.state.messages), JSON.stringify(`Here it is: ${ESCAPES} done.`).slice(1, -1))
      const soul = JSON.parse((yield* antler(home, ["agents", "show", "ada", "--json"])).stdout).soul
      assert.strictEqual(soul.trim(), `You are Ada. ${ESCAPES}`)
    })), SLOW)
})

describe("an uploaded file with a hostile name", () => {
  it.live("is named on the terminal with its bidirectional override and C1 controls made visible", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["Got it."])
      const home = tempDir("antler-hostile-upload-")
      // `invoice‮fdp.exe`: shown raw, the override makes it read `invoiceexe.pdf`
      const name = `invoice\u202efdp.exe\x9b2J.txt`
      const file = Path.join(home, name)
      Fs.writeFileSync(file, "twelve bytes")
      const ran = yield* antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--file", file, "read it"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stdout, "invoice\\u202efdp.exe\\u009b2J.txt (12 bytes) -> /mnt/user-data/uploads/invoice")
      assert.notMatch(ran.stdout + ran.stderr, CONTROL)
      // refused (too large), it is named in the refusal
      Fs.writeFileSync(Path.join(home, "config.yaml"), "memory:\n  enabled: false\nuploads:\n  max_file_size: 4\n")
      const refused = yield* antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--file", file, "again"])
      assert.strictEqual(refused.code, 2, refused.stderr)
      assert.include(refused.stderr, "upload refused: invoice\\u202efdp.exe")
      assert.notMatch(refused.stdout + refused.stderr, CONTROL)
    })), SLOW)
})

describe("a command line or a config key with escape sequences, named back in a usage error or a warning", () => {
  it.live("is printed with its control characters made visible", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-hostile-argv-")
      const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
        [["threads", "show", `a${ESCAPES}`], "Invalid thread id \"a␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202e\""],
        [[`x${ESCAPES}`], "unknown command x␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202e"],
        [["threads", "list", `--x${ESCAPES}`], "unknown option --x␛]52"],
        [["serve", "--port", `1${ESCAPES}`], "'1␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202e' is not a"]
      ]
      for (const [args, shown] of cases) {
        const ran = yield* antler(home, args)
        assert.strictEqual(ran.code, 2, ran.stderr)
        assert.include(ran.stdout + ran.stderr, shown)
        assert.notMatch(ran.stdout + ran.stderr, CONTROL, args.join(" "))
      }
      const key = JSON.stringify(`k${ESCAPES}`)
      Fs.writeFileSync(Path.join(home, "config.yaml"), `memory:\n  enabled: false\n${key}: 1\n`)
      const warned = yield* antler(home, ["skills", "list"])
      assert.include(warned.stderr, "(ignored): k␛]52")
      assert.notMatch(warned.stdout + warned.stderr, CONTROL)
    }), SLOW)
})

describe("antler skills list and memory show, of files with hostile names and ids", () => {
  it.live("print a skill's folder name, its allowed-tools and a fact's id without control characters", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-hostile-skill-dir-")
      Fs.writeFileSync(Path.join(home, "config.yaml"), "memory:\n  enabled: true\n")
      const folder = Path.join(home, "skills", "public", `ev${ESCAPES}il`)
      Fs.mkdirSync(folder, { recursive: true })
      Fs.writeFileSync(
        Path.join(folder, "SKILL.md"),
        `---\nname: evil\ndescription: d\nallowed-tools: ${JSON.stringify(`bash${ESCAPES}`)}\n---\nbody\n`
      )
      const skills = yield* antler(home, ["skills", "list"])
      assert.strictEqual(skills.code, 0, skills.stderr)
      assert.include(skills.stdout, "/ev␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202eil/SKILL.md")
      assert.notMatch(skills.stdout + skills.stderr, CONTROL)
      const memory = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(memory), { recursive: true })
      const fact = { id: `f1${ESCAPES}`, content: "Likes tea", confidence: 0.9 }
      Fs.writeFileSync(memory, JSON.stringify({ facts: [fact] }))
      const shown = yield* antler(home, ["memory", "show"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      assert.include(shown.stdout, "Likes tea f1␛]52")
      assert.notMatch(shown.stdout + shown.stderr, CONTROL)
    }), SLOW)
})

describe("antler tools list, of an MCP server with a hostile name", () => {
  it("names the server of each of its tools without control characters", () => {
    const server = `ev${ESCAPES}il`
    const shown = ToolsCommand.render({
      model: "m",
      tools: [{ name: "ev_il_echo", source: "mcp", server, group: `g${ESCAPES}`, state: "available" }],
      missing: [],
      servers: [],
      warnings: []
    }, { color: false })
    assert.include(shown, "mcp:ev␛]52;c;ZXZpbA==␇␛[2J\\u009b31m\\u202eil")
    assert.notMatch(shown, CONTROL)
  })
})

describe("a log line with a cause (the gateway logs a failed request's cause as it is)", () => {
  it.effect("is printed without the configured secret and without control characters, the cause's text kept", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.make(({ cause, message }) => {
        lines.push(`${JSON.stringify(message)} ${Cause.isEmpty(cause) ? "" : Cause.pretty(cause)}`)
      })
      const failed = Cause.fail(new Error(`the provider said: bad key ${SECRET} ${ESCAPES}`))
      yield* Effect.logError("gateway request failed", failed).pipe(
        CliCommand.withCleanLogs(Redact.make([SECRET])),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture))
      )
      const out = lines.join("\n")
      assert.include(out, "gateway request failed")
      assert.include(out, "the provider said: bad key [redacted]")
      assert.notInclude(out, SECRET)
      assert.notMatch(out, CONTROL)
    }))
})

describe("the status line of a run calling a tool the model named with escape sequences", () => {
  it("names the running tool without control characters and without the configured secret", () => {
    const render = Render.human({ color: false, redact: Redact.make([SECRET]) })
    render({ type: "run_start", thread_id: "t", run_id: "r" })
    const name = `bash${ESCAPES}${SECRET}`
    render({
      type: "message",
      message: {
        type: "ai",
        id: "m1",
        content: "",
        tool_calls: [{ id: "c1", name, args: { command: "ls" }, type: "tool_call" }]
      }
    } as any)
    const label = render.activity() ?? ""
    assert.include(label, "running bash␛]52")
    assert.notInclude(label, SECRET)
    assert.notMatch(label, CONTROL)
  })
})
