import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as SandboxMW from "../../src/middleware/Sandbox.js"
import * as Run from "../../src/programs/Run.js"
import type { Sandbox } from "../../src/services/Sandbox.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { ToolResult } from "../../src/services/ToolService.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

/** A provider that hands out one sandbox per thread and records what happens. */
const fakeProvider = () => {
  const live = new Map<string, Sandbox>()
  const log = { acquired: [] as Array<string>, released: [] as Array<string>, currentCalls: 0, acquireCalls: 0 }
  const make = (threadId: string, userId: string): Sandbox => {
    const unused = Effect.die("not used in this test")
    return {
      id: `fake:${userId}:${threadId}`,
      threadId,
      userId,
      paths: threadPaths("/data", userId, threadId),
      usesThreadDataMounts: true,
      resolve: () => unused,
      mask: (text) => text,
      exec: () => unused,
      readText: () => unused,
      writeText: () => unused,
      readBytes: () => unused,
      stat: () => unused,
      walk: () => unused,
      withFileLock: () => unused
    }
  }
  const service = SandboxProvider.of({
    acquire: (threadId, userId) =>
      Effect.sync(() => {
        log.acquireCalls++
        let sandbox = live.get(threadId)
        if (sandbox === undefined) {
          sandbox = make(threadId, userId)
          live.set(threadId, sandbox)
          log.acquired.push(sandbox.id)
        }
        return sandbox
      }),
    current: (threadId) =>
      Effect.sync(() => {
        log.currentCalls++
        return Option.fromNullable(live.get(threadId))
      }),
    get: (id) => Effect.sync(() => Option.fromNullable([...live.values()].find((s) => s.id === id))),
    release: (id) => Effect.sync(() => void log.released.push(id))
  })
  return { service, log, layer: Layer.succeed(SandboxProvider, service) }
}

/** A tool that uses the sandbox (acquiring it lazily, as the sandbox tools do). */
const usesSandbox = (provider: SandboxProvider["Type"], name = "touch") =>
  Tool.make({
    name,
    description: "Uses the sandbox",
    parameters: Schema.Struct({}),
    handler: (_, call) =>
      Effect.map(Effect.orDie(provider.acquire("test-thread", "default")), (): ToolResult => ({
        message: M.tool("OK", call.id, { name, status: "success" }),
        update: { artifacts: [`/mnt/user-data/outputs/${call.id}.txt`] }
      }))
  })

const plain = Tool.make({
  name: "plain",
  description: "No sandbox",
  parameters: Schema.Struct({}),
  handler: () => Effect.succeed("done")
})

describe("Sandbox helpers", () => {
  it("merges the binding into an existing update, and never overrides another binding", () => {
    const result = { message: M.tool("OK", "c1"), update: { artifacts: ["/a"] } }
    assert.deepStrictEqual(SandboxMW.withSandboxBinding(result, "s1").update, {
      artifacts: ["/a"],
      sandbox: { sandbox_id: "s1" }
    })
    const bound = { message: M.tool("OK", "c1"), update: { sandbox: { sandbox_id: "s0" } } }
    assert.strictEqual(SandboxMW.withSandboxBinding(bound, "s1"), bound)
  })
})

describe("Sandbox middleware", () => {
  it.effect("acquires nothing before the run, binds the sandbox a tool acquired, releases it after", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "touch", args: {} }, { name: "touch", args: {} }] }, "done"],
        tools: [usesSandbox(fake.service)],
        middlewares: () => [SandboxMW.layer()]
      }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(outcome.end.status, "success")
      assert.deepStrictEqual(outcome.state.sandbox, { sandbox_id: "fake:default:test-thread" })
      // The tools' own updates are kept alongside the binding.
      assert.strictEqual(outcome.state.artifacts.length, 2)
      assert.deepStrictEqual(fake.log.acquired, ["fake:default:test-thread"])
      assert.deepStrictEqual(fake.log.released, ["fake:default:test-thread"])
    }).pipe(H.withStore))

  it.effect("binds and releases nothing when no tool used a sandbox", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "plain", args: {} }] }, "done"],
        tools: [plain],
        middlewares: () => [SandboxMW.layer()]
      }).pipe(Effect.provide(fake.layer))
      assert.isNull(outcome.state.sandbox)
      assert.deepStrictEqual(fake.log.acquired, [])
      assert.deepStrictEqual(fake.log.released, [])
    }).pipe(H.withStore))

  it.effect("once bound, later runs release the state's sandbox without looking it up per tool call", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const script = [{ toolCalls: [{ name: "touch", args: {} }] }, "done"]
      const tools = [usesSandbox(fake.service)]
      yield* H.run({ script, tools, middlewares: () => [SandboxMW.layer()] }).pipe(Effect.provide(fake.layer))
      const lookups = fake.log.currentCalls
      const second = yield* H.run({ script, tools, middlewares: () => [SandboxMW.layer()] })
        .pipe(Effect.provide(fake.layer))
      assert.strictEqual(fake.log.currentCalls, lookups)
      assert.deepStrictEqual(second.state.sandbox, { sandbox_id: "fake:default:test-thread" })
      assert.deepStrictEqual(fake.log.released, ["fake:default:test-thread", "fake:default:test-thread"])
    }).pipe(H.withStore))

  it.effect("acquires and binds before the run when not lazy", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const outcome = yield* H.run({ script: ["hi"], middlewares: () => [SandboxMW.layer({ lazyInit: false })] })
        .pipe(Effect.provide(fake.layer))
      assert.deepStrictEqual(outcome.state.sandbox, { sandbox_id: "fake:default:test-thread" })
      assert.deepStrictEqual(fake.log.released, ["fake:default:test-thread"])
    }).pipe(H.withStore))

  // DeerFlow test_sandbox_middleware.py::test_abefore_agent_uses_async_provider_acquire (the run's thread and user)
  // and test_abefore_agent_delegates_to_super_when_not_acquiring (a bound thread acquires nothing more)
  it.effect("acquires before the run for the run's thread and user, unless the thread is already bound", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const eager = () => [SandboxMW.layer({ lazyInit: false })]
      const first = yield* H.run({ script: ["hi"], threadId: "thread-2", userId: "owner-2", middlewares: eager })
        .pipe(Effect.provide(fake.layer))
      assert.deepStrictEqual(first.state.sandbox, { sandbox_id: "fake:owner-2:thread-2" })
      yield* H.run({ script: ["hi"], threadId: "thread-2", userId: "owner-2", middlewares: eager })
        .pipe(Effect.provide(fake.layer))
      assert.strictEqual(fake.log.acquireCalls, 1)
      assert.deepStrictEqual(fake.log.released, ["fake:owner-2:thread-2", "fake:owner-2:thread-2"])
    }).pipe(H.withStore))

  it.effect("releases the sandbox when the run fails", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "touch", args: {} }] }],
        tools: [usesSandbox(fake.service)],
        middlewares: () => [SandboxMW.layer()]
      }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(outcome.end.status, "error")
      assert.deepStrictEqual(fake.log.released, ["fake:default:test-thread"])
    }).pipe(H.withStore))

  it.effect("releases the sandbox when the run is cancelled mid-tool", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const started = yield* Deferred.make<void>()
      const hangs = Tool.make({
        name: "hangs",
        description: "Acquires, then never returns",
        parameters: Schema.Struct({}),
        handler: () =>
          Effect.orDie(fake.service.acquire("t", "default")).pipe(
            Effect.zipRight(Deferred.succeed(started, undefined)),
            Effect.zipRight(Effect.never)
          )
      })
      const fiber = yield* Run.execute(
        { threadId: "t", input: [M.human("go")] },
        MW.stack(
            [SandboxMW.layer()],
            MW.base(ScriptedModel.make([{ toolCalls: [{ name: "hangs", args: {} }] }]), Toolkit.make([hangs]))
          )
      ).pipe(Effect.provide(fake.layer), Effect.fork)
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(fake.log.released, ["fake:default:t"])
      const saved = yield* Effect.flatMap(ThreadStore, (store) => store.load("t"))
      assert.isTrue(Option.isSome(saved))
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.effect("releases a sandbox a failing tool acquired", () =>
    Effect.gen(function*() {
      const fake = fakeProvider()
      const fails = Tool.make({
        name: "fails",
        description: "Acquires, then fails",
        parameters: Schema.Struct({}),
        handler: (_, call) =>
          Effect.zipRight(
            Effect.orDie(fake.service.acquire("test-thread", "default")),
            Effect.fail(Tool.failure(call, new Error("x")))
          )
      })
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "fails", args: {} }] }, "done"],
        tools: [fails],
        middlewares: () => [SandboxMW.layer()]
      }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(outcome.end.status, "success")
      assert.deepStrictEqual(fake.log.released, ["fake:default:test-thread"])
    }).pipe(H.withStore))
})
