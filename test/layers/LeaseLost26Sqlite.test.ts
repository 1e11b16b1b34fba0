/**
 * A run's lease on its thread in a real SQLite file, held by the same run id from another process (one that resumed
 * the run after this process stalled past the lease's life; here another host's, trusted until its lease ends): this
 * process's renewal is refused, saying who holds it (before, a renewal by run id took it back silently, and both
 * processes ran the run), and this process's release leaves it (before, it deleted the other process's lease).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import * as Run from "../../src/programs/Run.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "antler-lease-lost-")), "antler.sqlite")

const withStore = <A, E>(filename: string, f: (store: ThreadStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(ThreadStore, f).pipe(Effect.provide(SqliteThreadStore.layer({ filename })))

/** Runs raw SQL on the file, as another process sharing the database would. */
const withSql = <A, E>(filename: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.provide(SqliteClient.layer({ filename })))

const ELSEWHERE = "another-host:4242"

describe("SQLite: a run's lease taken by the same run from another process", () => {
  it.live("is not renewed nor released by this process while the other's lease lasts; taken again once it ended", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      const now = Date.now()
      yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          yield* store.ensure("t")
          assert.isUndefined(yield* store.acquireLease({ threadId: "t", runId: "r", ttlMs: Run.LEASE_TTL_MS, now }))
        }))
      // this process stalled; another resumed run r and took its lease
      yield* withSql(filename, (sql) =>
        sql`UPDATE leases SET owner = ${ELSEWHERE}, expires_at = ${now + Run.LEASE_TTL_MS * 2} WHERE thread_id = 't'`)
      const ownerOf = withSql(filename, (sql) => sql<{ owner: string }>`SELECT owner FROM leases WHERE thread_id = 't'`)
      yield* withStore(filename, (store) =>
        Effect.gen(function*() {
          const renewed = yield* store.acquireLease({
            threadId: "t",
            runId: "r",
            ttlMs: Run.LEASE_TTL_MS,
            now: now + Run.LEASE_TTL_MS / 3
          })
          assert.strictEqual(renewed?.run_id, "r")
          assert.strictEqual(renewed?.owner, ELSEWHERE, "the renewal says the run is held elsewhere")
          yield* store.releaseLease("t", "r")
          assert.deepStrictEqual((yield* ownerOf).map((row) => row.owner), [ELSEWHERE], "the other's lease stays")
          // once the other's lease ended, the run's lease is taken here again
          const later = now + Run.LEASE_TTL_MS * 2
          const again = { threadId: "t", runId: "r", ttlMs: Run.LEASE_TTL_MS, now: later }
          assert.isUndefined(yield* store.acquireLease(again))
          yield* store.releaseLease("t", "r")
          assert.deepStrictEqual(yield* ownerOf, [], "its own lease released")
        }))
    }))
})
