/**
 * The MCP task records (DeerFlow's persistence/mcp_tasks, test_mcp_task_repository.py) on SQLite and PostgreSQL:
 * two processes sharing the database poll a due task once (a lease), a poll's answer is written only by the
 * lease's holder and never over a cancel request, and every read and cancel names its user and thread. PostgreSQL
 * is skipped, saying why, when there is none.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Path from "node:path"
import * as PgRecords from "../../../src/programs/gateway/mcptasks/PgRecords.js"
import type * as Records from "../../../src/programs/gateway/mcptasks/Records.js"
import * as SqliteRecords from "../../../src/programs/gateway/mcptasks/SqliteRecords.js"
import { NOW, snapshot, taskRecord, twoOf } from "../../support/mcpTaskRecords.js"
import * as Postgres from "../../support/postgres.js"
import { tempDir } from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[MCP task records on PostgreSQL] skipped: ${pg.skip}`)
afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

const record = taskRecord
const done = snapshot({ result: { report: "ok" } })

/** The laws, over two stores on one database (two processes). */
const laws = (open: () => Promise<readonly [Records.Service, Records.Service, () => Promise<void>]>) => {
  it("poll a due task once, write its answer only under the lease, keep it from another user", async () => {
    const [a, b, close] = await open()
    try {
      const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
      await run(a.create(record("task-1")))
      const duplicate = await run(Effect.either(a.create(record("task-2", { remote_task_id: "remote-task-1" }))))
      assert.strictEqual(duplicate._tag, "Left")
      const [takenA, takenB] = await Promise.all([
        run(a.claimDue(NOW, "a", 60_000, 8)),
        run(b.claimDue(NOW, "b", 60_000, 8))
      ])
      assert.strictEqual(takenA.length + takenB.length, 1)
      const [holder, other] = takenA.length === 1 ? ["a", "b"] : ["b", "a"]
      assert.isFalse(await run(a.applySnapshot(record("task-1"), other, done, null, NOW + 1)))
      assert.isTrue(await run(a.applySnapshot(record("task-1"), holder, done, null, NOW + 1)))
      const read = Option.getOrThrow(await run(b.get("task-1", "alice")))
      assert.deepStrictEqual([read.status, read.result, read.completed_at, read.lease_owner], [
        "completed",
        { report: "ok" },
        NOW + 1,
        null
      ])
      assert.isTrue(Option.isNone(await run(b.get("task-1", "bob"))))
      assert.deepStrictEqual(await run(b.list("t1", "bob", 50, false)), [])
      assert.isTrue(Option.isNone(await run(b.requestCancel("task-1", "t1", "bob", NOW))))
    } finally {
      await close()
    }
  }, 120_000)

  it("fence a poll in flight with a cancel request, which a process then takes once", async () => {
    const [a, b, close] = await open()
    try {
      const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
      await run(a.create(record("task-3")))
      assert.strictEqual((await run(a.claimDue(NOW, "a", 60_000, 8))).length, 1)
      const asked = Option.getOrThrow(await run(b.requestCancel("task-3", "t1", "alice", NOW + 1)))
      assert.strictEqual(asked.cancel_requested_at, NOW + 1)
      assert.isFalse(await run(a.applySnapshot(record("task-3"), "a", done, null, NOW + 2)))
      assert.deepStrictEqual(await run(a.list("t1", "alice", 50, true)).then((r) => r.map((t) => t.id)), ["task-3"])
      const [ca, cb] = await Promise.all([
        run(a.claimCancels(NOW + 2, "a", 60_000, 8)),
        run(b.claimCancels(NOW + 2, "b", 60_000, 8))
      ])
      assert.strictEqual(ca.length + cb.length, 1)
      const holder = ca.length === 1 ? "a" : "b"
      assert.isTrue(await run(a.applyCancel(record("task-3"), holder, { ...done, status: "cancelled", result: null }, NOW + 3)))
      const ended = Option.getOrThrow(await run(a.get("task-3", "alice")))
      assert.strictEqual(ended.status, "cancelled")
      assert.deepStrictEqual(await run(a.list("t1", "alice", 50, true)), [])
    } finally {
      await close()
    }
  }, 120_000)
}

describe("MCP task records on SQLite", () => {
  laws(() => {
    const file = Path.join(tempDir("antler-mcp-records-"), "antler.sqlite")
    return twoOf(() => SqliteRecords.make(file))
  })
})

describe.skipIf("skip" in pg)("MCP task records on PostgreSQL", () => {
  laws(async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    return twoOf(() => PgRecords.make(url))
  })
})
