/**
 * The SQLite connection of the thread store: one better-sqlite3 database, its statements prepared once and kept
 * by their text. better-sqlite3 runs a statement synchronously, so a statement here is one step of an effect.
 *
 * `@effect/sql`'s client wraps each statement in a cache with a time-to-live, keyed by a hash of the SQL text,
 * plus its own permit: about 10 µs and a dozen effect steps per statement. The store already serialises its use
 * of the connection under its own lock, so it talks to the database directly (same statements, same errors:
 * `SqlError` with the driver's error as `cause`).
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createRequire } from "node:module"
import * as Mutex from "../services/Mutex.js"

/** What a write statement reports. */
export interface RunResult {
  readonly changes: number
  readonly lastInsertRowid: number | bigint
}

interface Statement {
  readonly reader: boolean
  run(...params: ReadonlyArray<unknown>): RunResult
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
}

interface Database {
  prepare(sql: string): Statement
  pragma(source: string): unknown
  close(): void
}

type DatabaseConstructor = new(filename: string, options?: { readonly readonly?: boolean }) => Database

/** The store's connection: the two statement forms it uses, as `@effect/sql`'s `Connection` has them. */
export interface Connection {
  /** Rows of a query (`[]` for a statement that returns none). */
  readonly execute: (
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows?: undefined
  ) => Effect.Effect<ReadonlyArray<any>, SqlError>
  /** Rows of a query, or a write's `RunResult` (`changes`, `lastInsertRowid`). */
  readonly executeRaw: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, SqlError>
}

/** Prepared statements kept at most (the store has a few dozen distinct statements). */
const MAX_PREPARED = 256

const failed = (cause: unknown, message: string) => new SqlError({ cause, message })

/**
 * Opens the database file (created when missing) in WAL mode; closed when the scope closes. Fails with a
 * `SqlError` whose cause is the driver's error when the file cannot be opened.
 */
export const open = (filename: string): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.try({
        try: () => {
          const Sqlite = createRequire(import.meta.url)("better-sqlite3") as DatabaseConstructor
          const db = new Sqlite(filename, { readonly: false })
          try {
            db.pragma("journal_mode = WAL")
          } catch (error) {
            db.close()
            throw error
          }
          return db
        },
        catch: (cause) => failed(cause, "Failed to open the database")
      }),
      (db) => Effect.sync(() => db.close())
    ),
    (db): Connection => {
      const prepared = new Map<string, Statement>()
      const statement = (sql: string): Statement => {
        let found = prepared.get(sql)
        if (found === undefined) {
          if (prepared.size >= MAX_PREPARED) prepared.clear()
          found = db.prepare(sql)
          prepared.set(sql, found)
        }
        return found
      }
      const run = (sql: string, params: ReadonlyArray<unknown>, raw: boolean): Effect.Effect<any, SqlError> =>
        Effect.suspend((): Effect.Effect<unknown, SqlError> => {
          let s: Statement
          try {
            s = statement(sql)
          } catch (cause) {
            return Effect.fail(failed(cause, "Failed to prepare statement"))
          }
          try {
            if (s.reader) return Effect.succeed(s.all(...params))
            const result = s.run(...params)
            return Effect.succeed(raw ? result : [])
          } catch (cause) {
            return Effect.fail(failed(cause, "Failed to execute statement"))
          }
        })
      return {
        execute: (sql, params) => run(sql, params, false),
        executeRaw: (sql, params) => run(sql, params, true)
      }
    }
  )

/** Mutual exclusion between the fibers of one store (one connection: one statement or transaction at a time). */
export type Lock = Mutex.Mutex

/** A fresh lock. */
export const makeLock = (): Lock => Mutex.make()
