/**
 * One conformance suite for every ThreadStore: SQLite (a real file), PostgreSQL (a real server: a cluster this
 * file starts with Debian's binaries, or `ANTLER_TEST_DATABASE_URL`) and, for what needs no second process,
 * the in-memory store. Append and load, list, thread metadata and ownership, run records, leases, concurrent
 * appends to one thread (from one store and from two stores on the same database), rollback, and a process
 * killed with SIGKILL between and during writes.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as PgThreadStore from "../../src/layers/PgThreadStore.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import type { StoreError } from "../../src/services/RunContext.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { applyUpdates } from "../../src/state/Reducers.js"
import type { StateUpdate } from "../../src/state/ThreadState.js"
import * as TS from "../../src/state/ThreadState.js"
import * as Postgres from "../support/postgres.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const CHILD = Path.join(ROOT, "test/fixtures/store-crash-child.ts")

const pg = await Postgres.start()
afterAll(() => ("stop" in pg ? pg.stop() : undefined))
if ("skip" in pg) console.warn(`[StoreConformance] PostgreSQL suite skipped: ${pg.skip}`)

/** A backend under test: a way to open the same database again (another connection, or another process). */
interface Backend {
  readonly name: string
  /** A fresh database; `open()` opens a store on it (each call another store, same data). */
  readonly fresh: () => Promise<{ readonly open: () => Layer.Layer<ThreadStore, StoreError>; readonly target: string }>
  /** The child's backend kind, when the crash test applies. */
  readonly child?: "sqlite" | "postgres"
  /** Whether two `open()`s share data (not the in-memory store). */
  readonly shared: boolean
}

const sqlite: Backend = {
  name: "SQLite",
  fresh: async () => {
    const file = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-conf-")), "antler.sqlite")
    return { open: () => SqliteThreadStore.layer({ filename: file }), target: file }
  },
  child: "sqlite",
  shared: true
}

const postgres: Backend | undefined = "skip" in pg ? undefined : {
  name: "PostgreSQL",
  fresh: async () => {
    const url = await pg.createDatabase()
    return { open: () => PgThreadStore.layer({ url }), target: url }
  },
  child: "postgres",
  shared: true
}

const memory: Backend = {
  name: "memory",
  fresh: async () => {
    const store = MemoryThreadStore.make()
    return { open: () => Layer.succeed(ThreadStore, store), target: "" }
  },
  shared: false
}

const withStore = <A, E>(
  layer: Layer.Layer<ThreadStore, StoreError>,
  f: (store: ThreadStore["Type"]) => Effect.Effect<A, E>
) =>
  Effect.flatMap(ThreadStore, f).pipe(Effect.provide(layer))

const fold = (updates: ReadonlyArray<StateUpdate>) => Either.getOrThrow(applyUpdates(TS.empty, updates))

const steps: ReadonlyArray<ReadonlyArray<StateUpdate>> = [
  [
    { messages: [M.human("Hello", { id: "h1" })] },
    { messages: [M.ai("", { id: "a1", tool_calls: [{ id: "c1", name: "ls", args: {} }] })] }
  ],
  [{ messages: [M.tool("a.txt", "c1", { id: "t1", name: "ls" })] }, { artifacts: ["/mnt/user-data/outputs/a.md"] }],
  [{ messages: [M.ai("Done, with a NUL \u0000 and emoji 🦌", { id: "a2" })], title: "Greeting" }]
]

const loadState = (store: ThreadStore["Type"], threadId: string) =>
  Effect.map(store.load(threadId), (loaded) => Option.getOrThrow(loaded))

// a run's start time, fixed per run (upserts of one run keep it)
const startOf = (runId: string) => new Date(Date.UTC(2026, 0, 1, 0, 0, Number(runId.replace(/\D/g, "")))).toISOString()

const run = (runId: string, threadId: string, status: "pending" | "running" | "success" | "error" = "running") => ({
  run_id: runId,
  thread_id: threadId,
  status,
  stop_reason: status === "success" ? "completed" as const : status === "error" ? "error" as const : null,
  started_at: startOf(runId),
  ended_at: status === "success" || status === "error" ? new Date().toISOString() : null
})

const conformance = (backend: Backend) =>
  describe(`ThreadStore conformance: ${backend.name}`, () => {
    it.live("append then load folds the steps through the reducers; checkpoints come back in order", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            for (const [i, step] of steps.entries()) yield* store.append("t-append", `run-${i}`, step)
            const loaded = yield* loadState(store, "t-append")
            assert.deepStrictEqual(loaded.state, fold(steps.flat()))
            assert.strictEqual(loaded.checkpoints, steps.length)
            const records = yield* store.checkpoints("t-append")
            assert.deepStrictEqual(records.map((r) => r.run_id), ["run-0", "run-1", "run-2"])
            assert.deepStrictEqual(records.map((r) => r.updates), steps)
            assert.isTrue(records.every((r, i) => i === 0 || r.seq > records[i - 1]!.seq))
            assert.isTrue(Option.isNone(yield* store.load("t-missing")))
            assert.deepStrictEqual(yield* store.checkpoints("t-missing"), [])
          }))
        if (backend.shared) {
          // another store on the same database reads the same thread
          const again = yield* withStore(db.open(), (store) => loadState(store, "t-append"))
          assert.deepStrictEqual(again.state, fold(steps.flat()))
        }
      }))

    it.live("a run's events: kept per run (a save replaces them), read back, deleted with the thread", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        const events = (text: string) => [
          { seq: 1, event_type: "run.start", category: "trace", content: {}, metadata: {}, created_at: startOf("r1") },
          {
            seq: 2,
            event_type: "llm.ai.response",
            category: "message",
            content: { type: "ai", id: "a", content: text },
            metadata: { caller: "lead_agent" },
            created_at: startOf("r2")
          }
        ]
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.ensure("t-events", { owner: "alice" })
            yield* store.saveRun(run("run-1", "t-events", "success"))
            assert.deepStrictEqual(yield* store.runEvents("t-events", "run-1"), [])
            yield* store.saveRunEvents("t-events", "run-1", events("first"))
            yield* store.saveRunEvents("t-events", "run-1", events("Deer eat grass."))
            yield* store.saveRunEvents("t-events", "run-2", events("other run"))
            assert.deepStrictEqual(yield* store.runEvents("t-events", "run-1"), events("Deer eat grass."))
            // a run is read through its own thread only
            assert.deepStrictEqual(yield* store.runEvents("t-other", "run-1"), [])
            // deleted with their thread
            yield* store.ensure("t-gone")
            yield* store.saveRunEvents("t-gone", "run-9", events("gone"))
            assert.isTrue(yield* store.delete("t-gone"))
            assert.deepStrictEqual(yield* store.runEvents("t-gone", "run-9"), [])
          }))
        if (backend.shared) {
          const again = yield* withStore(db.open(), (store) => store.runEvents("t-events", "run-2"))
          assert.deepStrictEqual(again, events("other run"))
        }
      }))

    it.live("deleteRun: a run that ended goes, its events with it, its checkpoints stay; not a run going on", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        const event = [{ seq: 1, event_type: "run.start", category: "trace", content: {}, metadata: {}, created_at: "" }]
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.ensure("t-del", { owner: "alice" })
            yield* store.saveRun(run("run-1", "t-del", "success"))
            yield* store.append("t-del", "run-1", steps[0]!)
            yield* store.saveRunEvents("t-del", "run-1", event)
            yield* store.saveRun(run("run-2", "t-del", "running"))
            yield* store.saveRun(run("run-3", "t-del", "pending"))
            // not through another thread, nor a run that has not ended
            assert.isFalse(yield* store.deleteRun("t-other", "run-1"))
            assert.isFalse(yield* store.deleteRun("t-del", "run-2"))
            assert.isFalse(yield* store.deleteRun("t-del", "run-3"))
            assert.isFalse(yield* store.deleteRun("t-del", "run-missing"))
            assert.isTrue(yield* store.deleteRun("t-del", "run-1"))
            assert.isFalse(yield* store.deleteRun("t-del", "run-1"))
            assert.deepStrictEqual((yield* store.runs({ threadId: "t-del" })).map((r) => r.run_id), ["run-2", "run-3"])
            assert.deepStrictEqual(yield* store.runEvents("t-del", "run-1"), [])
            assert.deepStrictEqual((yield* store.checkpoints("t-del")).map((r) => r.run_id), ["run-1"])
            assert.deepStrictEqual((yield* loadState(store, "t-del")).state, fold(steps[0]!))
          }))
      }))

    it.live("list, info, owner and metadata: created with ensure, patched (null removes a key), deleted", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.ensure("t-alice", { owner: "alice", metadata: { topic: "deer", n: 1 } })
            yield* store.ensure("t-alice", { owner: "mallory", metadata: { topic: "stolen" } })
            yield* store.append("t-plain", "r", [{ messages: [M.human("hi", { id: "x" })], title: "Plain" }])
            const alice = Option.getOrThrow(yield* store.info("t-alice"))
            assert.strictEqual(alice.owner, "alice")
            assert.deepStrictEqual(alice.metadata, { topic: "deer", n: 1 })
            const plain = Option.getOrThrow(yield* store.info("t-plain"))
            assert.strictEqual(plain.owner ?? null, null)
            assert.strictEqual(plain.title, "Plain")
            assert.strictEqual(plain.checkpoints, 1)
            assert.isTrue(yield* store.patchMetadata("t-alice", { n: 2, topic: null, extra: [1, 2] }))
            assert.deepStrictEqual(Option.getOrThrow(yield* store.info("t-alice")).metadata, { n: 2, extra: [1, 2] })
            assert.isFalse(yield* store.patchMetadata("t-nobody", { a: 1 }))
            // a change that is no activity (DeerFlow's app pinning a chat) keeps the thread's updated_at
            const before = Option.getOrThrow(yield* store.info("t-alice")).updated_at
            yield* Effect.sleep("5 millis")
            assert.isTrue(yield* store.patchMetadata("t-alice", { deerflow_pinned: true }, { touch: false }))
            const pinned = Option.getOrThrow(yield* store.info("t-alice"))
            assert.strictEqual(pinned.updated_at, before)
            assert.strictEqual(pinned.metadata?.["deerflow_pinned"], true)
            assert.isTrue(yield* store.patchMetadata("t-alice", { deerflow_pinned: null }))
            assert.notStrictEqual(Option.getOrThrow(yield* store.info("t-alice")).updated_at, before)
            const listed = yield* store.list
            assert.deepStrictEqual(listed.map((t) => t.thread_id).sort(), ["t-alice", "t-plain"])
            assert.strictEqual(listed.find((t) => t.thread_id === "t-alice")!.owner, "alice")
            assert.isTrue(yield* store.delete("t-alice"))
            assert.isFalse(yield* store.delete("t-alice"))
            assert.isTrue(Option.isNone(yield* store.info("t-alice")))
            assert.isTrue(Option.isNone(yield* store.load("t-alice")))
            assert.deepStrictEqual((yield* store.list).map((t) => t.thread_id), ["t-plain"])
          }))
      }))

    it.live("countOwned: an owner's threads, and with unowned those made without one; deleted ones not", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.ensure("t-a1", { owner: "alice" })
            yield* store.ensure("t-a2", { owner: "alice" })
            yield* store.ensure("t-b1", { owner: "bob" })
            yield* store.ensure("t-none")
            yield* store.ensure("t-default", { owner: "default" })
            assert.strictEqual(yield* store.countOwned("alice", false), 2)
            assert.strictEqual(yield* store.countOwned("bob", false), 1)
            assert.strictEqual(yield* store.countOwned("carol", false), 0)
            assert.strictEqual(yield* store.countOwned("default", false), 1)
            assert.strictEqual(yield* store.countOwned("default", true), 2)
            assert.isTrue(yield* store.delete("t-a1"))
            assert.strictEqual(yield* store.countOwned("alice", true), 2)
            assert.strictEqual(yield* store.countOwned("alice", false), 1)
          }))
      }))

    it.live("listOwned: an owner's threads as list gives them, and with unowned those made without one", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.ensure("t-a1", { owner: "alice" })
            yield* store.ensure("t-b1", { owner: "bob" })
            yield* store.ensure("t-none")
            yield* store.ensure("t-a2", { owner: "alice" })
            yield* store.append("t-a1", "run-1", [{ messages: [M.human("touched", { id: "m1" })] }])
            const ids = (threads: ReadonlyArray<{ readonly thread_id: string }>) => threads.map((t) => t.thread_id)
            const all = yield* store.list
            const alices = yield* store.listOwned("alice", false)
            // the same summaries (a checkpoint's counted), in the same order, as the whole list's
            assert.deepStrictEqual(alices, all.filter((t) => t.owner === "alice"))
            assert.deepStrictEqual(ids(alices).sort(), ["t-a1", "t-a2"])
            assert.deepStrictEqual(ids(yield* store.listOwned("bob", true)).sort(), ["t-b1", "t-none"])
            assert.deepStrictEqual(ids(yield* store.listOwned("carol", false)), [])
          }))
      }))

    it.live("a thread's status comes from its last run and its lease; delete is refused while a run holds it", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            const statusOf = (threadId: string) =>
              Effect.map(store.info(threadId), (info) => {
                const { status, stop_reason } = Option.getOrThrow(info)
                return { status, stop_reason }
              })
            const listed = (threadId: string) =>
              Effect.map(store.list, (all) => {
                const { status, stop_reason } = all.find((t) => t.thread_id === threadId)!
                return { status, stop_reason }
              })
            yield* store.ensure("t-s")
            assert.isUndefined((yield* statusOf("t-s")).status)
            // accepted and running: the run holds the thread
            const now = Date.now()
            assert.isUndefined(yield* store.acquireLease({ threadId: "t-s", runId: "r1", ttlMs: 60_000, now }))
            yield* store.saveRun(run("r1", "t-s", "pending"))
            assert.strictEqual((yield* statusOf("t-s")).status, "running")
            yield* store.saveRun(run("r1", "t-s", "running"))
            assert.strictEqual((yield* statusOf("t-s")).status, "running")
            assert.strictEqual((yield* listed("t-s")).status, "running")
            const refused = yield* Effect.flip(store.delete("t-s"))
            assert.strictEqual(refused.operation, "delete")
            assert.include(refused.message, "run r1")
            assert.isTrue(Option.isSome(yield* store.info("t-s")))
            // it ends
            yield* store.saveRun(run("r1", "t-s", "success"))
            yield* store.releaseLease("t-s", "r1")
            assert.deepStrictEqual(yield* statusOf("t-s"), { status: "success", stop_reason: "completed" })
            assert.deepStrictEqual(yield* listed("t-s"), { status: "success", stop_reason: "completed" })
            // a later run whose lease expired without its end being saved (its process went away): stopped
            yield* store.saveRun(run("r2", "t-s", "running"))
            assert.isUndefined(yield* store.acquireLease({ threadId: "t-s", runId: "r2", ttlMs: 1, now: now - 60_000 }))
            assert.strictEqual((yield* statusOf("t-s")).status, "stopped")
            assert.strictEqual((yield* listed("t-s")).status, "stopped")
            assert.isTrue(yield* store.delete("t-s"))
            assert.isTrue(Option.isNone(yield* store.info("t-s")))
            assert.deepStrictEqual(yield* store.runs({ threadId: "t-s" }), [])
            // its lease went with it
            assert.isUndefined(yield* store.acquireLease({ threadId: "t-s", runId: "r3", ttlMs: 1_000, now }))
          }))
      }))

    it.live("run records: upserted by id, error and metadata kept unless given, found by thread, id and status", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.saveRun({ ...run("r1", "t-runs", "pending"), metadata: { assistant_id: "lead_agent" } })
            yield* store.saveRun(run("r1", "t-runs", "running"))
            yield* store.saveRun(run("r2", "t-runs", "running"))
            yield* store.saveRun(run("r3", "t-other", "running"))
            yield* store.saveRun({ ...run("r1", "t-runs", "error"), error: "server restarted" })
            yield* store.saveRun({ ...run("r1", "t-runs", "error") })
            const [r1] = yield* store.runs({ runId: "r1" })
            assert.strictEqual(r1!.status, "error")
            assert.strictEqual(r1!.error, "server restarted")
            assert.deepStrictEqual(r1!.metadata, { assistant_id: "lead_agent" })
            assert.deepStrictEqual((yield* store.runs({ threadId: "t-runs" })).map((r) => r.run_id), ["r1", "r2"])
            assert.deepStrictEqual((yield* store.runs({ status: "running" })).map((r) => r.run_id).sort(), ["r2", "r3"])
            assert.deepStrictEqual(
              (yield* store.runs({ threadId: "t-runs", status: "running" })).map((r) => r.run_id),
              ["r2"]
            )
            const loaded = yield* loadState(store, "t-runs")
            assert.deepStrictEqual(loaded.runs.map((r) => [r.run_id, r.status]), [["r1", "error"], ["r2", "running"]])
          }))
      }))

    it.live("a run's feedback, written by updateRun alone, is kept by a saveRun of metadata read before it", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.saveRun({ ...run("r1", "t-fb", "pending"), metadata: { assistant_id: "lead_agent" } })
            const [before] = yield* store.runs({ runId: "r1" })
            const rating = { feedback_id: "f1", rating: 1, comment: null }
            const rated = yield* store.updateRun("t-fb", "r1", (r) => ({ ...r.metadata, feedback: rating }))
            assert.deepStrictEqual(rated?.metadata, { assistant_id: "lead_agent", feedback: rating })
            // the run's start and end, written from what was read before the rating (or with a feedback of its own)
            yield* store.saveRun({ ...before!, status: "running", metadata: { ...before!.metadata, started: true } })
            yield* store.saveRun({ ...run("r1", "t-fb", "success"), metadata: { feedback: "stale" } })
            const [after] = yield* store.runs({ runId: "r1" })
            assert.strictEqual(after!.status, "success")
            assert.deepStrictEqual(after!.metadata, { feedback: rating })
            // updateRun removes it; answers none for another thread's run, no run, or no change (nothing written)
            yield* store.updateRun("t-fb", "r1", (r) => {
              const { feedback: _gone, ...rest } = r.metadata ?? {}
              return rest
            })
            assert.isUndefined(yield* store.updateRun("t-other", "r1", () => ({ x: 1 })))
            assert.isUndefined(yield* store.updateRun("t-fb", "r9", () => ({ x: 1 })))
            assert.isUndefined(yield* store.updateRun("t-fb", "r1", () => undefined))
            const [last] = yield* store.runs({ runId: "r1" })
            assert.deepStrictEqual(last!.metadata, {})
          }))
      }))

    it.live("leases: one run per thread; the holder renews; release frees it; an expired lease is taken", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        const now = Date.now()
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            assert.isUndefined(yield* store.acquireLease({ threadId: "t", runId: "a", ttlMs: 60_000, now }))
            const blocked = yield* store.acquireLease({ threadId: "t", runId: "b", ttlMs: 60_000, now })
            assert.strictEqual(blocked?.run_id, "a")
            assert.isUndefined(yield* store.acquireLease({ threadId: "t", runId: "a", ttlMs: 60_000, now: now + 1 }))
            assert.isUndefined(yield* store.acquireLease({ threadId: "other", runId: "b", ttlMs: 60_000, now }))
            yield* store.releaseLease("t", "b")
            assert.strictEqual((yield* store.acquireLease({ threadId: "t", runId: "b", ttlMs: 1, now }))?.run_id, "a")
            yield* store.releaseLease("t", "a")
            assert.isUndefined(yield* store.acquireLease({ threadId: "t", runId: "b", ttlMs: 1_000, now }))
            // b's lease expired: c takes it
            assert.isUndefined(yield* store.acquireLease({ threadId: "t", runId: "c", ttlMs: 1_000, now: now + 5_000 }))
          }))
        if (backend.shared) {
          // a second store (another connection, as another process has) sees the lease
          const seen = yield* withStore(db.open(), (store) =>
            store.acquireLease({ threadId: "t", runId: "d", ttlMs: 1_000, now: now + 5_500 }))
          assert.strictEqual(seen?.run_id, "c")
        }
      }))

    it.live("concurrent appends to one thread: every step saved once, in a consistent order", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        const N = 40
        const step = (n: number, who: string): ReadonlyArray<StateUpdate> => [
          { messages: [M.human(`${who} ${n}`, { id: `${who}-${n}` })] }
        ]
        const writers = backend.shared ? ["one", "two"] : ["one"]
        // each writer is its own store (its own connection); fibers of one writer append concurrently too
        yield* Effect.forEach(
          writers,
          (who) =>
            withStore(db.open(), (store) =>
              Effect.forEach(
                Array.from({ length: N }, (_, i) => i),
                (n) => store.append("t-busy", `run-${who}`, step(n, who)),
                { concurrency: 8, discard: true }
              )),
          { concurrency: "unbounded", discard: true }
        )
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            const records = yield* store.checkpoints("t-busy")
            assert.strictEqual(records.length, N * writers.length)
            const loaded = yield* loadState(store, "t-busy")
            const ids = loaded.state.messages.map((m) => m.id)
            assert.strictEqual(new Set(ids).size, N * writers.length)
            // the folded state is the fold of the checkpoints in their stored order
            assert.deepStrictEqual(loaded.state, fold(records.flatMap((r) => r.updates)))
            for (const who of writers) {
              const mine = ids.filter((id) => id.startsWith(`${who}-`))
              assert.strictEqual(mine.length, N)
            }
          }))
      }))

    it.live("rollback deletes the checkpoints of one run: the state and title are those before it", () =>
      Effect.gen(function*() {
        const db = yield* Effect.promise(backend.fresh)
        yield* withStore(db.open(), (store) =>
          Effect.gen(function*() {
            yield* store.append("t-rb", "keep", steps[0]!)
            yield* store.append("t-rb", "keep", [{ title: "Before" }])
            const before = (yield* loadState(store, "t-rb")).state
            yield* store.append("t-rb", "undo", steps[1]!)
            yield* store.append("t-rb", "undo", steps[2]!)
            assert.strictEqual(yield* store.rollback("t-rb", "undo"), 2)
            const after = yield* loadState(store, "t-rb")
            assert.deepStrictEqual(after.state, before)
            assert.strictEqual(Option.getOrThrow(yield* store.info("t-rb")).title, "Before")
            assert.strictEqual(yield* store.rollback("t-rb", "undo"), 0)
          }))
      }))

    if (backend.child !== undefined) {
      const kind = backend.child
      it.live("a process killed with SIGKILL between and during writes: committed steps load, none is torn", () =>
        Effect.gen(function*() {
          const db = yield* Effect.promise(backend.fresh)
          const committed = yield* Effect.promise(() => crashChild(kind, db.target, "t-crash", 12))
          yield* withStore(db.open(), (store) =>
            Effect.gen(function*() {
              const loaded = yield* loadState(store, "t-crash")
              const records = yield* store.checkpoints("t-crash")
              // every append that returned is there, and at most one more (killed after commit, before printing)
              assert.isAtLeast(records.length, committed)
              assert.isAtMost(records.length, committed + 1)
              // each checkpoint is whole: both writes of a step, in order, nothing from a torn step
              const ids = loaded.state.messages.map((m) => m.id)
              assert.deepStrictEqual(ids, records.flatMap((_, i) => [`m-${i + 1}`, `a-${i + 1}`]))
              assert.strictEqual(loaded.state.title, `Step ${records.length}`)
              // the run the dead process left is still marked running: the gateway or the next run settles it
              assert.deepStrictEqual(loaded.runs.map((r) => r.status), ["running"])
              // the dead process's lease blocks nobody
              const holder = yield* store.acquireLease({
                threadId: "t-crash",
                runId: "next",
                ttlMs: 1_000,
                now: Date.now()
              })
              assert.isUndefined(holder)
              // and the thread takes more steps
              yield* store.append("t-crash", "next", [{ messages: [M.human("again", { id: "again" })] }])
              assert.strictEqual((yield* loadState(store, "t-crash")).state.messages.at(-1)?.id, "again")
            }))
        }), 60_000)
    }
  })

/** Starts the child, waits until it has committed `atLeast` steps, SIGKILLs it; resolves the steps it reported. */
const crashChild = (kind: string, target: string, threadId: string, atLeast: number) =>
  new Promise<number>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", TSX, CHILD, kind, target, threadId], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let committed = 0
    let stderr = ""
    let buffer = ""
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      let newline: number
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        const match = /^appended (\d+)$/.exec(line)
        if (match !== null) committed = Number(match[1])
      }
      if (committed >= atLeast && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    })
    child.on("exit", (_code, signal) => {
      if (signal === "SIGKILL") resolve(committed)
      else reject(new Error(`the child exited on its own (${_code}): ${stderr}`))
    })
  })

conformance(sqlite)
conformance(memory)
if (postgres !== undefined) conformance(postgres)
else describe.skip(`ThreadStore conformance: PostgreSQL (${"skip" in pg ? pg.skip : ""})`, () => {})
