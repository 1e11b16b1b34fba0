/**
 * DeerFlow's other ways of saying where threads are kept, read as Antler's `database` section, with warnings:
 * `database.backend: memory` (DeerFlow's no persistence) is read as the default, the SQLite file under the data
 * directory, so such a configuration starts instead of being refused; the older `checkpointer:` section, which
 * DeerFlow puts before `database` for its checkpoints, is read as `database.url` when it names a PostgreSQL
 * database (`type: postgres`, `connection_string`), and is not used otherwise (a SQLite file or memory: Antler's
 * threads are where `database` says).
 */
import { isRecord } from "../../state/Json.js"
import type { Migrated } from "./MemoryLegacy.js"

const URL_KEYS = ["url", "postgres_url"] as const

/** `raw` (a whole configuration value) with DeerFlow's `memory` backend and `checkpointer:` section read. */
export const migrate = (raw: unknown): Migrated => {
  if (!isRecord(raw)) return { raw, warnings: [] }
  const warnings: Array<string> = []
  let database: Record<string, unknown> | undefined = isRecord(raw.database) ? { ...raw.database } : undefined
  if (database?.backend === "memory") {
    const urls = URL_KEYS.filter((key) => database![key] != null)
    delete database.backend
    for (const key of URL_KEYS) delete database[key]
    warnings.push(
      "database.backend memory read as sqlite: Antler keeps threads in its SQLite file under the data directory, " +
        "so they outlive a restart" + (urls.length > 0 ? ` (database.${urls.join(", database.")} not used)` : "") +
        "; remove database.backend to silence this."
    )
  }
  if (!Object.hasOwn(raw, "checkpointer")) {
    return warnings.length === 0 ? { raw, warnings } : { raw: { ...raw, database }, warnings }
  }
  const { checkpointer, ...rest } = raw
  const section = isRecord(checkpointer) ? checkpointer : {}
  const connection = section.connection_string
  const schema = typeof section.postgres_schema === "string" && section.postgres_schema !== ""
    ? " (checkpointer.postgres_schema not used: Antler's tables are in the database's default schema)"
    : ""
  if (section.type === "postgres" && typeof connection === "string" && connection.trim() !== "") {
    const replaced = database === undefined
      ? []
      : (["backend", ...URL_KEYS] as const).filter((key) => database![key] != null)
    database = { ...database, url: connection.trim() }
    for (const key of replaced) if (key !== "url") delete database[key]
    warnings.push(
      "checkpointer (DeerFlow's older section) read as database.url" +
        (replaced.length > 0 ? `, before database.${replaced.join(", database.")}, as DeerFlow puts it first` : "") +
        schema + "; move its connection_string to database.url to silence this."
    )
  } else {
    const type = typeof section.type === "string" ? section.type : "unknown"
    warnings.push(
      `checkpointer (type ${type}) not used: Antler keeps threads where database says (its SQLite file under ` +
        "the data directory, or PostgreSQL at database.url)" +
        (type === "postgres" ? "; a postgres checkpointer needs a connection_string" : "") + schema +
        "; remove the checkpointer section to silence this."
    )
  }
  return { raw: database === undefined ? rest : { ...rest, database }, warnings }
}
