/**
 * LangGraph's store on the gateway: JSON items kept under a namespace (a path of labels) and a key, each user's
 * apart from every other's (an operation names its user; another user's items are none). Kept beside the threads,
 * in the thread store's database (the SQLite file, or the PostgreSQL database of `database.url`: see
 * `SqliteStoreItems` / `PgStoreItems`), so items survive a restart and processes sharing the database see the same
 * ones; `MemoryStoreItems` keeps them in the process. The SQL is written once, over `Sql`, and runs on both.
 *
 * Search has no vector index: a `query` is a case-insensitive substring of the item's value as JSON text, and a
 * `filter` compares top-level fields of the value whole (JSON equality). Namespace labels never hold "." (the API
 * refuses them, as LangGraph does), so a namespace is kept as its labels joined with ".".
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { StoreError } from "../../../services/RunContext.js"
import { sameJson } from "../JsonEquality.js"
import type { Sql } from "../scheduler/TaskStore.js"

/** An item as LangGraph's clients read it (times in ISO 8601). */
export interface Item {
  readonly namespace: ReadonlyArray<string>
  readonly key: string
  readonly value: Readonly<Record<string, unknown>>
  readonly created_at: string
  readonly updated_at: string
}

/** A search of a user's items. */
export interface Search {
  /** The labels the items' namespaces start with (none: every item). */
  readonly prefix: ReadonlyArray<string>
  /** Top-level fields of the value, each equal (as JSON) to the one given. */
  readonly filter: Readonly<Record<string, unknown>>
  /** A case-insensitive substring of the value's JSON text. */
  readonly query: string | undefined
  readonly limit: number
  readonly offset: number
}

/** Which of a user's namespaces to list. */
export interface NamespaceQuery {
  /** Labels the namespace starts with (`*`: any label). */
  readonly prefix: ReadonlyArray<string> | undefined
  /** Labels the namespace ends with (`*`: any label). */
  readonly suffix: ReadonlyArray<string> | undefined
  /** Namespaces cut to their first `maxDepth` labels (the same one listed once). */
  readonly maxDepth: number | undefined
  readonly limit: number
  readonly offset: number
}

/** The bytes of JSON a user's items hold, and those of one of them (see `Service.usage`). */
export interface Usage {
  readonly total: number
  readonly item: number
}

/** The bytes of an item's value as kept (its JSON, UTF-8). */
export const sizeOf = (value: Readonly<Record<string, unknown>>): number => Buffer.byteLength(JSON.stringify(value))

/**
 * The bytes an item weighs against its user's quota: its value's JSON, its namespace's labels joined and its key
 * (UTF-8), all of which are kept with it: counted by its value alone, items of an empty value and the longest
 * address kept some 5 KB each while the quota saw 2 bytes.
 */
export const weightOf = (
  namespace: ReadonlyArray<string>,
  key: string,
  value: Readonly<Record<string, unknown>>
): number => sizeOf(value) + Buffer.byteLength(joined(namespace)) + Buffer.byteLength(key)

/** The store of items. Every operation names its user. */
export interface Service {
  /** Makes the item, or replaces its value (its `created_at` kept, `updated_at` set to `now`). */
  readonly put: (
    userId: string,
    namespace: ReadonlyArray<string>,
    key: string,
    value: Readonly<Record<string, unknown>>,
    now: string
  ) => Effect.Effect<void, StoreError>
  readonly get: (
    userId: string,
    namespace: ReadonlyArray<string>,
    key: string
  ) => Effect.Effect<Option.Option<Item>, StoreError>
  /** Deletes the item; whether there was one. */
  readonly remove: (userId: string, namespace: ReadonlyArray<string>, key: string) => Effect.Effect<boolean, StoreError>
  /** The items matching, most recently updated first. */
  readonly search: (userId: string, search: Search) => Effect.Effect<ReadonlyArray<Item>, StoreError>
  /**
   * The bytes of JSON the user's items hold (`total`), and those of the item at `namespace` and `key` (`item`: 0
   * when there is none), which a put there replaces: what the store quota weighs a put against.
   */
  readonly usage: (
    userId: string,
    namespace: ReadonlyArray<string>,
    key: string
  ) => Effect.Effect<Usage, StoreError>
  /** The namespaces holding the user's items, in order of their labels. */
  readonly namespaces: (
    userId: string,
    query: NamespaceQuery
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, StoreError>
}

/** The store of LangGraph's items. */
export class StoreItems extends Context.Tag("antler/gateway/StoreItems")<StoreItems, Service>() {}

// ---------------------------------------------------------------------------------------------------------
// What every implementation answers alike (pure)

/** A namespace as kept: its labels joined with "." (no label holds one). */
export const joined = (namespace: ReadonlyArray<string>): string => namespace.join(".")

/** A kept namespace's labels. */
export const labelsOf = (text: string): ReadonlyArray<string> => text.split(".")

/** Whether `namespace` starts with the labels of `prefix` (exactly, or any label where `wildcard` allows `*`). */
export const startsWith = (namespace: ReadonlyArray<string>, prefix: ReadonlyArray<string>, wildcard = false) =>
  prefix.length <= namespace.length &&
  prefix.every((label, i) => (wildcard && label === "*") || namespace[i] === label)

/** Whether `namespace` ends with the labels of `suffix` (`*`: any label). */
export const endsWith = (namespace: ReadonlyArray<string>, suffix: ReadonlyArray<string>) =>
  suffix.length <= namespace.length &&
  suffix.every((label, i) => label === "*" || namespace[namespace.length - suffix.length + i] === label)

/** Whether a value has every field of `filter` (equal as JSON) and, with a query, holds it in its JSON text. */
export const matches = (
  value: Readonly<Record<string, unknown>>,
  filter: Readonly<Record<string, unknown>>,
  query: string | undefined
): boolean =>
  Object.entries(filter).every(([field, expected]) =>
    Object.hasOwn(value, field) && sameJson(value[field], expected)
  ) &&
  (query === undefined || query === "" || JSON.stringify(value).toLowerCase().includes(query.toLowerCase()))

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** The order of search results: the most recently updated first, then by namespace and key. */
export const newestFirst = (a: Item, b: Item): number =>
  compareText(b.updated_at, a.updated_at) || compareText(joined(a.namespace), joined(b.namespace)) ||
  compareText(a.key, b.key)

/** The namespaces a listing answers of those holding items (each once, in order of their labels). */
export const listed = (
  namespaces: ReadonlyArray<ReadonlyArray<string>>,
  query: NamespaceQuery
): ReadonlyArray<ReadonlyArray<string>> => {
  const kept = new Map<string, ReadonlyArray<string>>()
  for (const namespace of namespaces) {
    if (query.prefix !== undefined && !startsWith(namespace, query.prefix, true)) continue
    if (query.suffix !== undefined && !endsWith(namespace, query.suffix)) continue
    const cut = query.maxDepth === undefined ? namespace : namespace.slice(0, query.maxDepth)
    kept.set(JSON.stringify(cut), cut)
  }
  const ordered = [...kept.values()].sort((a, b) => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const order = compareText(a[i]!, b[i]!)
      if (order !== 0) return order
    }
    return a.length - b.length
  })
  return ordered.slice(query.offset, query.offset + query.limit)
}

// ---------------------------------------------------------------------------------------------------------
// Over SQL

/** The table (the same statements for SQLite and PostgreSQL). */
export const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS antler_store_items (
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    item_key TEXT NOT NULL,
    value TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, namespace, item_key)
  )`,
  `CREATE INDEX IF NOT EXISTS antler_store_items_updated ON antler_store_items (user_id, updated_at)`
]

const ItemRow = Schema.Struct({
  namespace: Schema.String,
  item_key: Schema.String,
  value: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  created_at: Schema.String,
  updated_at: Schema.String
})

const decodeItems = Schema.decodeUnknownEither(Schema.Array(ItemRow))

const itemsOf = (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<Item>, StoreError> =>
  Either.match(decodeItems(rows), {
    onLeft: (error) =>
      Effect.fail(
        new StoreError({
          operation: "read",
          message: `A row of the store's items is not one this build reads: ${error.message}`
        })
      ),
    onRight: (decoded) =>
      Effect.succeed(decoded.map((row) => ({
        namespace: labelsOf(row.namespace),
        key: row.item_key,
        value: row.value,
        created_at: row.created_at,
        updated_at: row.updated_at
      })))
  })

/** Rows read at a time while a search filters them. */
const PAGE = 200

const COLUMNS = "SELECT namespace, item_key, value, created_at, updated_at FROM antler_store_items"

/**
 * The user's items under `prefix`, as a condition and its parameters: the namespace itself, or one starting with
 * it and a "." (compared by characters, as both databases count them: code points).
 */
const underPrefix = (userId: string, prefix: ReadonlyArray<string>): readonly [string, ReadonlyArray<unknown>] => {
  if (prefix.length === 0) return ["user_id = ?", [userId]]
  const head = `${joined(prefix)}.`
  return [
    "user_id = ? AND (namespace = ? OR substr(namespace, 1, ?) = ?)",
    [userId, joined(prefix), Array.from(head).length, head]
  ]
}

/** The store over a database's `Sql` (its table made when missing). */
export const make = (sql: Sql): Effect.Effect<Service, StoreError> =>
  Effect.gen(function*() {
    for (const statement of MIGRATIONS) yield* sql.query(statement, [])
    return {
      put: (userId, namespace, key, value, now) => {
        const text = JSON.stringify(value)
        const weight = Buffer.byteLength(text) + Buffer.byteLength(joined(namespace)) + Buffer.byteLength(key)
        return Effect.asVoid(sql.query(
          "INSERT INTO antler_store_items (user_id, namespace, item_key, value, size, created_at, updated_at) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, namespace, item_key) " +
            "DO UPDATE SET value = excluded.value, size = excluded.size, updated_at = excluded.updated_at",
          [userId, joined(namespace), key, text, weight, now, now]
        ))
      },
      usage: (userId, namespace, key) =>
        Effect.map(
          sql.query(
            "SELECT COALESCE(SUM(size), 0) AS total, " +
              "COALESCE(SUM(CASE WHEN namespace = ? AND item_key = ? THEN size ELSE 0 END), 0) AS item " +
              "FROM antler_store_items WHERE user_id = ?",
            [joined(namespace), key, userId]
          ),
          // (PostgreSQL's sums are bigints, read as text)
          ([row]) => ({ total: Number(row?.total ?? 0), item: Number(row?.item ?? 0) })
        ),
      get: (userId, namespace, key) =>
        Effect.map(
          Effect.flatMap(
            sql.query(
              `${COLUMNS} WHERE user_id = ? AND namespace = ? AND item_key = ?`,
              [userId, joined(namespace), key]
            ),
            itemsOf
          ),
          (items) => Option.fromNullable(items[0])
        ),
      remove: (userId, namespace, key) =>
        Effect.map(
          sql.query(
            "DELETE FROM antler_store_items WHERE user_id = ? AND namespace = ? AND item_key = ? RETURNING item_key",
            [userId, joined(namespace), key]
          ),
          (rows) => rows.length > 0
        ),
      search: (userId, search) =>
        Effect.gen(function*() {
          const [where, params] = underPrefix(userId, search.prefix)
          const ORDER = "ORDER BY updated_at DESC, namespace, item_key"
          const filtered = Object.keys(search.filter).length > 0 || (search.query ?? "") !== ""
          if (!filtered) {
            return yield* Effect.flatMap(
              sql.query(
                `${COLUMNS} WHERE ${where} ${ORDER} LIMIT ? OFFSET ?`,
                [...params, search.limit, search.offset]
              ),
              itemsOf
            )
          }
          // the filter and the query are read here (no JSON operators shared by both databases): a page at a time,
          // each from where the last one ended (in the same order), so a long search never skips rows again
          const found: Array<Item> = []
          const wanted = search.offset + search.limit
          let after: Item | undefined
          while (found.length < wanted) {
            const [from, last] = after === undefined
              ? ["", []]
              : [
                " AND (updated_at < ? OR (updated_at = ? AND (namespace > ? OR (namespace = ? AND item_key > ?))))",
                [after.updated_at, after.updated_at, joined(after.namespace), joined(after.namespace), after.key]
              ]
            const page = yield* Effect.flatMap(
              sql.query(`${COLUMNS} WHERE ${where}${from} ${ORDER} LIMIT ?`, [...params, ...last, PAGE]),
              itemsOf
            )
            for (const item of page) if (matches(item.value, search.filter, search.query)) found.push(item)
            if (page.length < PAGE) break
            after = page[page.length - 1]
          }
          return found.slice(search.offset, wanted)
        }),
      namespaces: (userId, query) =>
        Effect.map(
          sql.query("SELECT DISTINCT namespace FROM antler_store_items WHERE user_id = ?", [userId]),
          (rows) => listed(rows.map((row) => labelsOf(String(row.namespace))), query)
        )
    }
  })
