/**
 * Memory (SPEC §5.22, lead chain slot #23): after each run, the thread's conversation goes to the app's memory
 * update queue (debounced there; one internal model call per update, never streamed to the user). In memory
 * tool mode (`memory.mode: tool`) the model reads and writes facts itself with `memory_search`, `memory_add`,
 * `memory_update` and `memory_delete`, and nothing is queued.
 *
 * Subagents have no memory: this middleware belongs to the lead agent only.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Authz from "../services/Authorization.js"
import type { Memory, MemoryError, Scope } from "../services/Memory.js"
import { RunContext, RunState } from "../services/RunContext.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import * as Tool from "../services/Tool.js"
import * as M from "../state/Message.js"
import * as MemoryDoc from "../state/Memory.js"
import * as AuthorizationMW from "./Authorization.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"
import type * as SummarizationEvent from "./summarization/Hooks.js"

/** Options of `layer`. */
export interface Options {
  readonly memory: Memory["Type"]
  /** The custom agent whose memory this is (default: the user's). */
  readonly agentName?: string | undefined
  /** With `authorization.enabled`: an update never uses a model the run's role may not (`Pending.allows`). */
  readonly authorization?: Authz.Authorization | undefined
  /** Whether the user's role may use a model, when known otherwise than from the run (a gateway compaction). */
  readonly allows?: ((model: string) => Effect.Effect<boolean>) | undefined
}

/** Whether the user's role may use a model: `options.allows`, else the run's principal's (none: any). */
const allowsOf = (options: Options) =>
  options.allows !== undefined || options.authorization === undefined
    ? Effect.succeed(options.allows)
    : Effect.map(
      Effect.serviceOption(RunContext),
      (context) => {
        const authz = options.authorization!
        if (context._tag === "None") return undefined
        const principal = AuthorizationMW.principalOfRun(authz, context.value)
        return (model: string) => Authz.allows(authz, principal, "model", "use", model)
      }
    )

/** The Memory middleware. Requires `RunContext` and `RunState`. */
export const layer = (options: Options): Middleware => {
  const memory = options.memory
  if (!memory.enabled) return MW.make({})
  const tools = memory.mode === "tool" ? memoryTools(options) : []
  return MW.make(
    Effect.gen(function*() {
      const context = yield* RunContext
      const state = yield* RunState
      if (memory.mode === "tool") return {}
      const allows = yield* allowsOf(options)
      // (the run's request secrets, as the model may have written one out itself: never read into memory, whose
      // store knows the app's secrets only)
      const masked = SkillSecrets.maskedTexts(SkillSecrets.entries(context.options.secrets).values())
      const after = Effect.flatMap(state.get, (current) =>
        current.messages.length === 0 ? Effect.void : memory.enqueue({
          threadId: context.threadId,
          userId: context.userId,
          agentName: options.agentName,
          messages: SkillSecrets.maskValue(current.messages, masked),
          modelName: context.options.modelName,
          allows
        }))
      // as DeerFlow's `after_agent`: a run that failed or was cancelled is not remembered
      return {
        run: (loop) =>
          Effect.tap(loop, (end) => (end.status === "success" || end.status === "interrupted" ? after : Effect.void))
      }
    }),
    { name: "Memory", tools }
  )
}

/**
 * Memory's before-summarisation hook (DeerFlow's `memory_flush_hook`): the messages Summarization is about to
 * remove from the thread are read for memory at once, since they will not be in the thread when its run ends.
 */
export const beforeCompaction = (options: Options): SummarizationEvent.Hook => {
  // (named as DeerFlow's: a failure of it is logged as `before_summarization hook memory_flush_hook failed`)
  const hook = {
    memory_flush_hook: (event: SummarizationEvent.SummarizationEvent) =>
      !options.memory.enabled || options.memory.mode === "tool"
        ? Effect.void
        // (inside a run, its request secrets masked, as at its end)
        : Effect.flatMap(Effect.all([allowsOf(options), Effect.serviceOption(RunContext)]), ([allows, run]) =>
          options.memory.enqueue({
            threadId: event.threadId,
            userId: event.userId,
            agentName: options.agentName ?? event.agentName,
            messages: Option.isNone(run) ? event.summarized : SkillSecrets.maskValue(
              event.summarized,
              SkillSecrets.maskedTexts(SkillSecrets.entries(run.value.options.secrets).values())
            ),
            modelName: event.modelName,
            allows,
            immediate: true
          }))
  }
  return hook.memory_flush_hook
}

// ---------------------------------------------------------------------------------------------------------
// Tool mode

const json = (value: unknown) => JSON.stringify(value)

/** A fact as DeerFlow's `memory_search` shows it (`id, content, category, confidence, createdAt, source`). */
const factView = (fact: MemoryDoc.Fact) => ({
  id: fact.id,
  content: fact.content,
  category: MemoryDoc.categoryOf(fact),
  confidence: fact.confidence,
  createdAt: fact.createdAt,
  source: fact.source
})

/** DeerFlow's answers of the writing tools: the fact's id and what was done, or the error. */
const done = (factId: string, status: "added" | "updated" | "deleted") => json({ fact_id: factId, status })
const notFound = (factId: string) => json({ error: `Fact not found: ${factId}` })

const Confidence = Schema.Number.pipe(Schema.between(0, 1))

/**
 * The tools' descriptions, DeerFlow's (its `tools.py` docstrings as LangChain's `@tool(parse_docstring=True)` gives
 * them to the model: the paragraphs before `Args:`, joined by a space); their answers are the JSON they describe.
 */
const DESCRIPTIONS = {
  memory_search: "Search existing facts by natural language query. Use this when you need to check what you already " +
    "know about the user\n- their preferences, past corrections, context, or any stored facts.",
  memory_add: "Store a new fact about the user or conversation context. Use this when the user shares something " +
    "worth remembering for future\nconversations - preferences, corrections, personal details, work context.\n" +
    "The fact persists across sessions and will be available via memory_search\nand automatic context injection.",
  memory_update: "Update an existing fact. Only provided fields are changed; omitted\nfields stay as-is. Use this " +
    "when a stored fact is outdated, incorrect, or needs refinement.\nFirst use memory_search to find the fact_id, " +
    "then update it.",
  memory_delete: "Delete a fact by its ID. Use this when a fact is no longer accurate or relevant. First use\n" +
    "memory_search to find the fact_id, then delete it."
} as const

/**
 * A memory failure as the model is told it (DeerFlow's tools answer `{"error": str(exc)}`): what failed, never
 * where the file is (the full message is logged), as the gateway's memory endpoints.
 */
const failed = (error: MemoryError) =>
  Effect.as(
    Effect.logWarning(`memory tool: ${error.message}`),
    json({
      error: error.reason === "locked"
        ? "The memory is being updated by another process; try again later."
        : error.reason === "corrupt"
        ? "The stored memory is not a memory document."
        : "The memory could not be read or written."
    })
  )

const memoryTools = (options: Options): ReadonlyArray<Tool.Tool> => {
  const memory = options.memory
  const scopeOf = Effect.map(RunContext, (c): Scope => ({ userId: c.userId, agentName: options.agentName }))
  const change = <A>(f: (doc: MemoryDoc.Document, now: string) => readonly [A, MemoryDoc.Document]) =>
    Effect.gen(function*() {
      const scope = yield* scopeOf
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      return yield* memory.modify(scope, (doc) => f(doc, now))
    }).pipe(Effect.catchTag("MemoryError", failed))
  // `max_facts` keeps the most confident facts when memory is written: a new fact less confident than all of them
  // is not stored, and the model is told so rather than given an id that names nothing (as in DeerFlow)
  const stored = (result: string): Effect.Effect<string, never, RunContext> => {
    const id = (JSON.parse(result) as { fact_id?: string }).fact_id
    if (id === undefined) return Effect.succeed(result)
    return Effect.flatMap(scopeOf, (scope) => memory.load(scope)).pipe(
      Effect.map((doc) =>
        doc.facts.some((f) => f.id === id) ? result : json({
          error: "Fact was not stored because the configured memory.max_facts capacity policy evicted it"
        })
      ),
      Effect.orElseSucceed(() => result)
    )
  }
  return [
    Tool.make({
      name: "memory_search",
      description: DESCRIPTIONS.memory_search,
      parameters: Schema.Struct({
        // (Antler's search matches words, in the content and the category, and takes a limit of 1 to 50)
        query: Schema.String.annotations({
          description: "Natural language query to match against fact content and category. Case-insensitive; a " +
            "fact holding any of its words matches, those holding more first."
        }),
        category: Schema.optional(Schema.String).annotations({
          description: "Optional category filter (e.g. \"preference\", \"correction\", \"context\"). Only facts with " +
            "this exact category are returned."
        }),
        limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 50))).annotations({
          description: "Maximum results to return (default 10), 1 to 50."
        })
      }),
      handler: (args) =>
        Effect.flatMap(scopeOf, (scope) =>
          memory.load(scope).pipe(
            Effect.map((doc) =>
              MemoryDoc.search(doc, args.query, { category: args.category, limit: args.limit ?? 10 })
            ),
            // what was returned counts as recalled (DeerMem's access heat, read by its `hybrid-v1` policy)
            Effect.tap((results) => memory.recall(scope, results.map((fact) => fact.id))),
            Effect.map((results) => json({ results: results.map(factView), count: results.length })),
            Effect.catchTag("MemoryError", failed)
          ))
    }),
    Tool.make({
      name: "memory_add",
      description: DESCRIPTIONS.memory_add,
      parameters: Schema.Struct({
        content: Schema.String.annotations({ description: "The fact text to remember. Be specific and factual." }),
        category: Schema.optional(Schema.String).annotations({
          description: "Category label for organization (default \"context\"). e.g. \"preference\", \"correction\", " +
            "\"behavior\", \"personal\"."
        }),
        confidence: Schema.optional(Confidence).annotations({
          description: "How certain you are about this fact, 0.0-1.0 (default 0.7). Use higher values for explicit " +
            "user statements, lower for inferences."
        })
      }),
      handler: (args) =>
        Effect.flatMap(RunContext, (context) => change((doc, now) => {
          // as DeerFlow's `memory_add`: nothing to remember, or a fact already known, is refused
          const content = args.content.trim()
          if (content === "") return [json({ error: "empty content" }), doc]
          if (doc.facts.some((f) => MemoryDoc.sameContent(f.content, content))) {
            return [json({ error: "Duplicate fact" }), doc]
          }
          const fact: MemoryDoc.Fact = {
            id: `fact_${M.newId().replace(/-/g, "").slice(0, 12)}`,
            content,
            category: MemoryDoc.categoryName(args.category),
            confidence: args.confidence ?? 0.7,
            createdAt: now,
            // the thread it was added in (DeerFlow: `manual`, which its app shows as written by the user)
            source: context.threadId
          }
          return [done(fact.id, "added"), { ...doc, lastUpdated: now, facts: [...doc.facts, fact] }]
        })).pipe(Effect.flatMap(stored))
    }),
    Tool.make({
      name: "memory_update",
      description: DESCRIPTIONS.memory_update,
      parameters: Schema.Struct({
        fact_id: Schema.String.annotations({ description: "Fact ID from memory_search results (required)." }),
        content: Schema.optional(Schema.String).annotations({ description: "New fact text (unchanged if omitted)." }),
        category: Schema.optional(Schema.String).annotations({ description: "New category (unchanged if omitted)." }),
        confidence: Schema.optional(Confidence).annotations({
          description: "New confidence score 0.0-1.0 (unchanged if omitted)."
        })
      }),
      handler: (args) =>
        change((doc, now) => {
          const fact = doc.facts.find((f) => f.id === args.fact_id)
          if (fact === undefined) return [notFound(args.fact_id), doc]
          if (args.content !== undefined && args.content.trim() === "") return [json({ error: "empty content" }), doc]
          const updated: MemoryDoc.Fact = {
            ...fact,
            ...(args.content !== undefined ? { content: args.content.trim() } : {}),
            ...(args.category !== undefined ? { category: MemoryDoc.categoryName(args.category) } : {}),
            ...(args.confidence !== undefined ? { confidence: args.confidence } : {})
          }
          const facts = doc.facts.map((f) => (f.id === fact.id ? updated : f))
          return [done(fact.id, "updated"), { ...doc, lastUpdated: now, facts }]
        })
    }),
    Tool.make({
      name: "memory_delete",
      description: DESCRIPTIONS.memory_delete,
      parameters: Schema.Struct({
        fact_id: Schema.String.annotations({ description: "Fact ID to delete (from memory_search results)." })
      }),
      handler: (args) =>
        change((doc, now) => {
          if (!doc.facts.some((f) => f.id === args.fact_id)) {
            return [notFound(args.fact_id), doc]
          }
          const facts = doc.facts.filter((f) => f.id !== args.fact_id)
          return [done(args.fact_id, "deleted"), { ...doc, lastUpdated: now, facts }]
        })
    })
  ]
}

/** Its chain entry: after the run, the conversation goes to the app's memory queue. */
export const entry = (options: Options) => Chain.entry("Memory", () => layer(options))
