/**
 * `antler agents` and `antler run --agent / --subagents` as a user runs them: child processes with their own
 * data directory, against the SCRIPTED Chat Completions server. The bootstrap conversation reads its turns from
 * stdin.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as CliCommand from "../../../src/programs/cli/CliCommand.js"
import * as RunCommand from "../../../src/programs/cli/RunCommand.js"
import { childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"
import { messageText } from "../../support/modelRequests.js"

const SLOW = 180_000

const homeEnv = (home: string): NodeJS.ProcessEnv => {
  // memory off: its update would be one more (unscripted) model call per run
  const config = Path.join(home, "config.yaml")
  if (!Fs.existsSync(config)) Fs.writeFileSync(config, "memory:\n  enabled: false\n")
  return childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config })
}

/** Runs `antler ...` with `stdin` written to its standard input (then closed). */
const antler = (home: string, args: ReadonlyArray<string>, stdin = "") =>
  Effect.promise(() => runAntler(args, { cwd: home, env: homeEnv(home), stdin }))

const textOf = messageText
const lastUser = (body: ChatRequestBody) => textOf(body.messages.filter((m) => m.role === "user").at(-1)!)

const script = (body: ChatRequestBody): Turn => {
  const system = body.messages[0]?.role === "system" ? textOf(body.messages[0]) : ""
  const user = lastUser(body)
  const step = body.messages.filter((m) => m.role === "assistant").length
  // the general-purpose subagent (DeerFlow's prompt)
  if (system.startsWith("You are a general-purpose subagent working on a delegated task.")) {
    return step === 0
      ? {
        toolCalls: [{ id: "w1", name: "write_file", arguments: { description: "save", path: "notes.md", content: "n" } }]
      }
      : "Notes saved in notes.md."
  }
  if (user.includes("I want a partner")) return "Lovely. What should it be called?"
  if (user.includes("Call it Ada")) {
    return step === 1
      ? { toolCalls: [{ id: "setup", name: "setup_agent", arguments: { soul: "# Ada\nPrecise and kind.", description: "Ada, a research partner" } }] }
      : "Ada is ready."
  }
  if (user.includes("Take notes")) {
    return step === 0
      ? { toolCalls: [{ id: "t1", name: "task", arguments: { description: "Take notes", prompt: "Write notes.md", subagent_type: "general-purpose" } }] }
      : "The notes are in notes.md."
  }
  return "Hello."
}

describe("antler agents", () => {
  it.live("create (a bootstrap conversation on stdin), list, show, then run --agent with --subagents", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-agents-cli-")
      const model = ["--base-url", server.url, "--api-key", "sk-cli-agents"]
      try {
        const created = yield* antler(
          home,
          ["agents", "create", "ada", ...model, "Hi, I want a partner"],
          "Call it Ada\n"
        )
        assert.strictEqual(created.code, 0, created.stderr)
        assert.include(created.stdout, "Lovely. What should it be called?")
        assert.include(created.stdout, "→ Ada, a research partner · setup_agent")
        assert.include(created.stdout, "Agent ada created in")
        assert.match(created.stdout, /\nRun it with: .*run --agent ada "<your message>"\n/)
        assert.isTrue(Fs.existsSync(Path.join(home, "users/default/agents/ada/SOUL.md")))

        const again = yield* antler(home, ["agents", "create", "ada", ...model, "hello"])
        assert.strictEqual(again.code, 2)
        assert.include(again.stderr, `An agent named "ada" already exists`)

        const listed = yield* antler(home, ["agents", "list"])
        assert.strictEqual(listed.code, 0, listed.stderr)
        assert.match(listed.stdout, /^ada {2}Ada, a research partner\n/)
        const shown = yield* antler(home, ["agents", "show", "ada"])
        assert.include(shown.stdout, "SOUL.md\n  # Ada\n  Precise and kind.")
        const ghost = yield* antler(home, ["agents", "show", "ghost"])
        assert.strictEqual(ghost.code, 1)
        assert.include(ghost.stderr, `Create one with: ${CliCommand.invocation(process.env, home)} agents create ghost\n`)

        const ran = yield* antler(home, ["run", "--agent", "ada", "--subagents", ...model, "Take notes"])
        assert.strictEqual(ran.code, 0, ran.stderr)
        // the subagent's progress, nested and compact
        assert.match(ran.stdout, /\n {2}┌ Take notes \(general-purpose · gpt-4o-mini\)\n/)
        assert.match(ran.stdout, /\n {2}│ Take notes → write_file\(/)
        assert.match(ran.stdout, /\n {2}│ Take notes ← OK\n/)
        assert.match(ran.stdout, /\n {2}└ Take notes completed · \d+ tokens — Notes saved in notes\.md\.\n/)
        assert.include(ran.stdout, "The notes are in notes.md.")
        assert.strictEqual(ran.stdout.split("← Task Succeeded. Result: Notes saved in notes.md.").length, 2)
        assert.isTrue(Fs.existsSync(Path.join(home, "users/default/threads")))

        const unknown = yield* antler(home, ["run", "--agent", "nobody", ...model, "hi"])
        assert.strictEqual(unknown.code, 2)
        assert.include(unknown.stderr, `No agent named "nobody"`)
        // the command creating it, as typed where the user is (npx antler in a clone)
        assert.include(unknown.stderr, `Create one with: ${CliCommand.invocation(process.env, home)} agents create nobody`)
      } finally {
        Fs.rmSync(home, { recursive: true, force: true })
      }
    })), SLOW)

  it("run settings: a custom agent keeps its own model unless --model is given", () => {
    assert.deepStrictEqual(RunCommand.runSettings("main", {}), { model_name: "main" })
    assert.deepStrictEqual(RunCommand.runSettings("main", { agent: "ada" }), { agent_name: "ada" })
    assert.deepStrictEqual(
      RunCommand.runSettings("main", { agent: "ada", modelGiven: true, subagents: true, plan: true }),
      { model_name: "main", is_plan_mode: true, agent_name: "ada", subagent_enabled: true }
    )
  })
})
