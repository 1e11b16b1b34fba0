/**
 * Processes started at once on a fresh PostgreSQL database (a cluster's runners brought up together) all open the
 * scheduled tasks: their tables are made once, not raced (which failed one of them with a unique violation on
 * `pg_type`). Skipped, saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as PgTasks from "../../../src/programs/gateway/scheduler/PgTasks.js"
import * as Postgres from "../../support/postgres.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[scheduled tasks on PostgreSQL, opened at once] skipped: ${pg.skip}`)

afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

describe.skipIf("skip" in pg)("the scheduled tasks opened by several processes at once", () => {
  it("every one opens them on a fresh database", async () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const url = await (pg as Postgres.Postgres).createDatabase()
      const scope = Effect.runSync(Scope.make())
      const opened = await Effect.runPromise(
        Effect.all(Array.from({ length: 6 }, () => Effect.either(Scope.extend(PgTasks.make(url), scope))), {
          concurrency: "unbounded"
        })
      )
      await Effect.runPromise(Scope.close(scope, Exit.void))
      for (const result of opened) assert.strictEqual(result._tag, "Right", JSON.stringify(result))
    }
  }, 120_000)
})
