/**
 * A PostgreSQL pool of one of Antler's stores (threads, scheduled tasks, LangGraph's store items) and what they
 * share: opening it with a readable error (the URL's credentials never in it), making tables one process at a time,
 * and `?` placeholders numbered as PostgreSQL's. Loaded only when PostgreSQL is configured (`@effect/sql-pg` is an
 * optional peer).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { StoreError } from "../../services/RunContext.js"
import { toStoreError } from "./Rows.js"

/** How a store's pool is opened. */
export interface Options {
  readonly url: Redacted.Redacted<string> | string
  readonly maxConnections: number
  /** What the database shows as the client's name (`pg_stat_activity`). */
  readonly applicationName: string
  /** What could not be opened, for the error: `Cannot open ${what}: ${why}`. */
  readonly what: string
}

/** A pool on the database at `url`, closed with the scope; a connection refused is a `StoreError` saying why. */
export const open = (options: Options): Effect.Effect<PgClient.PgClient, StoreError, Scope.Scope> =>
  PgClient.make({
    url: Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url),
    maxConnections: options.maxConnections,
    applicationName: options.applicationName,
    connectTimeout: "10 seconds"
  }).pipe(
    Effect.provide(Reactivity.layer),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const error = Cause.squash(cause)
      const detail = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
      return Effect.fail(
        new StoreError({ operation: "open", message: `Cannot open ${options.what}: ${detail}`, cause: error })
      )
    })
  )

/**
 * Runs `statements` (`CREATE TABLE IF NOT EXISTS`...) in one transaction under the advisory lock `lock`, so
 * processes starting at once make the tables one after another (the same statement run at the same moment fails
 * one of them with a unique violation in the catalog).
 */
export const migrate = (
  sql: PgClient.PgClient,
  lock: number,
  statements: ReadonlyArray<string>,
  table: string,
  what: string
): Effect.Effect<void, StoreError> =>
  sql.withTransaction(Effect.gen(function*() {
    yield* sql.unsafe(`SELECT pg_advisory_xact_lock(${lock})`)
    for (const statement of statements) yield* sql.unsafe(statement)
  })).pipe(Effect.mapError(toStoreError(table, what)))

/** A statement's `?` placeholders numbered as PostgreSQL's (the statements hold no other `?`). */
export const numbered = (text: string): string => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** The `query` of a store's SQL (`?` placeholders) over the pool, its failures a `StoreError` saying `what`. */
export const query = (sql: PgClient.PgClient, table: string, what: string) =>
(text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<Record<string, unknown>>, StoreError> =>
  sql.unsafe<Record<string, unknown>>(numbered(text), params as Array<unknown>).pipe(
    Effect.mapError(toStoreError(table, what))
  )
