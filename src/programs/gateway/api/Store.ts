/**
 * LangGraph's store, declared (the paths and shapes of LangGraph's server, which `@langchain/langgraph-sdk`'s
 * `client.store` calls): JSON items under a namespace (a path of labels) and a key. Each user has their own
 * items: another user's are none (never listed, read, changed nor deleted). Implemented in `handlers/Store.ts`
 * over `store/StoreItems.ts`.
 *
 * What a request may hold is bounded, and refused past the bounds with a 422 naming the field: at most
 * `MAX_DEPTH` labels of at most `MAX_LABEL` characters each (not empty, no "."), keys of at most `MAX_KEY`
 * characters (not empty), values of at most `MAX_VALUE_BYTES` of JSON. There is no vector index: a search's
 * `query` is a case-insensitive substring of the value's JSON text; `filter` compares top-level fields of the
 * value whole (operators such as `$gt` are refused); `index` and `ttl` are read and not applied (items do not
 * expire).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord } from "./Threads.js"

/** The most labels of a namespace. */
export const MAX_DEPTH = 16

/** The most characters of a namespace label. */
export const MAX_LABEL = 256

/** The most characters of a key. */
export const MAX_KEY = 1024

/** The most bytes of an item's value, as JSON (1 MiB). */
export const MAX_VALUE_BYTES = 1024 * 1024

/** The most characters of a search's query. */
export const MAX_QUERY = 1000

/** The most fields of a search's filter. */
export const MAX_FILTER_FIELDS = 100

/** The most items or namespaces one request answers. */
export const MAX_LIMIT = 1000

const shown = (text: string) => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text)

/** A namespace label: not empty, no ".", at most `MAX_LABEL` characters. */
export const Label = Schema.String.pipe(
  Schema.filter((label) =>
    label === ""
      ? "a namespace label may not be empty"
      : label.includes(".")
      ? `a namespace label may not contain "." (${shown(label)})`
      : label.length > MAX_LABEL
      ? `a namespace label has at most ${MAX_LABEL} characters (this one has ${label.length})`
      : undefined
  )
).annotations({ description: `A label: not empty, no ".", at most ${MAX_LABEL} characters` })

/** Labels of a namespace (or of a prefix or suffix of one), at most `MAX_DEPTH` of them. */
export const Labels = Schema.Array(Label).pipe(
  Schema.filter((labels) =>
    labels.length > MAX_DEPTH
      ? `a namespace has at most ${MAX_DEPTH} labels (this one has ${labels.length})`
      : undefined
  )
)

/** An item's namespace: at least one label; the first not `langgraph` (LangGraph's own). */
export const Namespace = Labels.pipe(
  Schema.filter((labels) =>
    labels.length === 0
      ? "an item's namespace has at least one label"
      : labels[0] === "langgraph"
      ? "the first label of a namespace may not be \"langgraph\" (LangGraph keeps it for its own)"
      : undefined
  )
).annotations({ description: `The namespace's labels (1 to ${MAX_DEPTH})` })

/** An item's key: not empty, at most `MAX_KEY` characters. */
export const Key = Schema.String.pipe(
  Schema.filter((key) =>
    key === ""
      ? "a key may not be empty"
      : key.length > MAX_KEY
      ? `a key has at most ${MAX_KEY} characters (this one has ${key.length})`
      : undefined
  )
).annotations({ description: `The item's key (1 to ${MAX_KEY} characters)` })

/** A filter value that is an object of operators (`{"$gt": 1}`), which is refused. */
const isOperator = (value: unknown) =>
  typeof value === "object" && value !== null && !Array.isArray(value) &&
  Object.keys(value).some((key) => key.startsWith("$"))

/** A search's filter: top-level fields of the value and the values they have (compared whole). */
export const Filter = Schema.Record({
  key: Schema.String,
  value: Schema.Unknown.pipe(Schema.filter((value) =>
    isOperator(value)
      ? "filter operators (such as $gt) are not supported: give the value the field has, compared whole"
      : undefined
  ))
}).pipe(
  Schema.filter((filter) =>
    Object.keys(filter).length > MAX_FILTER_FIELDS
      ? `a filter has at most ${MAX_FILTER_FIELDS} fields`
      : undefined
  )
).annotations({ description: "Top-level fields of the value and the value each has (JSON equality)" })

const Limit = (fallback: number) =>
  Schema.Int.pipe(Schema.between(1, MAX_LIMIT)).annotations({ description: `1 to ${MAX_LIMIT} (default ${fallback})` })
const Offset = Schema.Int.pipe(Schema.nonNegative())

/** `PUT /store/items` */
export const PutItem = Schema.Struct({
  namespace: Namespace,
  key: Key,
  value: JsonRecord.annotations({ description: `The item's value: a JSON object of at most ${MAX_VALUE_BYTES} bytes` }),
  index: Schema.optional(Schema.NullOr(Schema.Union(
    Schema.Literal(false),
    Schema.Array(Schema.String.pipe(Schema.maxLength(MAX_KEY))).pipe(Schema.maxItems(MAX_FILTER_FIELDS))
  ))).annotations({ description: "Read and not applied (no vector index)" }),
  ttl: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.nonNegative())))
    .annotations({ description: "Read and not applied (items do not expire)" })
})
export type PutItem = typeof PutItem.Type

/** `DELETE /store/items` */
export const DeleteItem = Schema.Struct({ namespace: Namespace, key: Key })

/** `GET /store/items` */
export const GetItemQuery = Schema.Struct({
  namespace: Schema.optional(Schema.String.annotations({ description: "The namespace's labels joined with \".\"" })),
  key: Schema.String.annotations({ description: "The item's key" }),
  refresh_ttl: Schema.optional(Schema.String.annotations({ description: "Read and not applied" }))
})

/** `POST /store/items/search` */
export const SearchItems = Schema.Struct({
  namespace_prefix: Labels.annotations({ description: "The labels the items' namespaces start with (none: all)" }),
  filter: Schema.optional(Schema.NullOr(Filter)),
  limit: Schema.optional(Schema.NullOr(Limit(10))),
  offset: Schema.optional(Schema.NullOr(Offset)),
  query: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(MAX_QUERY)))).annotations({
    description: "A case-insensitive substring of the value's JSON text (no vector search)"
  }),
  refresh_ttl: Schema.optional(Schema.NullOr(Schema.Boolean))
})
export type SearchItems = typeof SearchItems.Type

/** `POST /store/namespaces` */
export const ListNamespaces = Schema.Struct({
  prefix: Schema.optional(Schema.NullOr(Labels.annotations({ description: "Leading labels (`*`: any label)" }))),
  suffix: Schema.optional(Schema.NullOr(Labels.annotations({ description: "Trailing labels (`*`: any label)" }))),
  max_depth: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  limit: Schema.optional(Schema.NullOr(Limit(100))),
  offset: Schema.optional(Schema.NullOr(Offset))
})
export type ListNamespaces = typeof ListNamespaces.Type

/** LangGraph's Item. */
export const ItemObject = Schema.Struct({
  namespace: Schema.Array(Schema.String),
  key: Schema.String,
  value: JsonRecord,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "StoreItem" })

/** Items found. */
export const SearchResult = Schema.Struct({ items: Schema.Array(ItemObject) })

/** Namespaces found. */
export const NamespaceList = Schema.Struct({ namespaces: Schema.Array(Schema.Array(Schema.String)) })

const ItemRefusals = refusal(
  422,
  `A namespace, key or value out of bounds (${MAX_DEPTH} labels of ${MAX_LABEL} characters without ".", keys of ` +
    `${MAX_KEY} characters, values of ${MAX_VALUE_BYTES} bytes of JSON), or a body of the wrong shape (the field named)`
)

/** The store group. */
export const group = HttpApiGroup.make("store")
  .add(
    HttpApiEndpoint.put("putItem", "/store/items")
      .setPayload(PutItem)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(BodyRefusals)
      .addError(ItemRefusals)
      .addError(QuotaRefusal)
      .annotate(OpenApi.Summary, "Store an item, or replace its value")
  )
  .add(
    HttpApiEndpoint.get("getItem", "/store/items")
      .setUrlParams(GetItemQuery)
      .addSuccess(Schema.NullOr(ItemObject))
      .addError(ItemRefusals)
      .annotate(OpenApi.Summary, "An item of the user's (null when there is none)")
  )
  .add(
    HttpApiEndpoint.del("deleteItem", "/store/items")
      .setPayload(DeleteItem)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(BodyRefusals)
      .addError(ItemRefusals)
      .annotate(OpenApi.Summary, "Delete an item of the user's (none there: nothing to do)")
  )
  .add(
    HttpApiEndpoint.post("searchItems", "/store/items/search")
      .setPayload(SearchItems)
      .addSuccess(SearchResult)
      .addError(BodyRefusals)
      .addError(ItemRefusals)
      .annotate(OpenApi.Summary, "The user's items under a namespace prefix, most recently updated first")
  )
  .add(
    HttpApiEndpoint.post("listNamespaces", "/store/namespaces")
      .setPayload(ListNamespaces)
      .addSuccess(NamespaceList)
      .addError(BodyRefusals)
      .addError(ItemRefusals)
      .annotate(OpenApi.Summary, "The namespaces of the user's items")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "LangGraph's store: JSON items under namespaces, each user's own")
