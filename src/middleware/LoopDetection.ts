/**
 * LoopDetection (SPEC-deerflow §5.28): breaks runs that keep making the same tool calls.
 *
 * Two layers, both over this run's model responses that call tools:
 * 1. Repeats. Each response gets an order-independent hash of its calls (name + a stable key of the
 *    arguments); within the last `window_size` responses, `warn_threshold` equal hashes queue a
 *    `[LOOP DETECTED]` warning (once per hash) and `hard_limit` equal hashes force a stop.
 * 2. Frequency. Every call's tool name goes into a longer window; a tool called `tool_freq_warn` times (or
 *    its `tool_freq_overrides` entry) gets a warning, `tool_freq_hard_limit` times a forced stop, even when the
 *    arguments all differ.
 *
 * A forced stop rewrites the response in place (`HardStop.hardStop`, `[FORCED STOP]` notice, stop reason
 * `loop_capped`); warnings go into the next model request only (`loop_warning`, hidden), never into state.
 * The middleware is built per run, so the history is per run. Internal calls (summaries, titles) are
 * neither tracked nor given warnings.
 */
import { hash } from "node:crypto"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { LoopDetectionConfig } from "../services/AppConfig.js"
import type { ModelResponse } from "../services/ModelService.js"
import { RunContext } from "../services/RunContext.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import * as Json from "../state/Json.js"
import * as Chain from "./Chain.js"

// ---------------------------------------------------------------------------------------------------------
// Stable keys

/** `read_file` calls whose line ranges fall in the same buckets of this many lines count as the same read. */
export const READ_BUCKET_LINES = 200

/** The arguments that identify a call of any tool without a rule of its own (in this order of preference). */
export const SALIENT_FIELDS: ReadonlyArray<string> = ["path", "url", "query", "command", "pattern", "glob", "cmd"]

const CONTENT_SENSITIVE: ReadonlySet<string> = new Set(["write_file", "str_replace"])

/**
 * JSON with object keys sorted at every level, so equal values always give equal text. Values JSON cannot
 * hold (non-finite numbers, bigints) are written as strings; `undefined` object entries are skipped.
 */
export const canonicalJson = (value: unknown): string => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value)
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : JSON.stringify(String(value))
    case "bigint":
    case "symbol":
    case "function":
      return JSON.stringify(String(value))
    case "undefined":
      return "null"
  }
  if (value === null) return "null"
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + canonicalJson(value[i])
    return out + "]"
  }
  const record = value as Record<string, unknown>
  const keys = Object.keys(record).sort()
  let out = "{"
  let first = true
  for (const key of keys) {
    const item = record[key]
    if (item === undefined) continue
    out += (first ? "" : ",") + JSON.stringify(key) + ":" + canonicalJson(item)
    first = false
  }
  return out + "}"
}

/** Arguments as an object, plus a fallback key when they were not one (a JSON string is parsed first). */
export interface NormalizedArgs {
  readonly args: Readonly<Record<string, unknown>>
  readonly fallback: string | undefined
}

/** Normalizes raw tool-call arguments: objects as they are, JSON-string objects parsed, else a fallback key. */
export const normalizeArgs = (raw: unknown): NormalizedArgs => {
  if (Json.isRecord(raw)) return { args: raw, fallback: undefined }
  if (raw === null || raw === undefined) return { args: {}, fallback: undefined }
  if (typeof raw === "string") {
    let parsed: unknown
    try {
      parsed = Json.parse(raw)
    } catch {
      return { args: {}, fallback: raw }
    }
    return Json.isRecord(parsed) ? { args: parsed, fallback: undefined } : { args: {}, fallback: canonicalJson(parsed) }
  }
  return { args: {}, fallback: canonicalJson(raw) }
}

const INTEGER = /^\s*[+-]?\d+\s*$/

const lineNumber = (value: unknown, otherwise: number): number => {
  if (typeof value === "number") return Number.isFinite(value) ? Math.trunc(value) : otherwise
  if (typeof value === "string" && INTEGER.test(value)) return Number.parseInt(value, 10)
  if (typeof value === "boolean") return value ? 1 : 0
  return otherwise
}

const readKey = (args: Readonly<Record<string, unknown>>): string => {
  const rawPath = args.path
  const path = rawPath === undefined || rawPath === null || rawPath === "" ? "" :
    typeof rawPath === "string" ? rawPath : canonicalJson(rawPath)
  const start = lineNumber(args.start_line, 1)
  const end = lineNumber(args.end_line, start)
  const low = Math.max(Math.min(start, end), 1)
  const high = Math.max(Math.max(start, end), 1)
  return `${path}:${Math.floor((low - 1) / READ_BUCKET_LINES)}-${Math.floor((high - 1) / READ_BUCKET_LINES)}`
}

/**
 * The key that says "this is the same call again":
 * - `read_file`: the path and the 200-line buckets of its range (start defaults to 1, end to start);
 * - `write_file`, `str_replace`: all arguments (a new payload for the same path is a different call);
 * - any other tool: the salient arguments (`path, url, query, command, pattern, glob, cmd`) that are set, else
 *   all arguments.
 */
export const stableKey = (name: string, rawArgs: unknown): string => {
  const { args, fallback } = normalizeArgs(rawArgs)
  if (name === "read_file" && fallback === undefined) return readKey(args)
  if (CONTENT_SENSITIVE.has(name)) return fallback ?? canonicalJson(args)
  let salient: Record<string, unknown> | undefined
  for (const field of SALIENT_FIELDS) {
    const value = args[field]
    if (value !== undefined && value !== null) (salient ??= {})[field] = value
  }
  if (salient !== undefined) return canonicalJson(salient)
  return fallback ?? canonicalJson(args)
}

/** A tool call as loop detection reads it. */
export interface CallLike {
  readonly name: string
  readonly args: unknown
}

/** The hash of one response's calls: the same multiset of `name:key` gives the same hash in any order. */
export const responseHash = (calls: ReadonlyArray<CallLike>): string => md5(responseText(calls))

/** The sorted `name:key` signatures of a response's calls, as JSON (what `responseHash` hashes). */
const responseText = (calls: ReadonlyArray<CallLike>): string =>
  JSON.stringify(calls.map((call) => `${call.name}:${stableKey(call.name, call.args)}`).sort())

// (one call, no `Hash` object: see ReadMark.contentHash)
const md5 = (text: string): string => hash("md5", text, "hex").slice(0, 12)

/**
 * What the tracker compares: the signatures themselves when short (no hashing on the usual step), their hash
 * when long (a window of whole file payloads would be kept otherwise). The two never meet: a text starts
 * with `[`, a hash is hex.
 */
const responseKey = (calls: ReadonlyArray<CallLike>): string => {
  const text = responseText(calls)
  return text.length <= 256 ? text : md5(text)
}

// ---------------------------------------------------------------------------------------------------------
// Texts: DeerFlow's `_WARNING_MSG`, `_TOOL_FREQ_WARNING_MSG`, `_HARD_STOP_MSG` and `_TOOL_FREQ_HARD_STOP_MSG` word for
// word (SPEC §5.28): the model reads them, and prompts tuned on DeerFlow expect them.

/** Starts every loop warning. */
export const LOOP_MARKER = "[LOOP DETECTED]"
/** Starts every forced-stop notice. */
export const FORCED_STOP_MARKER = "[FORCED STOP]"

const FINISH_NOW = "Stop calling tools and produce your final answer now. If you cannot complete the task, " +
  "summarize what you accomplished so far."

/** The warning for repeated identical calls. */
export const repeatWarning = (): string => `${LOOP_MARKER} You are repeating the same tool calls. ${FINISH_NOW}`

/** The notice appended when repeated identical calls are stopped. */
export const repeatStop = (): string =>
  `${FORCED_STOP_MARKER} Repeated tool calls exceeded the safety limit. Producing final answer with results ` +
  `collected so far.`

/** The warning for a tool called very often, with any arguments. */
export const frequencyWarning = (name: string, count: number): string =>
  `${LOOP_MARKER} You have called ${name} ${count} times without producing a final answer. ${FINISH_NOW}`

/** The notice appended when a tool passes its per-run call limit. */
export const frequencyStop = (name: string, count: number): string =>
  `${FORCED_STOP_MARKER} Tool ${name} called ${count} times — exceeded the per-tool safety limit. Producing ` +
  `final answer with results collected so far.`

// ---------------------------------------------------------------------------------------------------------
// Tracking

/** What to do after a response: warnings for the next request, and possibly a forced stop with its notice. */
export interface Verdict {
  readonly warnings: ReadonlyArray<string>
  readonly stop?: string | undefined
}

/** The history of one run. `observe` is called once per model response that calls tools. */
export interface Tracker {
  readonly observe: (calls: ReadonlyArray<CallLike>) => Verdict
}

const NONE: Verdict = { warnings: [] }

const countOf = (items: ReadonlyArray<string>, item: string): number => {
  let n = 0
  for (let i = 0; i < items.length; i++) if (items[i] === item) n++
  return n
}

/** A fresh history with the given limits. */
export const tracker = (config: LoopDetectionConfig): Tracker => {
  const hashes: Array<string> = []
  const warned = new Set<string>()
  // The name window keeps a count per name, so a large per-tool limit costs nothing per step.
  const names: Array<string> = []
  const nameCounts = new Map<string, number>()
  const namesWarned = new Set<string>()
  let nameWindow = Math.max(config.window_size, config.tool_freq_hard_limit)
  for (const override of Object.values(config.tool_freq_overrides)) {
    nameWindow = Math.max(nameWindow, override.hard_limit)
  }

  const pushName = (name: string) => {
    names.push(name)
    nameCounts.set(name, (nameCounts.get(name) ?? 0) + 1)
    if (names.length <= nameWindow) return
    for (const old of names.splice(0, names.length - nameWindow)) {
      const left = nameCounts.get(old)! - 1
      if (left === 0) nameCounts.delete(old)
      else nameCounts.set(old, left)
    }
  }

  return {
    observe: (calls) => {
      if (calls.length === 0) return NONE
      const hash = responseKey(calls)
      hashes.push(hash)
      if (hashes.length > config.window_size) hashes.splice(0, hashes.length - config.window_size)
      for (const old of warned) if (!hashes.includes(old)) warned.delete(old)

      const repeats = countOf(hashes, hash)
      if (repeats >= config.hard_limit) return { warnings: [], stop: repeatStop() }
      if (repeats >= config.warn_threshold && !warned.has(hash)) {
        warned.add(hash)
        return { warnings: [repeatWarning()] }
      }

      // As DeerFlow counts them: call by call, up to the first warning or stop (the response's later calls are
      // then not counted); a response stopped or warned for its repeats counts none.
      for (const call of calls) {
        if (call.name === "") continue
        pushName(call.name)
        const count = nameCounts.get(call.name) ?? 0
        const overrides = config.tool_freq_overrides
        const limits = Object.hasOwn(overrides, call.name) ? overrides[call.name] : undefined
        const warnAt = limits?.warn ?? config.tool_freq_warn
        const stopAt = limits?.hard_limit ?? config.tool_freq_hard_limit
        if (count >= stopAt) return { warnings: [], stop: frequencyStop(call.name, count) }
        if (count >= warnAt) {
          if (!namesWarned.has(call.name)) {
            namesWarned.add(call.name)
            return { warnings: [frequencyWarning(call.name, count)] }
          }
        } else namesWarned.delete(call.name)
      }
      return NONE
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Layer

/** The name of the request-only message that carries loop warnings. */
export const WARNING_NAME = "loop_warning"

/** DeerFlow's defaults (warn 3, stop 5, window 20; per tool warn 30, stop 50). */
export const defaultConfig = (): LoopDetectionConfig => Schema.decodeSync(LoopDetectionConfig)({})

/**
 * The LoopDetection middleware (SPEC §4.1 slot 29: after Summarization/Todo/TokenUsage/Title, just outside
 * TokenBudget). Requires `RunContext` (stop reason). With `enabled: false` it wraps nothing.
 */
export const layer = (config: LoopDetectionConfig = defaultConfig()): Middleware.Middleware => {
  if (!config.enabled) return Middleware.make({})
  return Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => {
    const history = tracker(config)
    const queue = HardStop.warningQueue(WARNING_NAME)
    const afterModel = (response: ModelResponse): Middleware.Now<ModelResponse> => {
      const calls = response.message.tool_calls
      if (calls === undefined || calls.length === 0) return response
      const verdict = history.observe(calls)
      for (const warning of verdict.warnings) queue.push(warning)
      if (verdict.stop === undefined) return response
      const stopped = HardStop.replaceMessage(response, HardStop.hardStop(response.message, verdict.stop))
      return Effect.as(context.setStopReason("loop_capped"), stopped)
    }
    return {
      modelHooks: queue.hooks(afterModel)
    }
  }))
}

/** Its chain entry: counts tool calls after Safety stripped suppressed ones; inside the retries. */
export const entry = (config?: LoopDetectionConfig) =>
  Chain.entry("LoopDetection", () => layer(config), [
    { inside: "LLMErrorHandling", reason: "a retried request still carries the pending loop warning" }
  ])
