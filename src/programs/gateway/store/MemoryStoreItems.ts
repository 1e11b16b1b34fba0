/**
 * LangGraph's store in the process (lost when it stops): for tests and embedders that keep nothing on disk.
 * Answers as the SQL stores do (`StoreItems`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as StoreItems from "./StoreItems.js"

interface Kept extends StoreItems.Item {
  readonly userId: string
}

const idOf = (userId: string, namespace: ReadonlyArray<string>, key: string) =>
  JSON.stringify([userId, StoreItems.joined(namespace), key])

const itemOf = ({ userId: _userId, ...item }: Kept): StoreItems.Item => item

/** A store of its own, empty. */
export const make: Effect.Effect<StoreItems.Service> = Effect.map(
  Ref.make<ReadonlyMap<string, Kept>>(new Map()),
  (ref): StoreItems.Service => {
    const ofUser = (userId: string) =>
      Effect.map(Ref.get(ref), (items) => [...items.values()].filter((item) => item.userId === userId))
    return {
      put: (userId, namespace, key, value, now) =>
        Ref.update(ref, (items) => {
          const id = idOf(userId, namespace, key)
          const created = items.get(id)?.created_at ?? now
          return new Map(items).set(id, {
            userId,
            namespace: [...namespace],
            key,
            value: structuredClone(value),
            created_at: created,
            updated_at: now
          })
        }),
      get: (userId, namespace, key) =>
        Effect.map(Ref.get(ref), (items) => Option.map(Option.fromNullable(items.get(idOf(userId, namespace, key))), itemOf)),
      remove: (userId, namespace, key) =>
        Ref.modify(ref, (items) => {
          const id = idOf(userId, namespace, key)
          if (!items.has(id)) return [false, items]
          const next = new Map(items)
          next.delete(id)
          return [true, next]
        }),
      search: (userId, search) =>
        Effect.map(ofUser(userId), (items) =>
          items
            .filter((item) =>
              StoreItems.startsWith(item.namespace, search.prefix) &&
              StoreItems.matches(item.value, search.filter, search.query)
            )
            .map(itemOf)
            .sort(StoreItems.newestFirst)
            .slice(search.offset, search.offset + search.limit)),
      namespaces: (userId, query) =>
        Effect.map(ofUser(userId), (items) => StoreItems.listed(items.map((item) => item.namespace), query))
    }
  }
)

/** The store layer in the process. */
export const layer = (): Layer.Layer<StoreItems.StoreItems> => Layer.effect(StoreItems.StoreItems, make)
