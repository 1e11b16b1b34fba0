/**
 * A cluster runner's run manager stopping (`Runs.Options.resumable`: SIGTERM, see `RunDrain`), without the engine:
 * the mechanism that decides what its runs become, on the real run manager over a real SQLite file and a loopback
 * model. A run still going when its drain is over is handed over (its record left `running`, its thread's lease free),
 * and the thread's next runner resumes it under its id to `success`; it is never ended `cancelled` with no client's
 * stop: before, a run
 * no durable message waited on in the runner's entity (stopped just after its `Start`, before its `Execute` arrived)
 * was cut so, and a scheduled task's tick read it `interrupted` (ClusterSchedules.test.ts, after the full restart). A
 * run that ends within the drain ends there, `success`, the model asked once.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as App from "../../../src/programs/App.js"
import * as Gateway from "../../../src/programs/gateway/Gateway.js"
import * as Runs from "../../../src/programs/gateway/Runs.js"
import type { RunRecord } from "../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import { until } from "../../support/poll.js"
import * as Support from "./support.js"

const requestOf = (threadId: string, text: string): Runs.RunRequest => ({
  threadId,
  userId: "alice",
  assistantId: "lead_agent",
  // (under an id of its own: resumed, it is not given again)
  messages: [M.human(text, { id: `${threadId}-input` })],
  settings: {},
  modes: ["values"],
  multitaskStrategy: "reject",
  metadata: {}
})

/** A resumable run manager (a runner's) with `drainSeconds`, over the SQLite store of `home`, and its model server. */
const manager = async (
  script: ScriptedChatServer.Script,
  drainSeconds: number,
  server?: ScriptedChatServer.Options,
  home = Support.tempDir("antler-run-drain-")
) => {
  const scope = Effect.runSync(Scope.make())
  const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(script, server), scope))
  const app = await Effect.runPromise(ConfigFile.fromObject(Support.baseConfig(scripted.url), { home }))
  const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
  const layer = Runs.layer({
    bufferSize: 1000,
    bufferBytes: 1 << 20,
    keepFinished: 10,
    heartbeatSeconds: 1,
    resumable: true,
    drainSeconds
  }).pipe(Layer.provideMerge(App.factoryLayer(app, choice)), Layer.provide(NodeFileSystem.layer))
  const runtime = ManagedRuntime.make(layer)
  const runs = await runtime.runPromise(Runs.Runs)
  const start = (threadId: string, text: string) =>
    runtime.runPromise(Effect.gen(function*() {
      yield* Effect.orDie((yield* ThreadStore).ensure(threadId))
      return yield* runs.start(requestOf(threadId, text))
    }))
  /** Resumes run `runId` here (as the thread's next runner does, its durable message found unanswered). */
  const resume = (threadId: string, text: string, runId: string) =>
    runtime.runPromise(Effect.flatMap(runs.resume(requestOf(threadId, text), runId), (run) => Deferred.await(run.done)))
  /** The thread's messages as stored. */
  const messages = (threadId: string) =>
    runtime.runPromise(Effect.map(Effect.flatMap(ThreadStore, (store) => Effect.orDie(store.load(threadId))),
      (loaded) => Option.match(loaded, { onNone: () => [], onSome: (thread) => thread.state.messages })))
  /** What the store keeps once the manager stopped: the run's record, and whether its thread's lease is free. */
  const kept = (threadId: string, runId: string) =>
    Effect.runPromise(Effect.gen(function*() {
      const store = yield* ThreadStore
      const record: RunRecord | undefined = (yield* store.runs({ runId }))[0]
      const holder = yield* store.acquireLease({ threadId, runId: "probe", ttlMs: 60_000, now: Date.now() })
      if (holder === undefined) yield* store.releaseLease(threadId, "probe")
      return { record, leaseFree: holder === undefined }
    }).pipe(Effect.provide(Gateway.storeLayer(app)), Effect.scoped))
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  return { home, scripted, runs, start, resume, messages, stop: () => runtime.dispose(), kept, close }
}

describe("a cluster runner's run manager stopping (RunDrain)", () => {
  it("a run still going past the drain is handed over: left running, its thread free, not cancelled", async () => {
    // (the model starts its answer and never ends it: the run is mid-answer when its runner stops)
    const m = await manager(() => ({ content: "working", stall: true }), 0)
    try {
      const run = await m.start("thread-handed", "Tick report")
      await until(() => m.scripted.requests.length === 1, "the model asked")
      await m.stop()
      const { record, leaseFree } = await m.kept("thread-handed", run.runId)
      assert.strictEqual(record?.status, "running", JSON.stringify(record))
      assert.isNull(record?.ended_at ?? null)
      assert.isTrue(leaseFree, "the thread's lease released for its next runner")
      // the thread's next runner resumes it under its id: it ends `success`, its question and answer once each
      const next = await manager(() => "The tick report, resumed.", 0, undefined, m.home)
      try {
        const ended = await next.resume("thread-handed", "Tick report", run.runId)
        assert.strictEqual(ended.status, "success", JSON.stringify(ended))
        const kinds = (await next.messages("thread-handed"))
          .filter((message) => message.type === "human" || message.type === "ai")
          .map((message) => [message.type, M.text(message)])
        assert.deepStrictEqual(kinds, [["human", "Tick report"], ["ai", "The tick report, resumed."]])
      } finally {
        await next.stop()
        await next.close()
      }
    } finally {
      await m.close()
    }
  }, 60_000)

  it("a run that ends within the drain ends there: success, the model asked once", async () => {
    // (its answer streams slowly: the stop begins while it comes, and the drain, far longer, lets it end)
    const m = await manager(() => "The tick report is ready for you now.", 120, { delayMs: 150, chunkSize: 4 })
    try {
      const run = await m.start("thread-drained", "Tick report")
      await until(() => m.scripted.requests.length === 1, "the model asked")
      await m.stop()
      const { record, leaseFree } = await m.kept("thread-drained", run.runId)
      assert.strictEqual(record?.status, "success", JSON.stringify(record))
      assert.strictEqual(m.scripted.requests.length, 1)
      assert.isTrue(leaseFree)
    } finally {
      await m.close()
    }
  }, 60_000)
})
