/**
 * The light library (issue 29 item 3): `import "antler"` loads none of the packages of the optional features,
 * the gateway or the CLI (they are optional peers, or loaded on first use), and a feature whose optional package
 * is not installed says which package to install. Each runs in a child process: the main entry is imported by its
 * package name (the sources, through tsx), and an install without a package is made by hiding it
 * (test/fixtures/modules/hide.mjs: Node's own not-found errors, for `import` and `require`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Document, Packer, Paragraph } from "docx"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { antlerCommand } from "../support/cli.js"
import { tempDirs } from "../support/fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const FIXTURES = Path.join(ROOT, "test/fixtures/modules")
const INVENTORY = pathToFileURL(Path.join(FIXTURES, "inventory.mjs")).href
const HIDE = pathToFileURL(Path.join(FIXTURES, "hide.mjs")).href
const tempDir = tempDirs()

/** What an app embedding the agent must not load by importing "antler". */
const HEAVY = [
  "exceljs",
  "mammoth",
  "unpdf",
  "jszip",
  "turndown",
  "@joplin/turndown-plugin-gfm",
  "fast-xml-parser",
  "@modelcontextprotocol/sdk",
  "@agentclientprotocol/sdk",
  "@opentelemetry/api",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/exporter-trace-otlp-http",
  "@effect/opentelemetry",
  "@effect/cli",
  "@effect/platform-node",
  "undici",
  "openai",
  "better-sqlite3"
]

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env: Record<string, string> }) =>
  Effect.async<Result>((resume) => {
    const env: NodeJS.ProcessEnv = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_") && !key.startsWith("OTEL_")) env[key] = value
    }
    const child = ChildProcess.spawn(process.execPath, args, {
      cwd: options.cwd,
      env: { ...env, NO_COLOR: "1", ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The packages (`name` or `@scope/name`) a child process importing `specifier` loads. */
const packagesLoadedBy = (specifier: string) =>
  Effect.gen(function*() {
    const dir = tempDir("antler-modules-")
    const list = Path.join(dir, "modules.txt")
    const result = yield* run(
      ["--conditions=antler-source", "--import", TSX, "--import", INVENTORY, "--input-type=module", "-e",
        `await import(${JSON.stringify(specifier)})`],
      { cwd: ROOT, env: { ANTLER_TEST_MODULES: list } }
    )
    assert.strictEqual(result.code, 0, result.stderr)
    const packages = new Set<string>()
    for (const url of Fs.readFileSync(list, "utf8").split("\n")) {
      const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
      if (match !== null) packages.add(match[1]!)
    }
    return packages
  })

describe("optional packages", () => {
  it.scopedLive("import \"antler\" loads no package of the optional features, the gateway or the CLI", () =>
    Effect.gen(function*() {
      const loaded = yield* packagesLoadedBy("antler")
      // the inventory works: the agent's own packages are there
      assert.isTrue(loaded.has("effect"), [...loaded].join(", "))
      assert.deepStrictEqual(HEAVY.filter((name) => loaded.has(name)), [])
      // the gateway is a subpath of its own, and it does load its HTTP server
      const gateway = yield* packagesLoadedBy("antler/gateway")
      assert.isTrue(gateway.has("@effect/platform-node"))
    }), 120_000)

  it.scopedLive("a .docx upload without mammoth is kept, and says to install mammoth", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-optional-")
      const docx = Path.join(home, "notes.docx")
      const bytes = yield* Effect.promise(() =>
        Packer.toBuffer(new Document({ sections: [{ children: [new Paragraph("Quarterly notes")] }] }))
      )
      Fs.writeFileSync(docx, bytes)
      // the thread, made by a first turn (SCRIPTED model server)
      const server = yield* ScriptedChatServer.start(["Hello."])
      const started = yield* run(
        [...antlerCommand, "run", "--thread", "thread-1", "--base-url", server.url, "--api-key", "x", "Hi"],
        { cwd: home, env: { ANTLER_HOME: home } }
      )
      assert.strictEqual(started.code, 0, started.stderr)
      const upload = (hide: string) =>
        run(["--import", HIDE, ...antlerCommand, "upload", "thread-1", docx], {
          cwd: home,
          env: { ANTLER_HOME: home, ANTLER_TEST_HIDE: hide }
        })
      const without = yield* upload("mammoth")
      assert.strictEqual(without.code, 0, without.stderr)
      assert.include(without.stdout, "notes.docx")
      assert.include(without.stdout, "not converted")
      assert.include(without.stdout, "install mammoth to convert .docx files")
      // with mammoth there, the same upload is converted
      const withIt = yield* upload("")
      assert.strictEqual(withIt.code, 0, withIt.stderr)
      assert.include(withIt.stdout, "Markdown: ")
      assert.notInclude(withIt.stdout, "install mammoth")
    }), 120_000)

  it.scopedLive("an MCP server without the MCP SDK does not start, and says to install it", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-optional-mcp-")
      Fs.writeFileSync(
        Path.join(home, "extensions_config.json"),
        JSON.stringify({ mcpServers: { files: { enabled: true, type: "stdio", command: "node", args: ["-e", ""] } } })
      )
      const listed = yield* run(["--import", HIDE, ...antlerCommand, "tools", "list"], {
        cwd: home,
        env: { ANTLER_HOME: home, ANTLER_TEST_HIDE: "@modelcontextprotocol/sdk" }
      })
      assert.strictEqual(listed.code, 0, listed.stderr)
      assert.include(
        listed.stdout,
        "MCP server 'files' could not be started: install @modelcontextprotocol/sdk to connect to MCP servers"
      )
    }), 120_000)

  it.scopedLive("an ACP agent without the ACP SDK is a tool error saying to install it, and the run ends", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-optional-acp-")
      const agent = Path.join(ROOT, "test/fixtures/acp-agent.mjs")
      Fs.writeFileSync(
        Path.join(home, "config.yaml"),
        `acp_agents:\n  coder:\n    command: ${JSON.stringify(process.execPath)}\n    args: [${JSON.stringify(agent)}, write]\n` +
          "    description: The test agent\nmemory:\n  enabled: false\n"
      )
      const server = yield* ScriptedChatServer.start([
        { toolCalls: [{ id: "call_acp", name: "invoke_acp_agent", arguments: { agent: "coder", prompt: "go" } }] },
        "Done."
      ])
      // from the sources, as a library runs them (the CLI's bundle carries the ACP SDK inside it)
      const ran = yield* run(
        ["--import", HIDE, "--import", TSX, Path.join(ROOT, "src/programs/main.ts"), "run", "--base-url", server.url,
          "--api-key", "x", "Hi"],
        { cwd: home, env: { ANTLER_HOME: home, ANTLER_TEST_HIDE: "@agentclientprotocol/sdk" } }
      )
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.isAtLeast(server.requests.length, 2, ran.stderr)
      const result = server.requests[1]!.messages.find((message) => message.role === "tool")
      assert.include(String(result?.content), "install @agentclientprotocol/sdk to run ACP agents")
    }), 120_000)
})
