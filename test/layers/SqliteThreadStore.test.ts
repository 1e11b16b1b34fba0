import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FC from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as ChildProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import type { StoreError } from "../../src/services/RunContext.js"
import type { StopReason } from "../../src/services/RunEvents.js"
import type { RunRecord, ThreadSummary } from "../../src/services/ThreadStore.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as Json from "../../src/state/Json.js"
import type { Message, MessageWrite } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { applyUpdate, applyUpdates } from "../../src/state/Reducers.js"
import type { StateUpdate } from "../../src/state/ThreadState.js"
import * as TS from "../../src/state/ThreadState.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "antler-sqlite-test-"))
const tempFile = () => path.join(tempDir(), "antler.sqlite")

/** Runs `f` with a store opened on `filename` (closed afterwards). */
const withStore = <A, E, R>(
  filename: string,
  f: (store: ThreadStore["Type"]) => Effect.Effect<A, E, R>,
  options: Omit<SqliteThreadStore.Options, "filename"> = {}
) => Effect.flatMap(ThreadStore, f).pipe(Effect.provide(SqliteThreadStore.layer({ ...options, filename })))

/** Runs raw SQL on the file, as another program editing the database would. */
const withSql = <A, E>(filename: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.provide(SqliteClient.layer({ filename })))

const fold = (updates: ReadonlyArray<StateUpdate>) => Either.getOrThrow(applyUpdates(TS.empty, updates))

const loadState = (store: ThreadStore["Type"], threadId: string) =>
  Effect.map(store.load(threadId), (loaded) => Option.getOrThrow(loaded))

const expectStoreError = <A>(effect: Effect.Effect<A, StoreError>) =>
  Effect.flip(effect).pipe(Effect.tap((error) => assert.strictEqual(error._tag, "StoreError")))

// A thread exercising every kind of write: add, replace by id, remove, remove-all, and the other fields.
const human1 = M.human("List the files", { id: "h1" })
const ai1 = M.ai("", { id: "a1", tool_calls: [{ id: "c1", name: "ls", args: { path: "/mnt" }, type: "tool_call" }] })
const tool1 = M.tool("a.txt\nb.txt", "c1", { id: "t1", name: "ls", status: "success" })
const ai2 = M.ai("There are two files.", {
  id: "a2",
  usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 }
})
const checkpointsOfThread: ReadonlyArray<ReadonlyArray<StateUpdate>> = [
  [{ messages: [human1], sandbox: { sandbox_id: "local" }, thread_data: { workspace_path: "/w" } }, {
    messages: [ai1]
  }],
  [{ messages: [tool1] }, { artifacts: ["/mnt/user-data/outputs/a.md"] }],
  [{ messages: [ai2], title: "Listing files", sandbox: { sandbox_id: "local" } }],
  // replace the human message in place, remove the tool round trip, add an artifact twice (deduplicated)
  [{ messages: [M.human("List the files, please", { id: "h1" }), M.remove("a1"), M.remove("t1")] }, {
    artifacts: ["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"],
    todos: [{ content: "answer", status: "completed" }]
  }],
  // a summarization: everything goes, a summary and the last answer stay
  [{ messages: [M.remove(M.REMOVE_ALL_MESSAGES), M.system("Summary: the user asked for files.", { id: "s1" }), ai2] }],
  [{ messages: [M.human("Thanks", { id: "h2" })], title: null }, { title: "Files, thanked" }]
]

describe("SqliteThreadStore", () => {
  it.effect("load equals the fold of the appended updates (add, replace, remove, remove-all, other fields)", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      const loaded = yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          for (const checkpoint of checkpointsOfThread) yield* store.append("thread-a", "run-1", checkpoint)
          return yield* loadState(store, "thread-a")
        }))
      assert.deepStrictEqual(loaded.state, fold(checkpointsOfThread.flat()))
      assert.strictEqual(loaded.checkpoints, checkpointsOfThread.length)
      // What a user sees: the summary, the kept answer, the new message; the latest title; both artifacts once.
      assert.deepStrictEqual(loaded.state.messages.map((m) => m.id), ["s1", "a2", "h2"])
      assert.strictEqual(loaded.state.title, "Files, thanked")
      assert.deepStrictEqual(loaded.state.artifacts, ["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"])
      assert.deepStrictEqual(loaded.state.sandbox, { sandbox_id: "local" })
      assert.deepStrictEqual(loaded.state.todos, [{ content: "answer", status: "completed" }])
      // The same file, reopened, gives the same thread.
      const reopened = yield* withStore(filename, (store) => loadState(store, "thread-a"))
      assert.deepStrictEqual(reopened.state, loaded.state)
    }))

  it.effect("steps fold exactly as applied one by one: a removed id written again later comes back at the end", () =>
    withStore(tempFile(), (store) =>
      Effect.gen(function*() {
        const steps: ReadonlyArray<ReadonlyArray<StateUpdate>> = [
          [{ messages: [M.human("one", { id: "x" }), M.human("two", { id: "y" })] }],
          [{ messages: [M.remove("x")] }, { messages: [M.human("three", { id: "z" })] }],
          [{ messages: [M.human("one again", { id: "x" })] }, { messages: [M.human("two, edited", { id: "y" })] }]
        ]
        for (const step of steps) yield* store.append("t", "r", step)
        const loaded = yield* loadState(store, "t")
        assert.deepStrictEqual(loaded.state.messages.map((m) => [m.id, M.text(m)]), [
          ["y", "two, edited"],
          ["z", "three"],
          ["x", "one again"]
        ])
        assert.deepStrictEqual(loaded.state, fold(steps.flat()))
      })))

  it.effect("an unknown thread loads as none; ensure creates it empty", () =>
    withStore(tempFile(), (store) =>
      Effect.gen(function*() {
        assert.isTrue(Option.isNone(yield* store.load("nobody")))
        yield* store.ensure("new")
        yield* store.ensure("new")
        const loaded = yield* loadState(store, "new")
        assert.deepStrictEqual(loaded.state, TS.empty)
        assert.strictEqual(loaded.checkpoints, 0)
        const listed = yield* store.list
        assert.deepStrictEqual(listed.map((t) => [t.thread_id, t.checkpoints]), [["new", 0]])
      })))

  it.effect("two stores open on the same file see each other's writes", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = tempFile()
      const open = Effect.map(
        Layer.build(SqliteThreadStore.layer({ filename })),
        (context) => Context.get(context, ThreadStore)
      )
      const a = yield* open
      const b = yield* open
      yield* a.append("shared", "run-a", checkpointsOfThread[0]!)
      assert.deepStrictEqual((yield* loadState(b, "shared")).state, fold(checkpointsOfThread[0]!))
      yield* b.append("shared", "run-b", checkpointsOfThread[1]!)
      const seenByA = yield* loadState(a, "shared")
      assert.deepStrictEqual(seenByA.state, fold([...checkpointsOfThread[0]!, ...checkpointsOfThread[1]!]))
      assert.strictEqual(seenByA.checkpoints, 2)
      // Both wrote concurrently: every step is kept, each with its own increasing number.
      yield* Effect.all([
        Effect.forEach([1, 2, 3], (i) => a.append("race", "run-a", [{ artifacts: [`/a/${i}`] }])),
        Effect.forEach([1, 2, 3], (i) => b.append("race", "run-b", [{ artifacts: [`/b/${i}`] }]))
      ], { concurrency: "unbounded" })
      const race = yield* loadState(a, "race")
      assert.strictEqual(race.checkpoints, 6)
      assert.sameMembers([...race.state.artifacts], ["/a/1", "/a/2", "/a/3", "/b/1", "/b/2", "/b/3"])
      const rows = yield* withSql(filename, (sql) =>
        sql<{ seq: number }>`SELECT seq FROM checkpoints WHERE thread_id = 'race' ORDER BY seq`)
      const seqs = rows.map((r) => r.seq)
      assert.lengthOf(seqs, 6)
      assert.deepStrictEqual(seqs, [...new Set(seqs)].sort((x, y) => x - y))
    })))

  it.effect("two stores of one process on one file never block each other inside a transaction", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = tempFile()
      // A short busy timeout: a store waiting for a lock that its own process holds would fail fast here.
      const open = Effect.map(
        Layer.build(SqliteThreadStore.layer({ filename, busyTimeout: 100 })),
        (context) => Context.get(context, ThreadStore)
      )
      const stores = [yield* open, yield* open]
      // Steps that set a title take the multi-statement path (a transaction).
      // Fibers yield after a few dozen operations, so a transaction is often left half-done while others run.
      yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => i),
        (i) => stores[i % 2]!.append(`t${i % 7}`, "r", [{ title: `title ${i}`, artifacts: [`/a/${i}`] }]),
        { concurrency: "unbounded", discard: true }
      ).pipe(Effect.withMaxOpsBeforeYield(32))
      const listed = yield* stores[0]!.list
      assert.strictEqual(listed.reduce((n, t) => n + t.checkpoints, 0), 100)
    })))

  it.live("a run alone on the store has each step on disk when append returns, also while another process holds the write lock", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = tempFile()
      const store = Context.get(yield* Layer.build(SqliteThreadStore.layer({ filename })), ThreadStore)
      const lease = { threadId: "alone", runId: "r1", ttlMs: 30_000, now: Date.now() }
      assert.isUndefined(yield* store.acquireLease(lease))
      yield* store.ensure("alone")
      // what another program sees, on its own connection, right after each append returned
      const Sqlite = createRequire(import.meta.url)("better-sqlite3")
      const other = new Sqlite(filename)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      const count = () => Number(other.prepare("SELECT COUNT(*) AS n FROM checkpoints WHERE thread_id = 'alone'").get().n)
      for (let i = 0; i < 5; i++) {
        yield* store.append("alone", "r1", [{ artifacts: [`/a/${i}`] }])
        assert.strictEqual(count(), i + 1)
      }
      // another process holds the file's write lock: the step waits for it (it is not lost, nor failed)
      other.exec("BEGIN IMMEDIATE")
      const waiting = yield* Effect.fork(store.append("alone", "r1", [{ artifacts: ["/a/while-locked"] }]))
      yield* Effect.sleep("40 millis")
      assert.isNull(waiting.unsafePoll())
      other.exec("COMMIT")
      yield* waiting.await
      assert.strictEqual(count(), 6)
      // a step of a thread whose row is gone still lands (the general path creates the row first)
      other.exec("DELETE FROM threads WHERE thread_id = 'alone'")
      yield* store.append("alone", "r1", [{ artifacts: ["/a/after-delete"] }])
      assert.strictEqual(count(), 7)
      const state = yield* loadState(store, "alone")
      assert.deepStrictEqual([...state.state.artifacts], [0, 1, 2, 3, 4].map((i) => `/a/${i}`).concat("/a/while-locked", "/a/after-delete"))
      yield* store.releaseLease("alone", "r1")
    })), { timeout: 20_000 })

  it.live("steps queued behind a busy file: one interrupted while it waits stops waiting, every step still lands", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = tempFile()
      const store = Context.get(yield* Layer.build(SqliteThreadStore.layer({ filename })), ThreadStore)
      const threads = ["q0", "q1", "q2", "q3"]
      for (const threadId of threads) {
        assert.isUndefined(yield* store.acquireLease({ threadId, runId: "r", ttlMs: 30_000, now: Date.now() }))
        yield* store.ensure(threadId)
      }
      const Sqlite = createRequire(import.meta.url)("better-sqlite3")
      const other = new Sqlite(filename)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      // another process holds the write lock: the first step leads a commit that waits, the others queue behind it
      other.exec("BEGIN IMMEDIATE")
      const fibers = yield* Effect.forEach(threads, (threadId) =>
        Effect.fork(store.append(threadId, "r", [{ artifacts: [`/${threadId}`] }])))
      yield* Effect.sleep("40 millis")
      for (const fiber of fibers) assert.isNull(fiber.unsafePoll())
      const interrupted = yield* Fiber.interrupt(fibers[2]!)
      assert.isTrue(Exit.isInterrupted(interrupted))
      other.exec("COMMIT")
      for (const [i, fiber] of fibers.entries()) if (i !== 2) assert.isTrue(Exit.isSuccess(yield* fiber.await))
      // the interrupted caller's step was queued before it stopped waiting: it is written with the others
      for (const threadId of threads) {
        assert.deepStrictEqual([...(yield* loadState(store, threadId)).state.artifacts], [`/${threadId}`])
      }
    })), { timeout: 20_000 })

  it.live("concurrent runs holding leases: every step of every run lands, in each run's order", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = tempFile()
      const store = Context.get(yield* Layer.build(SqliteThreadStore.layer({ filename })), ThreadStore)
      const runs = Array.from({ length: 12 }, (_, i) => i)
      yield* Effect.forEach(runs, (i) =>
        Effect.gen(function*() {
          assert.isUndefined(yield* store.acquireLease({ threadId: `t${i}`, runId: `r${i}`, ttlMs: 30_000, now: Date.now() }))
          yield* store.ensure(`t${i}`)
          for (let k = 0; k < 10; k++) yield* store.append(`t${i}`, `r${i}`, [{ artifacts: [`/t${i}/${k}`] }])
          yield* store.releaseLease(`t${i}`, `r${i}`)
        }), { concurrency: "unbounded", discard: true })
      for (const i of runs) {
        const loaded = yield* loadState(store, `t${i}`)
        assert.strictEqual(loaded.checkpoints, 10)
        assert.deepStrictEqual([...loaded.state.artifacts], Array.from({ length: 10 }, (_, k) => `/t${i}/${k}`))
      }
    })))

  it.live("a lease whose holder is a zombie (dead, not yet reaped by its parent) blocks nobody; a live holder does", () =>
    Effect.scoped(Effect.gen(function*() {
      // the background `sleep 0.3` is still running when sh becomes `sleep 600` (so sh cannot have reaped it),
      // and `sleep 600` never reaps it: a real zombie once it exits, as under an init that does not reap (a
      // container's), right after a crash.
      const parent = yield* Effect.acquireRelease(
        Effect.sync(() => ChildProcess.spawn("sh", ["-c", "sleep 0.3 & echo $!; exec sleep 600"], { stdio: ["ignore", "pipe", "ignore"] })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      const zombie = yield* Effect.promise(() =>
        new Promise<number>((resolve) => parent.stdout!.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim()))))
      )
      const state = () => /\) (\S)/.exec(fs.readFileSync(`/proc/${zombie}/stat`, "utf8"))?.[1]
      while (state() !== "Z") yield* Effect.sleep("10 millis")
      const filename = tempFile()
      yield* withStore(filename, (store) => store.ensure("zombie"))
      const now = Date.now()
      const lease = (thread: string, pid: number) =>
        withSql(filename, (sql) =>
          sql`INSERT INTO leases (thread_id, run_id, owner, expires_at)
              VALUES (${thread}, 'crashed', ${`${os.hostname()}:${pid}`}, ${now + 30_000})`)
      yield* lease("zombie", zombie)
      yield* lease("alive", parent.pid!)
      yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          assert.isUndefined(yield* store.acquireLease({ threadId: "zombie", runId: "next", ttlMs: 30_000, now }))
          const held = yield* store.acquireLease({ threadId: "alive", runId: "next", ttlMs: 30_000, now })
          assert.strictEqual(held?.owner, `${os.hostname()}:${parent.pid}`)
        }))
      assert.strictEqual(state(), "Z", "the holder was a zombie all along")
    })), { timeout: 20_000 })

  it.effect("list is newest first with titles and checkpoint counts; runs are upserted and returned", () =>
    withStore(tempFile(), (store) =>
      Effect.gen(function*() {
        yield* store.append("older", "r1", [{ messages: [M.human("hi", { id: "x" })], title: "Older thread" }])
        yield* TestClock.adjust("1 second")
        yield* store.append("newer", "r2", [{ messages: [M.human("yo", { id: "y" })] }])
        yield* TestClock.adjust("1 second")
        yield* store.append("newer", "r2", [{ title: "Newer thread" }])
        let listed = yield* store.list
        assert.deepStrictEqual(
          listed.map((t) => [t.thread_id, t.title, t.checkpoints]),
          [["newer", "Newer thread", 2], ["older", "Older thread", 1]]
        )
        assert.strictEqual(listed[0]!.created_at, "1970-01-01T00:00:01.000Z")
        assert.strictEqual(listed[0]!.updated_at, "1970-01-01T00:00:02.000Z")
        // A step on the older thread makes it the newest; a step without a title keeps the title.
        yield* TestClock.adjust("1 second")
        yield* store.append("older", "r3", [{ messages: [M.ai("hello", { id: "z" })] }])
        listed = yield* store.list
        assert.deepStrictEqual(listed.map((t) => [t.thread_id, t.title]), [["older", "Older thread"], [
          "newer",
          "Newer thread"
        ]])

        const started = {
          run_id: "r3",
          thread_id: "older",
          status: "running",
          stop_reason: null,
          started_at: "2025-01-01T00:00:00.000Z",
          ended_at: null
        } as const
        yield* store.saveRun({ ...started, run_id: "r1", started_at: "2024-12-31T00:00:00.000Z" })
        yield* store.saveRun(started)
        const ended = "2025-01-01T00:01:00.000Z"
        yield* store.saveRun({ ...started, status: "success", stop_reason: "completed", ended_at: ended })
        const runs = (yield* loadState(store, "older")).runs
        assert.deepStrictEqual(runs.map((r) => [r.run_id, r.status, r.stop_reason, r.ended_at]), [
          ["r1", "running", null, null],
          ["r3", "success", "completed", ended]
        ])
        // saveRun alone creates the thread it names.
        yield* store.saveRun({ ...started, run_id: "r9", thread_id: "fresh" })
        assert.isTrue(Option.isSome(yield* store.load("fresh")))
      })))

  it.effect("list says how each thread's last run stands; delete removes a thread, not while a run holds it", () =>
    withStore(tempFile(), statusAndDelete))

  it.effect("a corrupt checkpoint row fails load with a StoreError naming the thread, the seq and the problem", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          for (const checkpoint of checkpointsOfThread.slice(0, 3)) yield* store.append("broken", "r", checkpoint)
          yield* store.append("intact", "r", checkpointsOfThread[0]!)
        }))
      const corrupt = (updates: string) =>
        withSql(filename, (sql) =>
          sql`UPDATE checkpoints SET updates = ${updates} WHERE thread_id = 'broken' AND seq = 2`)
      const loadError = withStore(filename, (store) => expectStoreError(store.load("broken")), { snapshotEvery: 0 })

      yield* corrupt(`[{"messages":[{"type":"tool","id":"t1","content":"ok","tool_call_id":42}]}]`)
      let error = yield* loadError
      assert.strictEqual(error.operation, "load")
      assert.include(error.message, `Thread "broken"`)
      assert.include(error.message, "checkpoint 2")
      assert.include(error.message, "[0].messages[0].tool_call_id")
      assert.include(error.message, "Expected string, actual 42")

      yield* corrupt(`[{"messages": [`)
      error = yield* loadError
      assert.include(error.message, "checkpoint 2")
      assert.include(error.message, "not valid JSON")

      // Valid JSON whose updates do not apply: removing a message the thread never had.
      yield* corrupt(`[{"messages":[{"type":"remove","id":"ghost"}]}]`)
      error = yield* loadError
      assert.include(error.message, "checkpoint 2")
      assert.include(error.message, "ghost")

      // Other threads are unaffected.
      const intact = yield* withStore(filename, (store) => loadState(store, "intact"))
      assert.deepStrictEqual(intact.state, fold(checkpointsOfThread[0]!))
    }))

  it.effect("append refuses a step that could not be loaded back, and writes nothing for it", () =>
    withStore(tempFile(), (store) =>
      Effect.gen(function*() {
        yield* store.append("t", "r", checkpointsOfThread[0]!)
        const badFile = { filename: "a.pdf", size: Number.NaN, path: "/mnt/user-data/uploads/a.pdf", extension: ".pdf" }
        const error = yield* expectStoreError(store.append("t", "r", [{ uploaded_files: [badFile] }]))
        assert.strictEqual(error.operation, "append")
        assert.include(error.message, `thread "t"`)
        assert.include(error.message, "[0].uploaded_files[0].size")
        const cyclic: Record<string, unknown> = {}
        cyclic.self = cyclic
        const cycleError = yield* expectStoreError(
          store.append("t", "r", [{ messages: [M.ai("x", { id: "cyc", additional_kwargs: cyclic })] }])
        )
        assert.include(cycleError.message, "not representable as JSON")
        const loaded = yield* loadState(store, "t")
        assert.strictEqual(loaded.checkpoints, 1)
        assert.deepStrictEqual(loaded.state, fold(checkpointsOfThread[0]!))
        // Free-form JSON fields follow JSON: a NaN there is written as null and the step is kept.
        yield* store.append("t", "r", [{
          messages: [M.ai("", { id: "n", tool_calls: [{ id: "c", name: "f", args: { x: Number.NaN } }] })]
        }])
        const last = (yield* loadState(store, "t")).state.messages.at(-1)!
        assert.deepStrictEqual(M.toolCalls(last)[0]!.args, { x: null })
      })))

  it.effect("provider fields the schemas do not name survive a reload", () =>
    withStore(tempFile(), (store) =>
      Effect.gen(function*() {
        const cited = {
          type: "ai",
          id: "cited",
          content: [{ type: "text", text: "Paris.", citations: [{ url: "https://example.org" }] }],
          example: false
        } as unknown as Message
        yield* store.append("t", "r", [{ messages: [cited] }])
        assert.deepStrictEqual((yield* loadState(store, "t")).state.messages, [cited])
      })))

  it.effect("snapshots: loads are the same with a snapshot, after more steps, and with a corrupt snapshot", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      const all = checkpointsOfThread
      const firstPart = all.slice(0, 4)
      const options = { snapshotEvery: 2 }
      yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          for (const checkpoint of firstPart) yield* store.append("t", "r", checkpoint)
          assert.deepStrictEqual((yield* loadState(store, "t")).state, fold(firstPart.flat()))
          for (const checkpoint of all.slice(4)) yield* store.append("t", "r", checkpoint)
        }), options)
      const snapshotSeq = yield* withSql(filename, (sql) => sql<{ seq: number }>`SELECT seq FROM snapshots`)
      assert.deepStrictEqual(snapshotSeq.map((r) => r.seq), [4])
      const expected = fold(all.flat())
      const reload = withStore(filename, (store) => loadState(store, "t"), options)
      let loaded = yield* reload
      assert.deepStrictEqual(loaded.state, expected)
      assert.strictEqual(loaded.checkpoints, all.length)
      // The snapshot is rewritten at the newest checkpoint, then a corrupt one is ignored and rebuilt.
      yield* withSql(filename, (sql) => sql`UPDATE snapshots SET state = '{"messages": 7}'`)
      loaded = yield* reload
      assert.deepStrictEqual(loaded.state, expected)
      const rebuilt = yield* withSql(filename, (sql) =>
        sql<{ seq: number; state: string }>`SELECT seq, state FROM snapshots`)
      assert.deepStrictEqual(rebuilt.map((r) => r.seq), [all.length])
      assert.deepStrictEqual(JSON.parse(rebuilt[0]!.state), expected)
    }))

  it.effect("opening migrates once; a database from a newer schema is refused with a readable error", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      yield* withStore(filename, (store) => store.append("t", "r", checkpointsOfThread[0]!))
      yield* withStore(filename, (store) => store.append("t", "r", checkpointsOfThread[1]!))
      const version = yield* withSql(filename, (sql) => sql<{ user_version: number }>`PRAGMA user_version`)
      assert.strictEqual(version[0]!.user_version, SqliteThreadStore.SCHEMA_VERSION)
      const mode = yield* withSql(filename, (sql) => sql<{ journal_mode: string }>`PRAGMA journal_mode`)
      assert.strictEqual(mode[0]!.journal_mode, "wal")
      const loaded = yield* withStore(filename, (store) => loadState(store, "t"))
      assert.deepStrictEqual(loaded.state, fold([...checkpointsOfThread[0]!, ...checkpointsOfThread[1]!]))

      yield* withSql(filename, (sql) => sql`PRAGMA user_version = 99`)
      const error = yield* expectStoreError(withStore(filename, () => Effect.void))
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, filename)
      assert.include(error.message, "schema version 99")
    }))

  it.effect("a version-1 database (checkpoints numbered per thread) migrates with every step kept in order", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      // a database as version 1 left it, written by hand: two interleaved threads, per-thread seqs, a snapshot
      yield* withSql(filename, (sql) =>
        Effect.gen(function*() {
          for (const statement of SqliteThreadStore.migrations[0]!) yield* sql.unsafe(statement)
          yield* sql`PRAGMA user_version = 1`
          for (const t of ["x", "y"]) yield* sql`INSERT INTO threads (thread_id, created_at, updated_at) VALUES (${t}, 'a', 'a')`
          const steps = [...checkpointsOfThread[0]!, ...checkpointsOfThread[1]!]
          for (const [i, update] of steps.entries()) {
            for (const t of ["x", "y"]) {
              yield* sql`INSERT INTO checkpoints (thread_id, seq, run_id, created_at, updates)
                VALUES (${t}, ${i + 1}, 'r', 'a', ${JSON.stringify([update])})`
            }
          }
          yield* sql`INSERT INTO snapshots (thread_id, seq, created_at, state) VALUES ('x', 1, 'a', '{}')`
        }))
      const expected = fold([...checkpointsOfThread[0]!, ...checkpointsOfThread[1]!])
      for (const t of ["x", "y"]) {
        const loaded = yield* withStore(filename, (store) => loadState(store, t))
        assert.deepStrictEqual(loaded.state, expected)
        assert.strictEqual(loaded.checkpoints, checkpointsOfThread[0]!.length + checkpointsOfThread[1]!.length)
      }
      // and new steps go on after the migrated ones
      yield* withStore(filename, (store) => store.append("x", "r2", [{ title: "after migration" }]))
      const after = yield* withStore(filename, (store) => loadState(store, "x"))
      assert.strictEqual(after.state.title, "after migration")
    }))

  it.effect("a file that is not a database is a StoreError, not a crash", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      fs.writeFileSync(filename, "this is not a database, it is a text file of some length ".repeat(20))
      const error = yield* expectStoreError(withStore(filename, () => Effect.void))
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, filename)
    }))

  it.effect("layerFromHome creates the home directory and keeps antler.sqlite in it", () =>
    Effect.gen(function*() {
      const home = path.join(tempDir(), "nested", "home")
      yield* Effect.flatMap(ThreadStore, (store) => store.ensure("t")).pipe(
        Effect.provide(SqliteThreadStore.layerFromHome(home))
      )
      assert.isTrue(fs.existsSync(path.join(home, "antler.sqlite")))
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Property: for any sequence of valid updates, load after appending them equals their fold.

// What a checkpoint can hold is JSON: arbitrary values are passed through JSON first (dropping undefined
// fields, -0), and the ones JSON changes into something invalid (a NaN size) are discarded.
const jsonClean = <A>(schema: Schema.Schema<A, any>, arb: FC.Arbitrary<A>): FC.Arbitrary<A> =>
  arb.map((value) => JSON.parse(JSON.stringify(value)) as A).filter(Schema.is(schema))

// Ids from a small pool, so that writes replace and remove existing messages.
const idArb = FC.constantFrom("m1", "m2", "m3", "m4", "m5", "m6")
const messageArb: FC.Arbitrary<Message> = FC.tuple(jsonClean(M.Message, Arbitrary.make(M.Message)), idArb).map((
  [message, id]
) => ({ ...message, id }))
const writeArb: FC.Arbitrary<ReadonlyArray<MessageWrite>> = FC.array(
  FC.oneof(
    { weight: 6, arbitrary: messageArb },
    { weight: 2, arbitrary: idArb.map(M.remove) },
    { weight: 1, arbitrary: FC.constant(M.remove(M.REMOVE_ALL_MESSAGES)) }
  ),
  { minLength: 1, maxLength: 4 }
)
const OtherFields = TS.StateUpdate.pipe(Schema.omit("messages"))
const updateArb: FC.Arbitrary<StateUpdate> = FC.oneof(
  { weight: 4, arbitrary: writeArb.map((messages): StateUpdate => ({ messages })) },
  { weight: 1, arbitrary: jsonClean(OtherFields, Arbitrary.make(OtherFields)) }
)
const checkpointsArb = FC.array(FC.array(updateArb, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 8 })

/** Keeps the updates that apply in order (a removal of an absent id or a second sandbox id would not). */
const validOnly = (checkpoints: ReadonlyArray<ReadonlyArray<StateUpdate>>) => {
  let state = TS.empty
  return checkpoints
    .map((checkpoint) =>
      checkpoint.filter((update) => {
        const next = applyUpdate(state, update)
        if (Either.isLeft(next)) return false
        state = next.right
        return true
      })
    )
    .filter((checkpoint) => checkpoint.length > 0)
}

/** The same for every store: `status` in `list`, and `delete`. */
const statusAndDelete = (store: ThreadStore["Type"]) =>
  Effect.gen(function*() {
    const run = (thread_id: string, run_id: string, status: RunRecord["status"], stop_reason: StopReason | null) =>
      store.saveRun({ run_id, thread_id, status, stop_reason, started_at: "2025-01-01T00:00:00.000Z", ended_at: null })
    yield* store.append("done", "r1", [{ messages: [M.human("hi", { id: "d1" })] }])
    yield* run("done", "r1", "success", "completed")
    yield* run("asking", "r2", "interrupted", "interrupted")
    yield* run("failed", "r3", "error", "error")
    yield* run("crashed", "r4", "running", null)
    yield* store.acquireLease({ threadId: "live", runId: "r5", ttlMs: 60_000, now: 0 })
    yield* run("live", "r5", "running", null)
    yield* store.ensure("fresh")
    const status = (listed: ReadonlyArray<ThreadSummary>) =>
      Object.fromEntries(listed.map((t) => [t.thread_id, [t.status, t.stop_reason]]))
    assert.deepStrictEqual(status(yield* store.list), {
      done: ["success", "completed"],
      asking: ["interrupted", "interrupted"],
      failed: ["error", "error"],
      crashed: ["stopped", null],
      live: ["running", null],
      fresh: [undefined, undefined]
    })

    assert.isTrue(yield* store.delete("done"))
    assert.isTrue(Option.isNone(yield* store.load("done")))
    assert.isFalse(yield* store.delete("done"))
    assert.isFalse(yield* store.delete("never"))
    const busy = yield* Effect.flip(store.delete("live"))
    assert.strictEqual(busy.operation, "delete")
    assert.include(busy.message, `Thread "live" has a run in progress (run r5`)
    assert.isTrue(Option.isSome(yield* store.load("live")))
    yield* store.releaseLease("live", "r5")
    assert.isTrue(yield* store.delete("live"))
    const left = (yield* store.list).map((t) => t.thread_id).toSorted()
    assert.deepStrictEqual(left, ["asking", "crashed", "failed", "fresh"])
    // A thread started again under a deleted id starts empty.
    yield* run("done", "r6", "success", "completed")
    const again = yield* loadState(store, "done")
    assert.deepStrictEqual([again.state.messages, again.runs.map((r) => r.run_id)], [[], ["r6"]])
  })

describe("MemoryThreadStore", () => {
  it.effect("list says how each thread's last run stands; delete removes a thread, not while a run holds it", () =>
    statusAndDelete(MemoryThreadStore.make()))
})

describe("SqliteThreadStore laws", () => {
  const dir = tempDir()
  let runs = 0
  // The store reads its JSON back without `__proto__` keys (state/Json.ts: a key that a later copy would turn into
  // a prototype), so what it loads is the fold of the updates without them (seed -367557406 found one).
  const fold = (updates: ReadonlyArray<StateUpdate>) =>
    Either.getOrThrow(applyUpdates(TS.empty, Json.withoutProto(updates)))
  it.effect.prop(
    "load after appending any valid updates equals applyUpdates(empty, all), with or without a snapshot",
    [checkpointsArb, FC.nat(4)],
    ([generated, snapshotEvery]) =>
      Effect.gen(function*() {
        const checkpoints = validOnly(generated)
        const half = Math.ceil(checkpoints.length / 2)
        const filename = path.join(dir, `prop-${++runs}.sqlite`)
        yield* withStore(filename, (store) =>
          Effect.gen(function*() {
            for (const checkpoint of checkpoints.slice(0, half)) yield* store.append("p", "r", checkpoint)
            // This load may write a snapshot, which the next load then starts from.
            const first = yield* store.load("p")
            if (half > 0) {
              assert.deepStrictEqual(Option.getOrThrow(first).state, fold(checkpoints.slice(0, half).flat()))
            }
            for (const checkpoint of checkpoints.slice(half)) yield* store.append("p", "r", checkpoint)
            const loaded = yield* store.load("p")
            if (checkpoints.length > 0) {
              assert.deepStrictEqual(Option.getOrThrow(loaded).state, fold(checkpoints.flat()))
              assert.strictEqual(Option.getOrThrow(loaded).checkpoints, checkpoints.length)
            }
          }), { snapshotEvery })
      }),
    { fastCheck: { numRuns: 40 } }
  )
})
