/**
 * DeerFlow's memory endpoints, declared (its settings screen "Memory"): the request's user's long-term memory
 * document (summaries and facts, DeerMem's shape), cleared, exported, imported, and its facts created, changed
 * and deleted one by one; how memory is set up (`/memory/config`), and that with the user's memory
 * (`/memory/status`). Every answer that changes memory is the memory document after the change, as DeerFlow
 * answers. Implemented in `handlers/Memory.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals } from "./Threads.js"

/** The longest fact category taken. */
export const MAX_CATEGORY_CHARS = 64

/** A summary and when it was last rewritten. */
export const MemorySection = Schema.Struct({ summary: Schema.String, updatedAt: Schema.String })

/** One remembered fact, as DeerFlow shows it. */
export const MemoryFact = Schema.Struct({
  id: Schema.String,
  content: Schema.String,
  category: Schema.String,
  confidence: Schema.Number,
  createdAt: Schema.String,
  source: Schema.String.annotations({ description: "The thread it was learned in, or `manual` / `tool`" }),
  sourceError: Schema.optional(Schema.String).annotations({
    description: "For a correction: the prior mistake or wrong approach"
  }),
  consolidatedAt: Schema.optional(Schema.String).annotations({
    description: "For a fact consolidation merged from others (source `consolidation`): when"
  }),
  consolidatedFrom: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "For a fact consolidation merged from others: the ids of the facts it replaced"
  })
}).annotations({ identifier: "MemoryFact" })

/** The memory document (DeerFlow's `MemoryResponse`). */
export const MemoryDocument = Schema.Struct({
  version: Schema.String,
  lastUpdated: Schema.String,
  user: Schema.Struct({ workContext: MemorySection, personalContext: MemorySection, topOfMind: MemorySection }),
  history: Schema.Struct({
    recentMonths: MemorySection,
    earlierContext: MemorySection,
    longTermBackground: MemorySection
  }),
  facts: Schema.Array(MemoryFact)
}).annotations({ identifier: "MemoryDocument" })

// (blank text is refused by the handler, with DeerFlow's 400; an empty string here, with its 422)
const Content = Schema.String.pipe(Schema.minLength(1, { message: () => "Memory fact content cannot be empty." }))
const Category = Schema.String.pipe(Schema.maxLength(MAX_CATEGORY_CHARS))
const Confidence = Schema.Number.pipe(Schema.between(0, 1))

/** `POST /memory/facts` (a null category or confidence is refused, as DeerFlow's `FactCreateRequest` does) */
export const FactCreate = Schema.Struct({
  content: Content,
  category: Schema.optional(Category),
  confidence: Schema.optional(Confidence)
})

/** `PATCH /memory/facts/{fact_id}`: the fields given change, the others stay. */
export const FactPatch = Schema.Struct({
  content: Schema.optional(Schema.NullOr(Content)),
  category: Schema.optional(Schema.NullOr(Category)),
  confidence: Schema.optional(Schema.NullOr(Confidence))
})

/** How memory is set up (DeerFlow's `MemoryConfigResponse`: `config.yaml`'s `memory` as the gateway runs it). */
export const MemoryConfigAnswer = Schema.Struct({
  enabled: Schema.Boolean,
  mode: Schema.Literal("middleware", "tool"),
  injection_enabled: Schema.Boolean,
  shutdown_flush_timeout_seconds: Schema.Number,
  manager_class: Schema.String,
  backend_config: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "MemoryConfig" })

/** How memory is set up and what the user's holds (DeerFlow's `MemoryStatusResponse`). */
export const MemoryStatus = Schema.Struct({ config: MemoryConfigAnswer, data: MemoryDocument })
  .annotations({ identifier: "MemoryStatus" })

const FactPath = Schema.Struct({ fact_id: Schema.String })

const MemoryFailed = Schema.Union(
  refusal(409, "Memory changed concurrently; reload and retry"),
  refusal(500, "Stored memory data is corrupted, or cannot be read or written")
)
const FactNotFound = refusal(404, "No such fact in this user's memory")

/** The memory group (served under `/api`). */
export const group = HttpApiGroup.make("memory")
  .add(
    HttpApiEndpoint.get("getMemory", "/memory")
      .addSuccess(MemoryDocument)
      .addError(MemoryFailed)
      .annotate(OpenApi.Summary, "The user's memory")
  )
  .add(
    HttpApiEndpoint.get("getMemoryConfig", "/memory/config")
      .addSuccess(MemoryConfigAnswer)
      .annotate(OpenApi.Summary, "How memory is set up (config.yaml's memory section, as the gateway runs it)")
  )
  .add(
    HttpApiEndpoint.get("getMemoryStatus", "/memory/status")
      .addSuccess(MemoryStatus)
      .addError(MemoryFailed)
      .annotate(OpenApi.Summary, "How memory is set up, and the user's memory")
  )
  .add(
    HttpApiEndpoint.post("reloadMemory", "/memory/reload")
      .addSuccess(MemoryDocument)
      .addError(MemoryFailed)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "The user's memory, read again from its file")
  )
  .add(
    HttpApiEndpoint.del("clearMemory", "/memory")
      .addSuccess(MemoryDocument)
      .addError(MemoryFailed)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Forget everything the user's memory holds")
  )
  .add(
    HttpApiEndpoint.get("exportMemory", "/memory/export")
      .addSuccess(MemoryDocument)
      .addError(MemoryFailed)
      .annotate(OpenApi.Summary, "The user's memory, to keep or move")
  )
  .add(
    HttpApiEndpoint.post("importMemory", "/memory/import")
      .setPayload(MemoryDocument)
      .addSuccess(MemoryDocument)
      .addError(BodyRefusals)
      .addError(MemoryFailed)
      .annotate(OpenApi.Summary, "Replace the user's memory with a document (cut to the memory limits)")
  )
  .add(
    HttpApiEndpoint.post("createMemoryFact", "/memory/facts")
      .setPayload(FactCreate)
      .addSuccess(MemoryDocument)
      .addError(BodyRefusals)
      .addError(MemoryFailed)
      .addError(refusal(409, "A fact with the same content exists, or memory.max_facts left no room for it"))
      .annotate(OpenApi.Summary, "Add a fact to the user's memory")
  )
  .add(
    HttpApiEndpoint.patch("updateMemoryFact", "/memory/facts/:fact_id")
      .setPath(FactPath)
      .setPayload(FactPatch)
      .addSuccess(MemoryDocument)
      .addError(BodyRefusals)
      .addError(FactNotFound)
      .addError(MemoryFailed)
      .annotate(OpenApi.Summary, "Change a fact of the user's memory")
  )
  .add(
    HttpApiEndpoint.del("deleteMemoryFact", "/memory/facts/:fact_id")
      .setPath(FactPath)
      .addSuccess(MemoryDocument)
      .addError(FactNotFound)
      .addError(MemoryFailed)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete a fact of the user's memory")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The user's long-term memory (DeerFlow's settings: Memory)")
