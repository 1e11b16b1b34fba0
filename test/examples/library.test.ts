/**
 * "Use as a library", as a user has it: the example program of docs/library.md (examples/library.ts, importing
 * only from "antler") run as written in a child process against the scripted Chat Completions server; and the
 * packed package installed into a fresh folder, where a program that imports only from "antler" runs one turn.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { childEnv } from "../support/cli.js"
import { tempDirs } from "../support/fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const tempDir = tempDirs()

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, options: ChildProcess.SpawnOptions) =>
  Effect.async<Result>((resume) => {
    const child = ChildProcess.spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The scripted model of both programs: a multiply call, then the answer with the tool's result. */
const script: ScriptedChatServer.Script = [
  { content: "Let me compute that. ", toolCalls: [{ name: "multiply", arguments: { a: 6, b: 7 }, id: "call_mul" }] },
  "The answer is 42."
]

describe("Antler as a library", () => {
  it("docs/library.md shows examples/library.ts exactly", () => {
    const page = Fs.readFileSync(Path.join(ROOT, "docs/library.md"), "utf8")
    const example = Fs.readFileSync(Path.join(ROOT, "examples/library.ts"), "utf8").trim()
    assert.include(page, "```ts\n" + example + "\n```")
  })

  it.scopedLive("the documented example runs as written: a custom tool, an OpenAI-compatible model, events printed", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-example-")
      const result = yield* run(
        process.execPath,
        ["--conditions=antler-source", "--import", TSX, Path.join(ROOT, "examples/library.ts"), "What is 6 x 7?"],
        {
          cwd: home,
          env: childEnv({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-example", OPENAI_MODEL: "scripted" })
        }
      )
      assert.strictEqual(result.code, 0, result.stderr)
      assert.include(result.stdout, "Let me compute that.")
      assert.include(result.stdout, "→ multiply({\"a\":6,\"b\":7})")
      assert.include(result.stdout, "← 6 × 7 = 42")
      assert.include(result.stdout, "The answer is 42.")
      assert.include(result.stdout, "[run_end] success (completed)")
      // the model saw the app's tool, and then its result
      assert.strictEqual(server.requests.length, 2)
      assert.include(JSON.stringify(server.requests[0]!.tools), "\"multiply\"")
      assert.include(JSON.stringify(server.requests[1]!.messages.at(-1)), "6 × 7 = 42")
      // the thread was saved in SQLite under ANTLER_HOME (the child's default: ./.antler)
      assert.isTrue(Fs.existsSync(Path.join(home, ".antler", "antler.sqlite")))
    }), 120_000)

  it("the README's library example is examples/quickstart.ts exactly (typechecked with the examples)", () => {
    const readme = Fs.readFileSync(Path.join(ROOT, "README.md"), "utf8")
    const example = Fs.readFileSync(Path.join(ROOT, "examples/quickstart.ts"), "utf8").trim()
    assert.include(readme, "```ts\n" + example + "\n```")
  })

  it.scopedLive("the README's example runs as written: the app's tool is called, the run ends", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-quickstart-")
      const result = yield* run(
        process.execPath,
        ["--conditions=antler-source", "--import", TSX, Path.join(ROOT, "examples/quickstart.ts")],
        {
          cwd: home,
          env: childEnv({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-example", OPENAI_MODEL: "scripted" })
        }
      )
      assert.strictEqual(result.code, 0, result.stderr)
      const types = result.stdout.trim().split("\n")
      assert.strictEqual(types[0], "run_start")
      assert.strictEqual(types.at(-1), "run_end")
      assert.strictEqual(server.requests.length, 2)
      assert.include(JSON.stringify(server.requests[0]!.tools), "\"multiply\"")
      assert.include(JSON.stringify(server.requests[1]!.messages.at(-1)), "6 × 7 = 42")
      assert.isTrue(Fs.existsSync(Path.join(home, ".antler", "antler.sqlite")))
    }), 120_000)

  it.scopedLive("npm pack, install the tarball into a fresh app, import only from \"antler\": one turn ends with run_end", () =>
    Effect.gen(function*() {
      const packs = tempDir("antler-pack-")
      const packed = yield* run("npm", ["pack", "--pack-destination", packs, "--silent"], { cwd: ROOT, env: process.env })
      assert.strictEqual(packed.code, 0, packed.stderr)
      const tarball = Path.join(packs, packed.stdout.trim().split("\n").at(-1)!)
      assert.isTrue(Fs.existsSync(tarball), `no tarball: ${packed.stdout}`)

      const app = tempDir("antler-app-")
      Fs.writeFileSync(Path.join(app, "package.json"), JSON.stringify({ name: "an-app", type: "module", private: true }))
      // Install scripts are skipped: the program below keeps threads in memory, so better-sqlite3 need not be
      // compiled (about 2 minutes here); its native part loads only when a SQLite store is opened.
      const installed = yield* run(
        "npm",
        ["install", tarball, "effect@^3.22", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
        { cwd: app, env: process.env }
      )
      assert.strictEqual(installed.code, 0, installed.stderr)
      // one copy of Effect: the app's
      assert.isFalse(Fs.existsSync(Path.join(app, "node_modules/antler/node_modules/effect")))
      // a light install: the optional features' packages are not installed (optional peers)
      for (const name of ["mammoth", "exceljs", "unpdf", "jszip", "@modelcontextprotocol/sdk", "@opentelemetry/api"]) {
        assert.isFalse(Fs.existsSync(Path.join(app, "node_modules", name)), `${name} was installed`)
      }

      Fs.writeFileSync(Path.join(app, "main.mjs"), APP_PROGRAM)
      const result = yield* run(process.execPath, ["main.mjs"], { cwd: app, env: childEnv({}) })
      assert.strictEqual(result.code, 0, result.stderr)
      const events = result.stdout.trim().split("\n").map((line) => JSON.parse(line))
      assert.strictEqual(events[0].type, "run_start")
      assert.deepInclude(events.at(-1), { type: "run_end", status: "success", stop_reason: "completed" })
      assert.isTrue(events.some((e: any) => e.type === "message" && e.message.type === "tool" && e.message.content === "42"))
      // the command ships bundled, with its code cache (no source map), and runs from the install
      const cli = Path.join(app, "node_modules/antler/dist/cli")
      assert.includeMembers(Fs.readdirSync(cli), ["main.cjs", "main.cjs.cache"])
      assert.isFalse(Fs.readdirSync(cli).some((file) => file.endsWith(".map")))
      const bin = Path.join(app, "node_modules/antler/bin/antler.js")
      const help = yield* run(process.execPath, [bin, "--help"], { cwd: app, env: childEnv({ ANTLER_HOME: app }) })
      assert.strictEqual(help.code, 0, help.stderr)
      assert.include(help.stdout, "threads list")
      // and the exports map lets nothing else in
      const deep = yield* run(
        process.execPath,
        ["--input-type=module", "-e", "await import('antler/dist/programs/Run.js')"],
        { cwd: app, env: childEnv({}) }
      )
      assert.notStrictEqual(deep.code, 0)
      assert.include(deep.stderr, "ERR_PACKAGE_PATH_NOT_EXPORTED")
    }), 300_000)
})

/** A program an app writes against the installed package, imports from "antler" and "effect" only. */
const APP_PROGRAM = `
import { Effect, Layer, Schema, Stream } from "effect"
import { ConfigFile, LeadAgent, LocalSandbox, MemoryThreadStore, OpenAiModel, ScriptedChatServer, Tool } from "antler"

const multiply = Tool.make({
  name: "multiply",
  description: "Multiplies two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(String(a * b))
})

const program = Effect.gen(function*() {
  // SCRIPTED: a loopback Chat Completions server replaying two turns, not a model
  const server = yield* ScriptedChatServer.start([
    { toolCalls: [{ name: "multiply", arguments: { a: 6, b: 7 }, id: "c1" }] },
    "It is 42."
  ])
  const home = yield* Effect.sync(() => process.cwd() + "/data")
  const AppLive = LeadAgent.layer({ tools: [multiply], sandboxTools: false }).pipe(
    Layer.provide(OpenAiModel.layer({ baseURL: server.url, apiKey: "none", model: "scripted" })),
    Layer.provide(Layer.merge(MemoryThreadStore.layer(), LocalSandbox.layer())),
    Layer.provide(ConfigFile.layerFromObject({}, { home }))
  )
  yield* Effect.flatMap(LeadAgent.LeadAgent, (agent) =>
    agent.run({ prompt: "What is 6 x 7?" }).pipe(
      Stream.runForEach((event) => Effect.sync(() => console.log(JSON.stringify(event))))
    )).pipe(Effect.provide(AppLive))
})

Effect.runPromise(Effect.scoped(program)).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
`
