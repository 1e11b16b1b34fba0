/**
 * The MCP task store in the thread store's SQLite file: a connection of its own to the same file, its statements
 * alone on it, waiting out another connection's lock as the thread store does (`sqlite/Access`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Access from "../../../layers/sqlite/Access.js"
import * as SqliteConnection from "../../../layers/sqlite/SqliteConnection.js"
import { StoreError } from "../../../services/RunContext.js"
import * as Records from "./Records.js"

/** How long a statement waits for another connection's lock (milliseconds). */
const BUSY_TIMEOUT = 5000

/** The store in the SQLite file `filename` (created when missing); closed with the scope. */
export const make = (filename: string) =>
  Effect.gen(function*() {
    const where = `the MCP tasks in ${filename}`
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
    return yield* Records.make({
      query: (text, params) => access.exclusive(conn.execute(text, params), "mcp_tasks", `Cannot use ${where}`)
    })
  })

/** The store layer over a SQLite file. */
export const layer = (filename: string): Layer.Layer<Records.Records, StoreError> =>
  Layer.scoped(Records.Records, make(filename))
