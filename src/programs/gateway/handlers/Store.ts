/**
 * The store endpoints (declared in `api/Store.ts`), over `StoreItems`: each request reads and changes only its
 * user's items. Bodies and the query are decoded at the boundary; a value larger than `MAX_VALUE_BYTES` of JSON is
 * refused (422) before it is stored, and one that would take the user's items past
 * `gateway.quotas.max_store_bytes_per_user` is refused (403). A missing item reads as `null` (200), as LangGraph's
 * server answers and the SDK's `getItem` expects; deleting one is not an error.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StoreError } from "../../../services/RunContext.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { describeParseError, fail, GatewayError } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Api from "../api/Store.js"
import * as Body from "../Body.js"
import { QuotaExceeded, Quotas } from "../Quotas.js"
import * as StoreItems from "../store/StoreItems.js"
import { quotaRefused } from "./Access.js"
import { json } from "./Http.js"

const internal = (error: StoreError) => new GatewayError({ reason: "internal", message: error.message, cause: error })

/** The namespace and key of `GET /store/items` (the namespace's labels joined with "."). */
const ItemAddress = Schema.Struct({ namespace: Api.Labels, key: Api.Key })
const decodeAddress = Schema.decodeUnknownEither(ItemAddress, { errors: "all" })

/** What is wrong with a value of `size` bytes of JSON, if it is larger than `MAX_VALUE_BYTES`. */
const valueProblem = (size: number): string | undefined =>
  size > Api.MAX_VALUE_BYTES
    ? `value: ${size} bytes of JSON, more than the ${Api.MAX_VALUE_BYTES} (1 MiB) an item may hold.`
    : undefined

/** The store endpoints of `api` (the LangGraph API under one of its prefixes). */
export const layer = (api: LangGraphApi) =>
  HttpApiBuilder.group(api, "store", (handlers) =>
    Effect.gen(function*() {
      const store = yield* StoreItems.StoreItems
      const quotas = yield* Quotas
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis).toISOString())

      return handlers
        .handleRaw("putItem", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.PutItem)
            const size = StoreItems.sizeOf(request.value)
            const tooLarge = valueProblem(size)
            if (tooLarge !== undefined) return yield* fail("unprocessable", tooLarge)
            const at = yield* now
            yield* quotas.storeBytes(
              user,
              StoreItems.weightOf(request.namespace, request.key, request.value),
              store.usage(user, request.namespace, request.key),
              store.put(user, request.namespace, request.key, request.value, at)
            ).pipe(Effect.mapError((error) => error instanceof QuotaExceeded ? quotaRefused(error) : internal(error)))
            return HttpServerResponse.empty({ status: 204 })
          }))
        .handleRaw("getItem", ({ urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            // (no namespace, or an empty one, names none: no item is there, as LangGraph answers)
            const text = urlParams.namespace ?? ""
            const address = yield* Either.match(
              decodeAddress({ namespace: text === "" ? [] : text.split("."), key: urlParams.key }),
              {
                onLeft: (error) => Effect.fail(fail("unprocessable", describeParseError(error))),
                onRight: Effect.succeed
              }
            )
            const found = address.namespace.length === 0
              ? Option.none()
              : yield* Effect.mapError(store.get(user, address.namespace, address.key), internal)
            return json(Schema.NullOr(Api.ItemObject), Option.getOrNull(found))
          }))
        .handleRaw("deleteItem", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.DeleteItem)
            yield* Effect.mapError(store.remove(user, request.namespace, request.key), internal)
            return HttpServerResponse.empty({ status: 204 })
          }))
        .handleRaw("searchItems", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.SearchItems)
            const items = yield* Effect.mapError(
              store.search(user, {
                prefix: request.namespace_prefix,
                filter: request.filter ?? {},
                query: request.query ?? undefined,
                limit: request.limit ?? 10,
                offset: request.offset ?? 0
              }),
              internal
            )
            return json(Api.SearchResult, { items })
          }))
        .handleRaw("listNamespaces", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.ListNamespaces)
            const namespaces = yield* Effect.mapError(
              store.namespaces(user, {
                prefix: request.prefix != null && request.prefix.length > 0 ? request.prefix : undefined,
                suffix: request.suffix != null && request.suffix.length > 0 ? request.suffix : undefined,
                maxDepth: request.max_depth ?? undefined,
                limit: request.limit ?? 100,
                offset: request.offset ?? 0
              }),
              internal
            )
            return json(Api.NamespaceList, { namespaces })
          }))
    }))
