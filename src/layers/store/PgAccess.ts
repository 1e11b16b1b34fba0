/**
 * How the PostgreSQL thread store reaches its pool: a statement with numbered parameters, a statement or a
 * transaction whose failure is a `StoreError` saying what could not be done, and a read transaction that sees one
 * snapshot of the database.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../services/RunContext.js"
import { toStoreError } from "./Rows.js"

/** A row as the driver gives it. */
export type Row = { readonly [column: string]: unknown; readonly seq: unknown; readonly updates: unknown }

/** The store's access to its pool. */
export interface Access {
  /** A statement with `$1`... parameters. */
  readonly q: (text: string, params?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  /** `body`, its failures a `StoreError` of `operation` saying `what` could not be done. */
  readonly run: <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string
  ) => Effect.Effect<A, StoreError>
  /** `body` in a transaction, its failures as `run`'s. */
  readonly transaction: <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string
  ) => Effect.Effect<A, StoreError>
  /** A read transaction that sees one snapshot of the database. */
  readonly snapshot: <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string
  ) => Effect.Effect<A, StoreError>
}

/** The access of a store to the pool `sql`. */
export const make = (sql: SqlClient.SqlClient): Access => {
  const run = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
    Effect.mapError(body, toStoreError(operation, what))
  const transaction = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
    run(sql.withTransaction(body), operation, what)
  const snapshot = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
    transaction(Effect.zipRight(sql.unsafe("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"), body), operation, what)
  const q = (text: string, params: ReadonlyArray<unknown> = []) => sql.unsafe<Row>(text, params as Array<unknown>)
  return { q, run, transaction, snapshot }
}
