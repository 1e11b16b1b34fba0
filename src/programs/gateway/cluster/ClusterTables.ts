/**
 * @effect/cluster's tables (`cluster_messages`, `cluster_runners`...) made once when several runners start at once
 * on a fresh database. Its SQL storages make them when built, and two processes doing that at the same moment fail
 * one of them (a unique violation in PostgreSQL's catalog: `antler serve` exits). So a runner builds the storages
 * once first, alone: under a PostgreSQL advisory lock, held on a connection of its own until they are built.
 */
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Snowflake from "@effect/cluster/Snowflake"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

// An arbitrary constant: the advisory lock that serialises making the cluster's tables.
const TABLES_LOCK = 7_246_114_339

const storages = Layer.mergeAll(SqlMessageStorage.layer, SqlRunnerStorage.layer).pipe(
  Layer.provide(Snowflake.layerGenerator),
  Layer.provide(ShardingConfig.layer())
)

/** Makes the cluster's tables if missing, one process at a time. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* Effect.scoped(Effect.gen(function*() {
    const connection = yield* sql.reserve
    yield* connection.executeRaw(`SELECT pg_advisory_lock(${TABLES_LOCK})`, [])
    yield* Effect.scoped(Layer.build(storages)).pipe(
      Effect.ensuring(Effect.ignore(connection.executeRaw(`SELECT pg_advisory_unlock(${TABLES_LOCK})`, [])))
    )
  }))
})

/** `make` as a layer: build it before the cluster's own storages. */
export const layer = Layer.effectDiscard(make)
