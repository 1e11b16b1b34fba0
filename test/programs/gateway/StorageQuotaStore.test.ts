/**
 * The byte counters the gateway's storage quotas read (`ThreadStore.bytesOf`, `bytesOwned`), on every store: a
 * thread's counter is what its checkpoints, run records, run events and metadata hold as stored, its owner's the sum
 * of their threads'; both follow every write and every delete (a run deleted, a run rolled back, a thread deleted),
 * and a database written before the counters existed is counted when it is opened. SQLite is recounted from its tables,
 * PostgreSQL counts what SQLite counts for the same writes, the in-memory store measures its JSON. PostgreSQL is
 * skipped, saying why, when there is none.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as PgThreadStore from "../../../src/layers/PgThreadStore.js"
import * as SqliteThreadStore from "../../../src/layers/SqliteThreadStore.js"
import * as PgPool from "../../../src/layers/store/PgPool.js"
import type { StoreError } from "../../../src/services/RunContext.js"
import type { RunRecord } from "../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Postgres from "../../support/postgres.js"

const pg = await Postgres.forFile("StorageQuotaStore")

// the store's SQLite file, opened beside it (better-sqlite3, as its store opens it)
interface Database {
  readonly exec: (sql: string) => void
  readonly prepare: (sql: string) => {
    readonly all: (...params: ReadonlyArray<unknown>) => Array<unknown>
    readonly get: (...params: ReadonlyArray<unknown>) => unknown
  }
  readonly close: () => void
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new(
  filename: string,
  options?: { readonly readonly?: boolean }
) => Database

const run = (threadId: string, runId: string, status: RunRecord["status"], extra: Partial<RunRecord> = {}) => ({
  run_id: runId,
  thread_id: threadId,
  status,
  stop_reason: null,
  started_at: "2026-01-01T00:00:00.000Z",
  ended_at: status === "running" ? null : "2026-01-01T00:00:01.000Z",
  ...extra
}) satisfies RunRecord

const use = <A>(
  layer: Layer.Layer<ThreadStore, StoreError>,
  f: (store: ThreadStore["Type"]) => Effect.Effect<A, StoreError>
) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), (ctx) => f(ctx.unsafeMap.get(ThreadStore.key)))))

/**
 * What each thread holds and what each owner's threads hold, counted from the tables (`recount`) or, for the
 * in-memory store, undefined (its own measure is checked for the same laws).
 */
interface Backend {
  readonly name: string
  readonly fresh: () => Promise<{
    readonly layer: Layer.Layer<ThreadStore, StoreError>
    readonly recount?: (threadId: string) => Promise<number>
  }>
}

const sqliteRecount = (file: string) => async (threadId: string) => {
  const db = new Database(file, { readonly: true })
  try {
    const row = db.prepare(
      `SELECT
        COALESCE((SELECT SUM(octet_length(updates)) FROM checkpoints WHERE thread_id = @t), 0) +
        COALESCE((SELECT SUM(COALESCE(octet_length(metadata), 0) + COALESCE(octet_length(error), 0))
          FROM runs WHERE thread_id = @t), 0) +
        COALESCE((SELECT SUM(octet_length(events)) FROM run_events WHERE thread_id = @t), 0) +
        COALESCE((SELECT octet_length(metadata) FROM threads WHERE thread_id = @t), 0) AS n`
    ).get({ t: threadId }) as { n: number }
    return row.n
  } finally {
    db.close()
  }
}

const backends: ReadonlyArray<Backend> = [
  {
    name: "SQLite",
    fresh: async () => {
      const file = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-bytes-")), "antler.sqlite")
      return { layer: SqliteThreadStore.layer({ filename: file }), recount: sqliteRecount(file) }
    }
  },
  ...("skip" in pg ? [] : [{
    name: "PostgreSQL",
    fresh: async () => {
      const url = await (pg as Postgres.Postgres).createDatabase()
      return { layer: PgThreadStore.layer({ url }) }
    }
  }]),
  {
    name: "memory",
    fresh: async () => {
      const store = MemoryThreadStore.make()
      return { layer: Layer.succeed(ThreadStore, store) }
    }
  }
]

const big = (n: number, char = "é") => char.repeat(n)

// what each backend counted at each step of the same writes: the stores that keep the same text count the same
const counted = new Map<string, Array<number>>()

for (const backend of backends) {
  describe(`${backend.name}: the byte counters`, () => {
    it("follow every write and delete, per thread and per owner, without reading what they count", async () => {
      const { layer, recount } = await backend.fresh()
      const seen: Array<number> = []
      counted.set(backend.name, seen)
      await use(layer, (store) =>
        Effect.gen(function*() {
          const note = (threadId: string) =>
            Effect.map(store.bytesOf(threadId), (found) => void seen.push(found?.bytes ?? -1, found?.owned ?? -1))
          yield* store.ensure("a1", { owner: "alice" })
          yield* store.ensure("a2", { owner: "alice" })
          yield* store.ensure("b1", { owner: "bob" })
          yield* store.ensure("cli")
          assert.deepStrictEqual(yield* store.bytesOf("a1"), { bytes: 0, owner: "alice", owned: 0 })
          assert.strictEqual(yield* store.bytesOf("nothing"), undefined)

          yield* store.saveRun(run("a1", "r1", "running", { metadata: { kwargs: { input: big(1000) } } }))
          yield* store.append("a1", "r1", [{ messages: [M.human(big(5000))] }])
          yield* store.append("a1", "r1", [{ messages: [M.ai(big(3000, "x"))] }])
          yield* store.saveRun(run("a1", "r1", "error", { error: "boom ".repeat(100) }))
          yield* store.saveRunEvents("a1", "r1", [
            { seq: 1, event_type: "run.start", category: "lifecycle", content: big(700), metadata: {}, created_at: "" }
          ])
          yield* note("a1")
          const a1 = (yield* store.bytesOf("a1"))!
          // (é is two bytes of UTF-8: bytes, not characters)
          assert.isAbove(a1.bytes, 2 * 5000 + 3000 + 2 * 1000 + 500 + 2 * 700)
          assert.isBelow(a1.bytes, 2 * 5000 + 3000 + 2 * 1000 + 500 + 2 * 700 + 4000)
          if (recount !== undefined) assert.strictEqual(a1.bytes, yield* Effect.promise(() => recount("a1")))
          assert.strictEqual(a1.owned, a1.bytes)

          yield* store.saveRun(run("a2", "r2", "running"))
          yield* store.append("a2", "r2", [{ messages: [M.human(big(2000))] }])
          yield* store.saveRun(run("a2", "r2", "success"))
          yield* store.append("b1", "r3", [{ messages: [M.human(big(9000))] }])
          yield* store.append("cli", "r4", [{ messages: [M.human("from the CLI")] }])
          const a2 = (yield* store.bytesOf("a2"))!
          const b1 = (yield* store.bytesOf("b1"))!
          const cli = (yield* store.bytesOf("cli"))!
          assert.strictEqual(yield* store.bytesOwned("alice", false), a1.bytes + a2.bytes)
          assert.strictEqual((yield* store.bytesOf("a2"))!.owned, a1.bytes + a2.bytes)
          assert.strictEqual(yield* store.bytesOwned("bob", false), b1.bytes)
          assert.strictEqual(cli.owner, null)
          assert.strictEqual(yield* store.bytesOwned("default", false), 0)
          assert.strictEqual(yield* store.bytesOwned("default", true), cli.bytes)
          assert.strictEqual(yield* store.bytesOwned("carol", false), 0)

          // a run deleted takes its record and events with it (its checkpoints stay)
          assert.isTrue(yield* store.deleteRun("a1", "r1"))
          yield* note("a1")
          const afterRun = (yield* store.bytesOf("a1"))!.bytes
          assert.isBelow(afterRun, a1.bytes - 2 * 1000 - 2 * 700)
          if (recount !== undefined) assert.strictEqual(afterRun, yield* Effect.promise(() => recount("a1")))
          // a run rolled back takes its checkpoints
          yield* store.append("a2", "r5", [{ messages: [M.human(big(4000))] }])
          assert.isAbove((yield* store.bytesOf("a2"))!.bytes, a2.bytes + 8000)
          yield* note("a2")
          assert.strictEqual(yield* store.rollback("a2", "r5"), 1)
          yield* note("a2")
          assert.strictEqual((yield* store.bytesOf("a2"))!.bytes, a2.bytes)
          assert.strictEqual(yield* store.bytesOwned("alice", false), afterRun + a2.bytes)
          // a thread deleted frees all it held, for its owner only
          assert.isTrue(yield* store.delete("a2"))
          assert.strictEqual(yield* store.bytesOwned("alice", false), afterRun)
          assert.isTrue(yield* store.delete("a1"))
          assert.strictEqual(yield* store.bytesOwned("alice", false), 0)
          assert.strictEqual(yield* store.bytesOwned("bob", false), b1.bytes)
        }))
    })
  })
}

describe.skipIf("skip" in pg)("PostgreSQL and SQLite", () => {
  it("count the same bytes for the same writes (SQLite's recounted from its tables above)", () => {
    assert.isAbove(counted.get("SQLite")!.length, 0)
    assert.deepStrictEqual(counted.get("PostgreSQL"), counted.get("SQLite"))
  })
})

describe("SQLite: a database written before the counters", () => {
  it("is counted when it is opened, and counted on from there", async () => {
    const file = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-bytes-old-")), "antler.sqlite")
    await use(SqliteThreadStore.layer({ filename: file }), (store) =>
      Effect.gen(function*() {
        yield* store.ensure("old", { owner: "alice", metadata: { note: big(2000) } })
        yield* store.saveRun(run("old", "r1", "success", { metadata: { asked: big(300) } }))
        yield* store.append("old", "r1", [{ messages: [M.human(big(6000))] }])
      }))
    // the database as version 6 left it: no counters
    const db = new Database(file)
    for (const trigger of db.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%bytes%'`)
      .all() as Array<{ name: string }>) db.exec(`DROP TRIGGER ${trigger.name}`)
    db.exec(`DROP TRIGGER threads_owner_moved`)
    db.exec(`DROP TABLE owner_bytes`)
    db.exec(`ALTER TABLE threads DROP COLUMN bytes`)
    db.exec(`PRAGMA user_version = 6`)
    db.close()
    const expected = await sqliteRecount(file)("old")
    assert.isAbove(expected, 16_000)
    await use(SqliteThreadStore.layer({ filename: file }), (store) =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* store.bytesOf("old"), { bytes: expected, owner: "alice", owned: expected })
        yield* store.append("old", "r2", [{ messages: [M.human("more")] }])
        const recounted = yield* Effect.promise(() => sqliteRecount(file)("old"))
        assert.strictEqual(yield* store.bytesOwned("alice", false), recounted)
      }))
  })
})

describe.skipIf("skip" in pg)("PostgreSQL: a database written before the counters", () => {
  it("is counted when it is opened, and counted on from there", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const write = (store: ThreadStore["Type"]) =>
      Effect.gen(function*() {
        yield* store.ensure("old", { owner: "alice", metadata: { note: big(2000) } })
        yield* store.saveRun(run("old", "r1", "success", { metadata: { asked: big(300) } }))
        yield* store.append("old", "r1", [{ messages: [M.human(big(6000))] }])
        return (yield* store.bytesOf("old"))!.bytes
      })
    const expected = await use(PgThreadStore.layer({ url }), write)
    // the database as version 3 left it: no counters
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = yield* PgPool.open({ url, maxConnections: 1, applicationName: "test", what: "the test database" })
      yield* Effect.orDie(sql.unsafe(`DROP TABLE antler_owner_bytes`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_checkpoints_bytes ON antler_checkpoints`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_runs_bytes ON antler_runs`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_runs_bytes_change ON antler_runs`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_run_events_bytes ON antler_run_events`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_threads_bytes ON antler_threads`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_threads_bytes_gone ON antler_threads`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_threads_metadata_in ON antler_threads`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_threads_metadata_change ON antler_threads`))
      yield* Effect.orDie(sql.unsafe(`DROP TRIGGER antler_threads_born ON antler_threads`))
      for (const name of ["checkpoints", "runs", "run_events", "threads", "threads_metadata"]) {
        yield* Effect.orDie(sql.unsafe(`DROP FUNCTION antler_${name}_bytes()`))
      }
      yield* Effect.orDie(sql.unsafe(`DROP FUNCTION antler_threads_born()`))
      yield* Effect.orDie(sql.unsafe(`ALTER TABLE antler_threads DROP COLUMN bytes`))
      yield* Effect.orDie(sql.unsafe(`UPDATE antler_schema SET version = 3`))
    })))
    await use(PgThreadStore.layer({ url }), (store) =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* store.bytesOf("old"), { bytes: expected, owner: "alice", owned: expected })
        yield* store.append("old", "r2", [{ messages: [M.human("more")] }])
        const now = (yield* store.bytesOf("old"))!.bytes
        assert.isAbove(now, expected)
        assert.strictEqual(yield* store.bytesOwned("alice", false), now)
        assert.isTrue(yield* store.delete("old"))
        assert.strictEqual(yield* store.bytesOwned("alice", false), 0)
      }))
  })
})
