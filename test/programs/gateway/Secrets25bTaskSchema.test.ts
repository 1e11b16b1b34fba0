/**
 * The MCP task records' `sealed_secrets` column (the request secrets of the run that started a task, sealed:
 * `TaskSecrets`) added to a table the build before it made, on PostgreSQL and SQLite: two stores (two processes)
 * started at once over the older table both start, the column is there, a task written before reads with none, and a
 * new task round-trips its sealed secrets (opened, they mask what the task says; dropped when it ends). PostgreSQL is
 * skipped, saying why, when there is none.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import * as SideStore from "../../../src/layers/sqlite/SideStore.js"
import * as PgRecords from "../../../src/programs/gateway/mcptasks/PgRecords.js"
import * as Records from "../../../src/programs/gateway/mcptasks/Records.js"
import * as SqliteRecords from "../../../src/programs/gateway/mcptasks/SqliteRecords.js"
import * as TaskSecrets from "../../../src/programs/gateway/mcptasks/TaskSecrets.js"
import type * as SkillSecrets from "../../../src/services/SkillSecrets.js"
import * as Redact from "../../../src/state/Redact.js"
import { NOW, snapshot, taskRecord, twoOf } from "../../support/mcpTaskRecords.js"
import * as Postgres from "../../support/postgres.js"
import { tempDir } from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[MCP task sealed_secrets migration on PostgreSQL] skipped: ${pg.skip}`)
afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const SECRET = "erp-schema-7f3c-DO-NOT-LEAK"
const secrets = Redacted.make(new Map([["ERP_TOKEN", SECRET]])) as SkillSecrets.RequestSecrets
const key = TaskSecrets.keyOf(Redacted.make("cluster-secret-of-the-schema-test-0123"))

/** The table as the build before `sealed_secrets` made it. */
const PREVIOUS_TABLE = Records.MIGRATIONS[0]!.replace(/,\s*sealed_secrets TEXT\s*\)$/, "\n  )")

/** A row the previous build wrote. */
const PREVIOUS_ROW = "INSERT INTO antler_mcp_tasks (id, user_id, thread_id, server_name, driver_name, " +
  "remote_task_id, task_name, status, result_truncated, driver_data, poll_attempt_count, " +
  "consecutive_poll_error_count, cancel_attempt_count, created_at, updated_at) VALUES ('old-1', 'alice', 't1', " +
  "'tasks', 'ordinary-tools', 'remote-old', 'Report', 'working', 0, '{}', 1, 0, 0, 1, 2)"

/** Starts two stores at once over a database holding the previous table; checks the column and a round trip. */
const check = async (
  open: () => Promise<readonly [Records.Service, Records.Service, () => Promise<void>]>,
  columns: () => Promise<ReadonlyArray<string>>
) => {
  assert.notInclude(PREVIOUS_TABLE, "sealed_secrets")
  assert.notInclude(await columns(), "sealed_secrets", "the previous table has no such column")
  const [a, b, close] = await open()
  try {
    assert.include(await columns(), "sealed_secrets")
    const old = Option.getOrThrow(await run(b.get("old-1", "alice")))
    assert.deepStrictEqual([old.status, old.sealed_secrets], ["working", null])
    const task = taskRecord("task-sealed")
    const sealed = TaskSecrets.seal(key, task, secrets)
    assert.isNotNull(sealed)
    assert.notInclude(sealed!, SECRET)
    await run(a.create({ ...task, sealed_secrets: sealed }))
    const read = Option.getOrThrow(await run(b.get("task-sealed", "alice")))
    assert.strictEqual(read.sealed_secrets, sealed)
    // (opened by the other store's process: the value it masks)
    const guard = TaskSecrets.guardOf(key, read, Redact.none)
    assert.isTrue(Either.isRight(guard))
    const said = TaskSecrets.guarded(guard, snapshot({ result: { report: `filed with ${SECRET}` } }))
    assert.deepStrictEqual(said.result, { report: "filed with [redacted]" })
    // (the record drops them when its task ends)
    const [claimed] = await run(b.claimDue(NOW, "b", 60_000, 8)).then((all) => all.filter((t) => t.id === task.id))
    assert.isDefined(claimed)
    assert.isTrue(await run(b.applySnapshot(claimed!, "b", said, null, NOW + 1)))
    assert.isNull(Option.getOrThrow(await run(a.get("task-sealed", "alice"))).sealed_secrets)
  } finally {
    await close()
  }
}

describe("the MCP task records' sealed_secrets on a table the previous build made", () => {
  it("SQLite: two stores start over it, the column is added, sealed secrets round-trip", async () => {
    const file = Path.join(tempDir("antler-s25b-schema-"), "antler.sqlite")
    const sqlite = <A, E>(body: (query: SideStore.Query) => Effect.Effect<A, E>) =>
      run(Effect.scoped(Effect.flatMap(SideStore.open(file, "the MCP tasks", "mcp_tasks"), body)))
    await sqlite((query) => Effect.zipRight(query(PREVIOUS_TABLE, []), query(PREVIOUS_ROW, [])))
    const columns = () =>
      sqlite((query) => query("SELECT name FROM pragma_table_info('antler_mcp_tasks')", [])).then((rows) =>
        rows.map((row) => String(row.name))
      )
    await check(() => twoOf(() => SqliteRecords.make(file)), columns)
  }, 120_000)

  it.skipIf("skip" in pg)("PostgreSQL: two stores start over it, the column is added, sealed secrets round-trip",
    async () => {
      const url = await (pg as Postgres.Postgres).createDatabase()
      Postgres.psql(url, PREVIOUS_TABLE)
      Postgres.psql(url, PREVIOUS_ROW)
      const columns = async () =>
        Postgres.psql(url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'antler_mcp_tasks'")
          .split("\n")
      await check(() => twoOf(() => PgRecords.make(url)), columns)
    }, 120_000)
})
