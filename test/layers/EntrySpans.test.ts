/**
 * Spans on the ports' entry points, as an app that traces sees them (an OpenTelemetry exporter): the thread stores'
 * `load`, `append`, `rollback` and `delete`; memory's `context`, `enqueue`, `load`, `clear` and `modify`; the skills
 * registry's `catalog` and `read`; the local sandbox's `exec`; an MCP server's `call`. Each names what it is about
 * (thread, user, skill, server and tool), never what a command or a file holds.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as McpClient from "../../src/layers/McpClient.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService } from "../../src/services/ModelService.js"
import { SandboxProvider } from "../../src/services/Sandbox.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import * as Bwrap from "../support/bwrap.js"
import { tempDirs } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"

const tempDir = tempDirs()
const bwrapInstalled = await Bwrap.installed()

/** Runs `effect` with an OpenTelemetry tracer, and gives the spans it made (name and attributes). */
const traced = <A, E>(effect: Effect.Effect<A, E>) => {
  const exporter = new InMemorySpanExporter()
  return effect.pipe(
    // read while the exporter is alive (it drops its spans at shutdown)
    Effect.map((value) => ({ value, spans: exporter.getFinishedSpans() })),
    Effect.provide(NodeSdk.layer(() => ({ spanProcessor: new SimpleSpanProcessor(exporter) })))
  )
}

const named = (spans: ReadonlyArray<ReadableSpan>, name: string) =>
  spans.filter((span) => span.name === name).map((span) => span.attributes)

describe("entry point spans", () => {
  for (const [name, store] of [
    ["MemoryThreadStore", MemoryThreadStore.layer()],
    ["SqliteThreadStore", SqliteThreadStore.layer({ filename: ":memory:" })]
  ] as const) {
    it.effect(`${name}: load, append, rollback and delete, each naming its thread (and run)`, () =>
      Effect.gen(function*() {
        const { spans } = yield* traced(Effect.gen(function*() {
          const threads = yield* ThreadStore
          yield* threads.ensure("t1")
          yield* threads.append("t1", "r1", [{ messages: [M.human("hi")] }])
          yield* threads.load("t1")
          yield* threads.rollback("t1", "r1")
          yield* threads.delete("t1")
        }).pipe(Effect.provide(store)))
        assert.deepStrictEqual(named(spans, `${name}.append`), [{ thread: "t1", run: "r1", updates: 1 }])
        assert.deepStrictEqual(named(spans, `${name}.load`), [{ thread: "t1" }])
        assert.deepStrictEqual(named(spans, `${name}.rollback`).map((a) => [a.thread, a.run]), [["t1", "r1"]])
        assert.deepStrictEqual(named(spans, `${name}.delete`).map((a) => a.thread), ["t1"])
      }))
  }

  it.scoped("FileMemory: context, enqueue, load, clear and modify, naming the user (and thread, agent)", () =>
    Effect.gen(function*() {
      const memory = Context.get(
        yield* Layer.build(FileMemory.layer().pipe(
          Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(["{}"]))),
          Layer.provide(MemoryThreadStore.layer()),
          Layer.provide(ConfigFile.layerFromObject({}, { home: tempDir("antler-spans-memory-") })),
          Layer.provide(NodeFileSystem.layer)
        )),
        Memory
      )
      const { spans } = yield* traced(Effect.gen(function*() {
        yield* memory.context({ userId: "ada" })
        yield* memory.enqueue({ threadId: "t1", userId: "ada", messages: [M.human("hi"), M.ai("hello")] })
        yield* memory.load({ userId: "ada" })
        yield* memory.clear({ userId: "ada" })
        yield* memory.modify({ userId: "ada", agentName: "writer" }, (doc) => [undefined, doc] as const)
      }))
      assert.deepStrictEqual(named(spans, "FileMemory.context"), [{ user: "ada" }])
      assert.deepStrictEqual(named(spans, "FileMemory.enqueue"), [{ thread: "t1" }])
      assert.lengthOf(named(spans, "FileMemory.load"), 1)
      assert.lengthOf(named(spans, "FileMemory.clear"), 1)
      assert.deepStrictEqual(named(spans, "FileMemory.modify"), [{ user: "ada", agent: "writer" }])
    }))

  it.effect("SkillsDirectory: the registry's catalog and read, naming the skill", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-spans-skills-")
      const file = Path.join(dir, "skills", "public", "notes", "SKILL.md")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, "---\nname: notes\ndescription: Takes notes.\n---\n\n# Notes\n")
      const app = AppConfigService.of({
        config: defaults(),
        source: Path.join(dir, "config.yaml"),
        home: dir,
        ignored: []
      })
      const registry = SkillsDirectory.make(app)
      const { spans, value } = yield* traced(Effect.gen(function*() {
        const catalog = yield* registry.catalog
        return yield* registry.read(catalog.skills[0]!)
      }))
      assert.include(value, "# Notes")
      assert.lengthOf(named(spans, "SkillsDirectory.catalog"), 1)
      assert.deepStrictEqual(named(spans, "SkillsDirectory.read"), [{ skill: "notes" }])
    }))

  it.effect.skipIf(!bwrapInstalled)("LocalSandbox: exec, naming the thread and user (not the command)", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-spans-")
      const app = AppConfigService.of({ config: defaults(), source: undefined, home, ignored: [] })
      const { spans, value } = yield* traced(Effect.gen(function*() {
        const sandbox = yield* Effect.flatMap(SandboxProvider, (provider) => provider.acquire("t1", "u1"))
        return yield* sandbox.exec("echo spanned")
      }).pipe(Effect.provide(LocalSandbox.layer()), Effect.provideService(AppConfigService, app)))
      assert.include(value.output, "spanned")
      assert.deepStrictEqual(named(spans, "LocalSandbox.exec"), [{ thread: "t1", user: "u1" }])
    }))

  it.scopedLive("McpClient: call, naming the server and the tool", () =>
    Effect.gen(function*() {
      const mcp = yield* McpClient.make({ servers: { everything: Servers.everything() } })
      const { spans } = yield* traced(mcp.call("everything", "echo", { message: "hi" }))
      assert.deepStrictEqual(named(spans, "McpClient.call"), [{ "mcp.server": "everything", "mcp.tool": "echo" }])
    }), 60_000)
})
