/**
 * The memory endpoints (declared in `api/Memory.ts`) over the app's `Memory` service: each request reads and
 * changes its own user's memory only (`{home}/users/{user}/memory.json`), through the service's writes, so that
 * what is stored is redacted and within the memory limits (`memory.backend_config`) however it came. A fact
 * longer than `max_fact_chars` is refused rather than cut; an imported document is cut to the limits, as a file
 * written by hand is. A failure to read or write the file is logged with its cause; the client is told what
 * failed, never where the file is. The limits, and what is injected, are `config.yaml`'s as it is at each request
 * when the gateway takes its edits (`Live`).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { Memory, type MemoryError } from "../../../services/Memory.js"
import * as MemoryDoc from "../../../state/Memory.js"
import * as MemoryLimits from "../../../state/MemoryLimits.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import * as MemoryApi from "../api/Memory.js"
import { describeParseError, fail, GatewayError } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import { json } from "./Http.js"
import * as Live from "./Live.js"
import { isRecord, maskDeep } from "./McpShown.js"

/** A fact the user wrote (DeerFlow's fact source for one made through its settings). */
export const MANUAL_SOURCE = MemoryDoc.MANUAL_SOURCE

/** The document as DeerFlow answers it: without Antler's per-thread watermarks. */
export const shown = (doc: MemoryDoc.Document): typeof MemoryApi.MemoryDocument.Type => ({
  version: doc.version,
  lastUpdated: doc.lastUpdated,
  user: doc.user,
  history: doc.history,
  facts: doc.facts.map((fact) => ({ ...fact, category: MemoryDoc.categoryOf(fact) }))
})

const memoryFailed = (error: MemoryError) =>
  error.reason === "locked"
    ? Effect.fail(fail("conflict", "Memory changed concurrently; reload and retry."))
    : Effect.zipRight(
      Effect.logError(`memory endpoint: ${error.message}`),
      Effect.fail(
        new GatewayError({
          reason: "internal",
          message: error.reason === "corrupt"
            ? "Stored memory data is corrupted."
            : "The memory could not be read or written (see the server's log)."
        })
      )
    )

/** A change of the document that may be refused (the refusal leaves the document as it was). */
type Change = (doc: MemoryDoc.Document) => Either.Either<MemoryDoc.Document, GatewayError>

/** The memory endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "memory", (handlers) =>
    Effect.gen(function*() {
      const started = yield* Memory
      const config = yield* Live.config
      // the memory and its limits under `config.yaml`'s `memory` as it is at this request (an edit the gateway took)
      const settings = Effect.map(config, (app) => ({
        memory: started.under(app.config.memory),
        limits: {
          maxFacts: app.config.memory.backend_config.max_facts,
          maxFactChars: app.config.memory.backend_config.max_fact_chars,
          maxSummaryChars: app.config.memory.backend_config.max_summary_chars
        } satisfies MemoryLimits.Limits
      }))

      const scope = Effect.map(CurrentIdentity, (identity) => ({ userId: identity.user }))

      const answer = (doc: MemoryDoc.Document) => json(MemoryApi.MemoryDocument, shown(doc))

      const current = Effect.flatMap(
        Effect.zip(scope, settings),
        ([s, { memory }]) => Effect.catchAll(memory.load(s), memoryFailed)
      )

      /** Applies a change (refused: nothing is written), then answers the document as stored. */
      const change = (f: Change) =>
        Effect.gen(function*() {
          const s = yield* scope
          const { memory } = yield* settings
          const now = new Date(yield* Clock.currentTimeMillis).toISOString()
          const refused = yield* memory.modify(s, (doc) =>
            Either.match(f(doc), {
              onLeft: (error) => [error, doc] as const,
              onRight: (next) => [undefined, { ...next, lastUpdated: now }] as const
            })).pipe(Effect.catchAll(memoryFailed))
          if (refused !== undefined) return yield* refused
          return yield* Effect.catchAll(memory.load(s), memoryFailed)
        })

      const tooLong = (content: string, limits: MemoryLimits.Limits) =>
        content.length > limits.maxFactChars
          ? fail(
            "unprocessable",
            `content: a fact is at most ${limits.maxFactChars} characters (memory.backend_config.max_fact_chars); ` +
              `this one is ${content.length}.`
          )
          : undefined

      const duplicate = (doc: MemoryDoc.Document, content: string, except?: string) =>
        doc.facts.some((fact) => fact.id !== except && MemoryDoc.sameContent(fact.content, content))

      // (DeerFlow's 400 and words for text of spaces only)
      const blank = fail("bad_request", "Memory fact content cannot be empty.")

      const factNotFound = (id: string) => fail("not_found", `Memory fact '${id}' not found.`)

      // (DeerFlow's shared fields, `backend_config` as config.yaml has it, no defaults filled in, as DeerFlow
      // gives it back; its secret-named values masked)
      const configAnswer = Effect.map(config, (app): typeof MemoryApi.MemoryConfigAnswer.Type => {
        const { memory } = app.config
        const section = app.written?.["memory"]
        const written = isRecord(section) ? section["backend_config"] : undefined
        return {
          enabled: memory.enabled,
          mode: memory.mode,
          injection_enabled: memory.injection_enabled,
          shutdown_flush_timeout_seconds: memory.shutdown_flush_timeout_seconds,
          manager_class: memory.manager_class,
          backend_config: app.written === undefined
            ? memory.backend_config
            : isRecord(written)
            ? maskDeep(written) as Record<string, unknown>
            : {}
        }
      })

      return handlers
        .handleRaw("getMemoryConfig", () =>
          Effect.map(configAnswer, (settings) => json(MemoryApi.MemoryConfigAnswer, settings)))
        .handleRaw("getMemoryStatus", () =>
          Effect.map(
            Effect.zip(configAnswer, current),
            ([settings, doc]) => json(MemoryApi.MemoryStatus, { config: settings, data: shown(doc) })
          ))
        .handleRaw("getMemory", () => Effect.map(current, answer))
        .handleRaw("reloadMemory", () => Effect.map(current, answer))
        .handleRaw("exportMemory", () => Effect.map(current, answer))
        .handleRaw("clearMemory", () =>
          Effect.map(change((doc) => Either.right({ ...MemoryDoc.empty(), threads: doc.threads })), answer))
        .handleRaw("importMemory", () =>
          Effect.gen(function*() {
            const raw = yield* Body.json(Schema.Unknown)
            const { limits } = yield* settings
            // no more facts than can be kept are decoded (the rest are cut as a hand-written file's are)
            const bounded = MemoryLimits.capRawDocument(MemoryDoc.withFactIds(raw), limits)
            const imported = yield* Either.match(Schema.decodeUnknownEither(MemoryDoc.Document)(bounded.value), {
              onLeft: (error) => Effect.fail(fail("unprocessable", describeParseError(error))),
              onRight: Effect.succeed
            })
            // the watermarks stay the server's: an imported document does not decide which turns were read
            return answer(yield* change((doc) => Either.right({ ...imported, threads: doc.threads })))
          }))
        .handleRaw("createMemoryFact", () =>
          Effect.gen(function*() {
            const request = yield* Body.json(MemoryApi.FactCreate)
            const content = request.content.trim()
            if (content === "") return yield* blank
            const long = tooLong(content, (yield* settings).limits)
            if (long !== undefined) return yield* long
            const id = `fact_${randomUUID().replace(/-/g, "").slice(0, 12)}`
            const createdAt = new Date(yield* Clock.currentTimeMillis).toISOString()
            const doc = yield* change((doc) => {
              if (duplicate(doc, content)) {
                return Either.left(fail("conflict", "A fact with the same content already exists."))
              }
              const fact: MemoryDoc.Fact = {
                id,
                content,
                category: MemoryDoc.categoryName(request.category),
                confidence: request.confidence ?? 0.5,
                createdAt,
                source: MANUAL_SOURCE
              }
              return Either.right({ ...doc, facts: [...doc.facts, fact] })
            })
            if (!doc.facts.some((fact) => fact.id === id)) {
              // (DeerFlow's words: the policy may be hybrid-v1, which keeps more than the most confident)
              return yield* fail(
                "conflict",
                "Fact was not stored because the configured memory.max_facts capacity policy evicted it"
              )
            }
            return answer(doc)
          }))
        .handleRaw("updateMemoryFact", ({ path }) =>
          Effect.gen(function*() {
            const request = yield* Body.json(MemoryApi.FactPatch)
            const content = request.content == null ? undefined : request.content.trim()
            if (content === "") return yield* blank
            const long = content === undefined ? undefined : tooLong(content, (yield* settings).limits)
            if (long !== undefined) return yield* long
            const doc = yield* change((doc) => {
              const at = doc.facts.findIndex((fact) => fact.id === path.fact_id)
              if (at < 0) return Either.left(factNotFound(path.fact_id))
              if (content !== undefined && duplicate(doc, content, path.fact_id)) {
                return Either.left(fail("conflict", "A fact with the same content already exists."))
              }
              const fact = doc.facts[at]!
              const facts = [...doc.facts]
              facts[at] = {
                ...fact,
                content: content ?? fact.content,
                ...(request.category == null ? {} : { category: MemoryDoc.categoryName(request.category) }),
                confidence: request.confidence ?? fact.confidence
              }
              return Either.right({ ...doc, facts })
            })
            return answer(doc)
          }))
        .handleRaw("deleteMemoryFact", ({ path }) =>
          Effect.map(
            change((doc) =>
              doc.facts.some((fact) => fact.id === path.fact_id)
                ? Either.right({ ...doc, facts: doc.facts.filter((fact) => fact.id !== path.fact_id) })
                : Either.left(factNotFound(path.fact_id))
            ),
            answer
          ))
    }))
