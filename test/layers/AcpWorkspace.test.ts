/**
 * The parts of ACP agents below the tool: `acp_agents` decoded with readable issues (values of `env` never
 * echoed), the agents' `env` values counted as secrets, and the file requests of an agent confined to its
 * workspace under the rules of `/mnt/user-data` (no traversal, `/` or `\\`; no encoded separators; no symlink
 * out; no write through a symlink); an agent whose call is interrupted (the run cancelled) is stopped.
 */
import { assert, describe, it, vi } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { fileURLToPath } from "node:url"
import * as AcpTool from "../../src/layers/AcpTool.js"
import * as Workspace from "../../src/layers/acp/Workspace.js"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AcpAgentsConfig } from "../../src/services/AppConfig.js"
import { processAlive } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const decodeError = (text: string) =>
  Effect.map(Effect.flip(ConfigFile.decode(text, "/cfg/config.yaml")), (e) => e.message.split("\n").sort())

describe("acp_agents in config.yaml", () => {
  it.effect("decodes DeerFlow's keys with their defaults", () =>
    Effect.gen(function*() {
      const { config } = yield* ConfigFile.decode(
        "acp_agents:\n  codex:\n    command: codex-acp\n    description: Codes\n    env: {OPENAI_API_KEY: sk-abcdefgh1234}\n",
        "/cfg/config.yaml"
      )
      assert.deepStrictEqual(config.acp_agents.codex, {
        command: "codex-acp",
        args: [],
        env: { OPENAI_API_KEY: "sk-abcdefgh1234" },
        description: "Codes",
        auto_approve_permissions: false,
        timeout_seconds: 1800
      })
      assert.include(ToolAssembly.secrets(config), "sk-abcdefgh1234", "env values are redacted everywhere")
      const { config: none } = yield* ConfigFile.decode("models: []\n", "/cfg/config.yaml")
      assert.deepStrictEqual(none.acp_agents, {})
    }))

  it.effect("DeerFlow's example acp_agents block, uncommented, loads as it is", () =>
    Effect.gen(function*() {
      const example = Fs.readFileSync(new URL("../fixtures/deerflow/config.example.yaml", import.meta.url), "utf8")
      const lines = example.split("\n")
      const start = lines.indexOf("# acp_agents:")
      assert.isAbove(start, 0)
      const block = lines.slice(start).filter((_, i, all) => all.slice(0, i + 1).every((l) => l.startsWith("#")))
      const { config, ignored } = yield* ConfigFile.decode(
        block.map((line) => line.replace(/^# ?/, "")).join("\n"),
        "/cfg/config.yaml"
      )
      assert.deepStrictEqual(Object.keys(config.acp_agents), ["mcode", "claude_code", "codex"])
      assert.deepStrictEqual(config.acp_agents.mcode!.args, ["acp"])
      assert.deepStrictEqual(ignored, [])
    }))

  it.effect("bad entries are readable issues at their key paths; env values are never echoed", () =>
    Effect.gen(function*() {
      const lines = yield* decodeError([
        "acp_agents:",
        "  coder:",
        "    args: x",
        "    description: does things",
        "    timeout_seconds: 0",
        "    env:",
        "      SOME_VAR: 12345678901",
        ""
      ].join("\n"))
      assert.deepStrictEqual(lines, [
        "/cfg/config.yaml: acp_agents.coder.args: expected a list, got a string",
        "/cfg/config.yaml: acp_agents.coder.command: required key is missing",
        "/cfg/config.yaml: acp_agents.coder.env.SOME_VAR: expected a string, got a value of the wrong type",
        "/cfg/config.yaml: acp_agents.coder.timeout_seconds: expected a positive number, got 0"
      ])
      const names = yield* decodeError("acp_agents:\n  \"../x\":\n    command: a\n    description: b\n")
      assert.deepStrictEqual(names, [
        "/cfg/config.yaml: acp_agents.../x: \"../x\" cannot be an ACP agent's name: use 1-64 letters, digits, '_', " +
        "'.' or '-', starting with a letter or digit"
      ])
    }))
})

describe("an ACP agent's file requests", () => {
  const setup = () => {
    const dir = tempDir("antler-acp-ws-")
    const root = Path.join(dir, "acp-workspace")
    Fs.mkdirSync(Path.join(root, "sub"), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "secret.txt"), "outside")
    Fs.writeFileSync(Path.join(root, "sub", "notes.txt"), "one\ntwo\nthree\nfour\n")
    Fs.symlinkSync(Path.join(dir, "secret.txt"), Path.join(root, "link-out"))
    Fs.symlinkSync(dir, Path.join(root, "dir-out"))
    return { dir, root, workspace: Workspace.make(root) }
  }
  const refused = async (attempt: Promise<unknown>): Promise<string> => {
    try {
      await attempt
    } catch (error) {
      assert.instanceOf(error, Workspace.Refused)
      return (error as Error).message
    }
    assert.fail("the request was allowed")
  }

  it("reads and writes inside the workspace by host path, /mnt/acp-workspace path or relative path", async () => {
    const { root, workspace } = setup()
    assert.strictEqual(await Workspace.readText(workspace, Path.join(root, "sub/notes.txt")), "one\ntwo\nthree\nfour\n")
    assert.strictEqual(await Workspace.readText(workspace, "/mnt/acp-workspace/sub/notes.txt", 2, 2), "two\nthree")
    await Workspace.writeText(workspace, "new/deep/file.txt", "made")
    await Workspace.writeText(workspace, `${root}/top.txt`, "top")
    assert.strictEqual(Fs.readFileSync(Path.join(root, "new/deep/file.txt"), "utf8"), "made")
    assert.strictEqual(Fs.readFileSync(Path.join(root, "top.txt"), "utf8"), "top")
  })

  it("refuses traversal, encoded separators, paths outside and symlinks leading out", async () => {
    const { dir, root, workspace } = setup()
    assert.match(await refused(Workspace.readText(workspace, `${root}/../secret.txt`)), /'\.\.' segments/)
    assert.match(await refused(Workspace.writeText(workspace, "sub\\..\\..\\secret.txt", "x")), /'\.\.' segments/)
    assert.match(await refused(Workspace.readText(workspace, `${root}/%2e%2e/secret.txt`)), /percent-encoded/)
    assert.match(await refused(Workspace.readText(workspace, "/etc/passwd")), /outside the ACP workspace/)
    assert.match(await refused(Workspace.readText(workspace, `${dir}/secret.txt`)), /outside the ACP workspace/)
    assert.match(await refused(Workspace.readText(workspace, "link-out")), /leads outside the ACP workspace/)
    assert.match(await refused(Workspace.writeText(workspace, "dir-out/planted.txt", "x")), /leads outside/)
    assert.match(await refused(Workspace.writeText(workspace, "link-out", "x")), /leads outside|symbolic link/)
    assert.match(await refused(Workspace.readText(workspace, "missing.txt")), /File not found/)
    assert.match(await refused(Workspace.writeText(workspace, "/mnt/acp-workspace", "x")), /workspace itself/)
    assert.strictEqual(Fs.readFileSync(Path.join(dir, "secret.txt"), "utf8"), "outside")
    assert.isFalse(Fs.existsSync(Path.join(dir, "planted.txt")))
  })
})

describe("an ACP agent's lifetime", () => {
  it.live("an agent whose call is interrupted (the run was cancelled) is stopped", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-acp-home-")
      const agents = Schema.decodeUnknownSync(AcpAgentsConfig)({
        hanger: {
          command: process.execPath,
          args: [fileURLToPath(new URL("../fixtures/acp-agent.mjs", import.meta.url)), "hang"],
          description: "hangs"
        }
      })
      const tool = yield* AcpTool.make({ agents, home })
      const call = { id: "c1", name: AcpTool.NAME, args: { agent: "hanger", prompt: "go" } }
      const fiber = yield* Effect.fork(provideRun(Tool.invoke(tool, call)))
      const pidFile = Path.join(home, "users", "u1", "threads", "t1", "acp-workspace", "pid")
      const pid = yield* Effect.promise(async () => {
        while (!Fs.existsSync(pidFile) || Fs.readFileSync(pidFile, "utf8") === "") {
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        return Number(Fs.readFileSync(pidFile, "utf8"))
      })
      assert.isTrue(processAlive(pid))
      yield* Fiber.interrupt(fiber)
      assert.isFalse(processAlive(pid), "the agent is gone once the interrupted call has ended")
    }), 60_000)

  it.live("nothing an agent sends reaches the terminal raw (an escape sequence as a response id)", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-acp-home-")
      const agents = Schema.decodeUnknownSync(AcpAgentsConfig)({
        rogue: {
          command: process.execPath,
          args: [fileURLToPath(new URL("../fixtures/acp-agent.mjs", import.meta.url)), "rogue"],
          description: "rogue"
        }
      })
      const tool = yield* AcpTool.make({ agents, home })
      const printed: Array<string> = []
      const spy = vi.spyOn(console, "error").mockImplementation((...args: Array<unknown>) => {
        printed.push(args.map(String).join(" "))
      })
      const result = yield* provideRun(Tool.invoke(tool, { id: "c1", name: AcpTool.NAME, args: { agent: "rogue", prompt: "go" } }))
        .pipe(Effect.ensuring(Effect.sync(() => spy.mockRestore())))
      assert.strictEqual(M.contentText(result.message.content), "ok")
      assert.isFalse(printed.some((line) => line.includes("\u001b")), printed.join("\n"))
    }), 60_000)
})
