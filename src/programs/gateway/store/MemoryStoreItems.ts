/**
 * LangGraph's store in the process (lost when it stops): for tests and embedders that keep nothing on disk.
 * Answers as the SQL stores do (`StoreItems`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as StoreItems from "./StoreItems.js"

interface Kept extends StoreItems.Item {
  readonly userId: string
}

const idOf = (userId: string, namespace: ReadonlyArray<string>, key: string) =>
  JSON.stringify([userId, StoreItems.joined(namespace), key])

const itemOf = ({ userId: _userId, ...item }: Kept): StoreItems.Item => item

/** A store of its own, empty (its items in a map of this store's alone). */
export const make: Effect.Effect<StoreItems.Service> = Effect.sync((): StoreItems.Service => {
  const items = new Map<string, Kept>()
  const ofUser = (userId: string) => Effect.sync(() => [...items.values()].filter((item) => item.userId === userId))
  return {
    put: (userId, namespace, key, value, now) =>
      Effect.sync(() => {
        const id = idOf(userId, namespace, key)
        items.set(id, {
          userId,
          namespace: [...namespace],
          key,
          value: structuredClone(value),
          created_at: items.get(id)?.created_at ?? now,
          updated_at: now
        })
      }),
    get: (userId, namespace, key) =>
      Effect.sync(() => Option.map(Option.fromNullable(items.get(idOf(userId, namespace, key))), itemOf)),
    remove: (userId, namespace, key) => Effect.sync(() => items.delete(idOf(userId, namespace, key))),
    search: (userId, search) =>
      Effect.map(ofUser(userId), (kept) =>
        kept
          .filter((item) =>
            StoreItems.startsWith(item.namespace, search.prefix) &&
            StoreItems.matches(item.value, search.filter, search.query)
          )
          .map(itemOf)
          .sort(StoreItems.newestFirst)
          .slice(search.offset, search.offset + search.limit)),
    usage: (userId, namespace, key) =>
      Effect.map(ofUser(userId), (kept) => {
        const here = items.get(idOf(userId, namespace, key))
        return {
          total: kept.reduce((sum, item) => sum + StoreItems.weightOf(item.namespace, item.key, item.value), 0),
          item: here === undefined ? 0 : StoreItems.weightOf(here.namespace, here.key, here.value)
        }
      }),
    namespaces: (userId, query) =>
      Effect.map(ofUser(userId), (kept) => StoreItems.listed(kept.map((item) => item.namespace), query))
  }
})

/** The store layer in the process. */
export const layer = (): Layer.Layer<StoreItems.StoreItems> => Layer.effect(StoreItems.StoreItems, make)
