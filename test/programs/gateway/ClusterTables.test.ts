/**
 * Runners started at once on a fresh PostgreSQL database (a cluster brought up together) all get @effect/cluster's
 * tables: each makes them first through `ClusterTables` (as `ClusterRuns` does), then builds the cluster's SQL
 * storages, which no longer race on making them (a unique violation in the catalog made `antler serve` exit).
 * Skipped, saying why, without PostgreSQL.
 */
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Snowflake from "@effect/cluster/Snowflake"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as PgClient from "@effect/sql-pg/PgClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as ClusterTables from "../../../src/programs/gateway/cluster/ClusterTables.js"
import * as Postgres from "../../support/postgres.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[cluster tables made at once] skipped: ${pg.skip}`)

afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

const storages = Layer.mergeAll(SqlMessageStorage.layer, SqlRunnerStorage.layer).pipe(
  Layer.provide(Snowflake.layerGenerator),
  Layer.provide(ShardingConfig.layer())
)

describe.skipIf("skip" in pg)("the cluster's tables made by several runners at once", () => {
  it("every runner gets its storages on a fresh database", async () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const url = await (pg as Postgres.Postgres).createDatabase()
      // each "runner" with its own pool, as a process has
      const runner = Effect.scoped(Effect.zipRight(ClusterTables.make, Layer.build(storages))).pipe(
        Effect.provide(PgClient.layer({ url: Redacted.make(url) }))
      )
      const exits = await Effect.runPromise(
        Effect.all(Array.from({ length: 4 }, () => Effect.exit(runner)), { concurrency: "unbounded" })
      )
      for (const exit of exits) assert.isTrue(Exit.isSuccess(exit), String(exit))
    }
  }, 120_000)
})
