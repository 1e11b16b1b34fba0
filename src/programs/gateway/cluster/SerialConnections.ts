/**
 * A `SqlClient` whose reserved connections run one statement at a time. @effect/cluster's runner storage keeps its
 * shard locks on one reserved PostgreSQL connection and sends it statements from several fibers at once (a shard
 * released per fiber when shards move, the heartbeat beside them): the pg driver then queues them itself, which it
 * deprecates, printing "Calling client.query() when the client is already executing a query is deprecated" on the
 * runner's stderr. Here each reserved connection takes its statements in turn, as the driver's queue did (a
 * connection runs one query at a time either way), so the driver is never asked to queue; a statement interrupted
 * while it waits its turn is never sent, where one in the driver's queue still ran.
 */
import type { Connection } from "@effect/sql/SqlConnection"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

/** `connection` taking its statements one at a time. */
export const serialConnection = (connection: Connection): Connection => {
  const turn = Effect.unsafeMakeSemaphore(1)
  const one = turn.withPermits(1)
  return {
    execute: (sql, params, transformRows) => one(connection.execute(sql, params, transformRows)),
    executeRaw: (sql, params) => one(connection.executeRaw(sql, params)),
    executeValues: (sql, params) => one(connection.executeValues(sql, params)),
    executeUnprepared: (sql, params, transformRows) => one(connection.executeUnprepared(sql, params, transformRows)),
    // (a stream holds its turn until it ends)
    executeStream: (sql, params, transformRows) =>
      Stream.unwrapScoped(Effect.as(
        Effect.acquireRelease(turn.take(1), () => turn.release(1)),
        connection.executeStream(sql, params, transformRows)
      ))
  }
}

/** `client`, its reserved connections (its own `reserve`, and that of its `withoutTransforms()`) serial. */
export const serial = (client: SqlClient.SqlClient): SqlClient.SqlClient =>
  new Proxy(client, {
    get(target, key, receiver) {
      if (key === "reserve") return Effect.map(target.reserve, serialConnection)
      if (key === "withoutTransforms") return () => serial(target.withoutTransforms())
      return Reflect.get(target, key, receiver)
    }
  })

/** The `SqlClient` given, serial (see `serial`). */
export const layer: Layer.Layer<SqlClient.SqlClient, never, SqlClient.SqlClient> = Layer.effect(
  SqlClient.SqlClient,
  Effect.map(SqlClient.SqlClient, serial)
)
