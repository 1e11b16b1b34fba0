/**
 * A store kept beside the threads in the thread store's SQLite file (the scheduled tasks, LangGraph's store items,
 * the MCP tasks): a connection of its own to the same file (SQLite serialises the writers of every process), its
 * statements alone on it, waiting out another connection's lock as the thread store does (`Access`).
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { StoreError } from "../../services/RunContext.js"
import * as Access from "./Access.js"
import * as SqliteConnection from "./SqliteConnection.js"

/** How long a statement waits for another connection's lock (milliseconds). */
const BUSY_TIMEOUT = 5000

/** Runs one statement of the store: its rows (`[]` for one that returns none). */
export type Query = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, StoreError>

/**
 * The statements of the store `what` (`the scheduled tasks`) in the SQLite file `filename` (made when missing),
 * its errors naming `operation` (its table); the connection is closed with the scope.
 */
export const open = (filename: string, what: string, operation: string) =>
  Effect.gen(function*() {
    const where = `${what} in ${filename}`
    if (filename !== ":memory:") {
      yield* Effect.try({
        try: () => Fs.mkdirSync(Path.dirname(Path.resolve(filename)), { recursive: true }),
        catch: (cause) =>
          new StoreError({ operation: "open", message: `Cannot open ${where}: ${String(cause)}`, cause })
      })
    }
    const conn = yield* SqliteConnection.open(filename).pipe(
      Effect.mapError((cause) =>
        new StoreError({ operation: "open", message: `Cannot open ${where}: ${cause.message}`, cause })
      )
    )
    const access = Access.make(conn, BUSY_TIMEOUT)
    const query: Query = (text, params) =>
      access.exclusive(conn.execute(text, params), operation, `Cannot use ${where}`)
    return query
  })
