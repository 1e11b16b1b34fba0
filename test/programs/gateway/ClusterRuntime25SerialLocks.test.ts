/**
 * A runner's shard locks live on one reserved PostgreSQL connection (@effect/cluster's runner storage), released a
 * shard per fiber when its shards move: the pg driver, asked for a query while one runs on that connection, queued
 * it and printed "Calling client.query() when the client is already executing a query is deprecated" on the
 * runner's stderr. Over `SerialConnections` (as `RunnerSocket` builds the runner storage) the same releases, all at
 * once, free every lock and the driver warns of nothing; over the bare client it warns (the cause, shown last: Node
 * prints a deprecation once per process). Skipped, saying why, without PostgreSQL.
 */
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as ShardId from "@effect/cluster/ShardId"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SerialConnections from "../../../src/programs/gateway/cluster/SerialConnections.js"
import * as Postgres from "../../support/postgres.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[cluster shard locks' connection] skipped: ${pg.skip}`)

afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

const QUEUED = "when the client is already executing a query is deprecated"
const SHARDS = 60

/** The pg driver's warnings about queries queued on a busy connection, while `run` runs. */
const queuedWarnings = async (run: () => Promise<void>) => {
  const seen: Array<string> = []
  const listener = (warning: Error) => {
    if (warning.message.includes(QUEUED)) seen.push(warning.message)
  }
  process.on("warning", listener)
  try {
    await run()
    // (a warning is emitted on the next tick)
    await new Promise((resolve) => setTimeout(resolve, 50))
  } finally {
    process.off("warning", listener)
  }
  return seen
}

/** A runner's storage takes `SHARDS` shards, then releases them all at once, as a runner handing them over does. */
const takeAndReleaseAll = (url: string, sql: Layer.Layer<SqlClient.SqlClient, never, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    const client = yield* SqlClient.SqlClient
    const address = RunnerAddress.make("127.0.0.1", 34_431)
    const shards = Array.from({ length: SHARDS }, (_, i) => ShardId.make("default", i + 1))
    const taken = yield* storage.acquire(address, shards)
    assert.strictEqual(taken.length, SHARDS, "every shard's lock taken")
    // (the advisory locks held in this test's database)
    const held = () =>
      client`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
    assert.strictEqual((yield* held())[0]!.n, SHARDS)
    yield* Effect.forEach(shards, (shard) => storage.release(address, shard), { concurrency: "unbounded" })
    assert.strictEqual((yield* held())[0]!.n, 0, "every lock released")
  }).pipe(
    Effect.provide(Layer.orDie(SqlRunnerStorage.layer).pipe(Layer.provide(sql))),
    Effect.provide(ShardingConfig.layer()),
    Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url) }))),
    Effect.scoped,
    Effect.runPromise
  )

describe.skipIf("skip" in pg)("a runner's shard locks' connection takes one statement at a time", () => {
  it("over SerialConnections, shards released all at once: all freed, and the driver warns of nothing", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const warned = await queuedWarnings(() => takeAndReleaseAll(url, SerialConnections.layer))
    assert.deepStrictEqual(warned, [])
  }, 60_000)

  it("over the bare client, the same releases make the driver warn (the cause)", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const plain = Layer.effect(SqlClient.SqlClient, SqlClient.SqlClient)
    const warned = await queuedWarnings(() => takeAndReleaseAll(url, plain))
    assert.strictEqual(warned.length, 1)
  }, 60_000)
})
