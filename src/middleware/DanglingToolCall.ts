/**
 * DanglingToolCall (SPEC §5.7): before each model call, the history is made well-formed for strict
 * providers: every tool call (structured, invalid, or raw provider payload) is answered exactly once, right
 * after its AI message, and no tool result is left without its call. Request-only: state is never changed.
 *
 * - blank call ids get synthetic ids `deerflow_synthetic_tool_call_{msgIndex}_{call|invalid|raw}_{position}`;
 *   a result with a blank id is re-pointed to one only when the pairing is forced;
 * - results move right after their AI message, in call order (the first result per call); orphan results
 *   are dropped; a call without a result gets a synthetic error result saying why;
 * - blank tool names become `unknown_tool`, invalid arguments become a JSON-object string;
 * - calls kept only in the raw provider payload (`additional_kwargs.tool_calls`, as in imported or
 *   LangChain-serialised threads) are parsed into calls (`Message.parseRawToolCalls`, the parse the model
 *   serializer applies too), so the request never holds a result whose call the provider does not receive.
 *
 * A well-formed history (the common case) costs one pass with no allocation and returns the same request.
 */
import * as Effect from "effect/Effect"
import type { ModelRequest } from "../services/ModelService.js"
import type { AIMessage, InvalidToolCall, Message, ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"
import {
  asRecord,
  type CallSource,
  type EffectiveCall,
  effectiveCalls,
  isCleanName,
  isPresent,
  normalizeToolArguments,
  normalizeToolName,
  rawName,
  syntheticResult
} from "./EffectiveCalls.js"

export {
  type CallSource,
  type EffectiveCall,
  effectiveCalls,
  isPresent,
  normalizeToolArguments,
  normalizeToolName,
  syntheticResultText,
  UNKNOWN_TOOL
} from "./EffectiveCalls.js"

/** The prefix of ids minted for calls that came without one. */
export const SYNTHETIC_ID_PREFIX = "deerflow_synthetic_tool_call_"

// ---------------------------------------------------------------------------------------------------------
// The fast path

const EMPTY: ReadonlyArray<ToolCall> = []

/** Where a well-formedness scan stands: the calls of the current turn and how many are answered so far. */
export interface ScanState {
  calls: ReadonlyArray<ToolCall>
  answered: number
}

/**
 * Continues a well-formedness scan over `messages[from:]` (see `isWellFormed`), updating `state` in place.
 * Returns whether everything scanned is well-formed so far; pending calls at the end are not checked here.
 */
export const scanWellFormed = (messages: ReadonlyArray<Message>, from: number, state: ScanState): boolean => {
  let calls = state.calls
  let answered = state.answered
  let ok = true
  for (let i = from; i < messages.length; i++) {
    const message = messages[i]!
    if (message.type === "tool") {
      if (answered >= calls.length || message.tool_call_id !== calls[answered]!.id) {
        ok = false
        break
      }
      answered++
      continue
    }
    if (answered < calls.length) {
      ok = false
      break
    }
    answered = 0
    if (message.type !== "ai") {
      calls = EMPTY
      continue
    }
    if ((message.invalid_tool_calls?.length ?? 0) > 0 || M.rawToolCalls(message) !== undefined) {
      ok = false
      break
    }
    calls = message.tool_calls ?? EMPTY
    for (let j = 0; j < calls.length; j++) {
      const call = calls[j]!
      if (!isPresent(call.id) || !isCleanName(call.name)) {
        ok = false
        break
      }
    }
    if (!ok) break
  }
  state.calls = calls
  state.answered = answered
  return ok
}

/**
 * Whether the history is already what a strict provider accepts, so nothing needs to change: every AI
 * message's structured calls have clean ids and names and are followed directly by their results in call
 * order, and no other tool result exists. Messages with invalid calls or a raw payload always take the full
 * path (their arguments may need normalising). One pass, no allocation beyond the scan state.
 */
export const isWellFormed = (messages: ReadonlyArray<Message>): boolean => {
  const state: ScanState = { calls: EMPTY, answered: 0 }
  return scanWellFormed(messages, 0, state) && state.answered >= state.calls.length
}

// ---------------------------------------------------------------------------------------------------------
// The full path

interface Claim {
  readonly synthetic: string
  readonly name: unknown
}

const namesCanPair = (callName: unknown, resultName: unknown) =>
  !isPresent(callName) || !isPresent(resultName) || callName.trim() === resultName.trim()

const relabelList = <C extends { readonly id?: unknown; readonly name?: unknown }>(
  list: ReadonlyArray<C>,
  index: number,
  source: CallSource,
  claims: Array<Claim>,
  nameOf: (call: C) => unknown
): ReadonlyArray<C> => {
  let out: Array<C> | undefined
  for (let position = 0; position < list.length; position++) {
    const call = list[position]!
    if (asRecord(call) === undefined || isPresent(call.id)) continue
    const synthetic = `${SYNTHETIC_ID_PREFIX}${index}_${source}_${position}`
    ;(out ??= list.slice())[position] = { ...call, id: synthetic }
    claims.push({ synthetic, name: nameOf(call) })
  }
  return out ?? list
}

const malformedResults = (messages: ReadonlyArray<Message>, from: number) => {
  let count = 0
  for (let i = from + 1; i < messages.length; i++) {
    const message = messages[i]!
    if (message.type === "ai") break
    if (message.type === "tool" && !isPresent(message.tool_call_id)) count++
  }
  return count
}

/**
 * Gives blank call ids their synthetic ids, and re-points results with a blank id when the pairing is
 * forced: within the turn of the AI message before them, exactly one open blank-id call whose name does
 * not contradict the result's, or several when the turn has exactly as many blank-id results as blank-id
 * calls (then by position). Any blank id counts as the same missing id. Otherwise the result stays
 * unattributed and is dropped as an orphan, which is better than inventing a pairing.
 */
const repairIds = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  let out: Array<Message> | undefined
  let open: Array<Claim> = []
  let positional = false
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.type === "ai") {
      const claims: Array<Claim> = []
      const structured = message.tool_calls ?? []
      const invalid = message.invalid_tool_calls ?? []
      const tool_calls = relabelList(structured, i, "call", claims, (c) => c.name)
      const invalid_tool_calls = relabelList(invalid, i, "invalid", claims, (c) => c.name)
      let rawCalls: ReadonlyArray<unknown> | undefined
      const raw = M.rawToolCalls(message)
      if (raw !== undefined) {
        rawCalls = relabelList(raw as ReadonlyArray<Record<string, unknown>>, i, "raw", claims, rawName)
      }
      open = claims
      positional = claims.length > 0 && malformedResults(messages, i) === claims.length
      if (tool_calls !== structured || invalid_tool_calls !== invalid || rawCalls !== raw) {
        const next: AIMessage = {
          ...message,
          ...(tool_calls !== structured ? { tool_calls: tool_calls as ReadonlyArray<ToolCall> } : {}),
          ...(invalid_tool_calls !== invalid ? { invalid_tool_calls } : {}),
          ...(rawCalls !== raw ? { additional_kwargs: { ...message.additional_kwargs, tool_calls: rawCalls } } : {})
        }
        ;(out ??= messages.slice())[i] = next
      }
      continue
    }
    if (message.type !== "tool" || isPresent(message.tool_call_id) || open.length === 0) continue
    let first = -1
    let candidates = 0
    for (let k = 0; k < open.length; k++) {
      if (!namesCanPair(open[k]!.name, message.name)) continue
      if (first < 0) first = k
      candidates++
    }
    if (candidates === 0 || (candidates > 1 && !positional)) continue
    const [claim] = open.splice(first, 1)
    ;(out ??= messages.slice())[i] = { ...message, tool_call_id: claim!.synthetic }
  }
  return out ?? messages
}

/** The AI message with blank names replaced and invalid arguments made JSON-object strings. */
export const sanitizeAIMessage = (message: AIMessage): AIMessage => {
  let tool_calls: Array<ToolCall> | undefined
  const structured = message.tool_calls ?? []
  for (let i = 0; i < structured.length; i++) {
    const call = structured[i]!
    const name = normalizeToolName(call.name)
    if (name !== call.name) (tool_calls ??= structured.slice())[i] = { ...call, name }
  }
  let invalid_tool_calls: Array<InvalidToolCall> | undefined
  const invalid = message.invalid_tool_calls ?? []
  for (let i = 0; i < invalid.length; i++) {
    const call = invalid[i]!
    const name = normalizeToolName(call.name)
    const args = normalizeToolArguments(call.args)
    if (name !== call.name || args !== call.args) (invalid_tool_calls ??= invalid.slice())[i] = { ...call, name, args }
  }
  if (tool_calls === undefined && invalid_tool_calls === undefined) return message
  return {
    ...message,
    ...(tool_calls !== undefined ? { tool_calls } : {}),
    ...(invalid_tool_calls !== undefined ? { invalid_tool_calls } : {})
  }
}

interface Rebuilt {
  readonly messages: ReadonlyArray<Message>
  /** The call ids answered by a synthetic result. */
  readonly synthesized: ReadonlySet<string>
  /** The call ids of results no call claimed (orphans, extra duplicates), dropped from the output. */
  readonly unclaimed: ReadonlySet<string>
}

/** The history with raw provider calls parsed into calls (see `effectiveCalls`). */
const parseRaw = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  let out: Array<Message> | undefined
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.type !== "ai") continue
    const parsed = M.parseRawToolCalls(message)
    if (parsed !== message) (out ??= messages.slice())[i] = parsed
  }
  return out ?? messages
}

/**
 * The full path: repair ids (raw calls keep DeerFlow's `_raw_` synthetic ids), parse raw calls into calls, then
 * re-emit results after their calls. `undefined` when nothing changed.
 */
const rebuild = (messages: ReadonlyArray<Message>): Rebuilt | undefined => {
  const repaired = parseRaw(repairIds(messages))

  const results = new Map<string, Array<ToolMessage>>()
  const callsOf = new Map<number, ReadonlyArray<EffectiveCall>>()
  for (let i = 0; i < repaired.length; i++) {
    const message = repaired[i]!
    if (message.type === "tool") {
      const queue = results.get(message.tool_call_id)
      if (queue === undefined) results.set(message.tool_call_id, [message])
      else queue.push(message)
    } else if (message.type === "ai") callsOf.set(i, effectiveCalls(message))
  }

  const taken = new Map<string, number>()
  const synthesized = new Set<string>()
  const out: Array<Message> = []
  for (let i = 0; i < repaired.length; i++) {
    const message = repaired[i]!
    // Results are re-emitted after their AI message; the ones no call claims (orphans, extra duplicates)
    // are dropped.
    if (message.type === "tool") continue
    if (message.type !== "ai") {
      out.push(message)
      continue
    }
    out.push(sanitizeAIMessage(message))
    for (const call of callsOf.get(i)!) {
      const id = call.id
      if (!isPresent(id)) continue
      const next = taken.get(id) ?? 0
      let result = results.get(id)?.[next]
      if (result === undefined) {
        synthesized.add(id)
        out.push(syntheticResult(call, id))
        continue
      }
      taken.set(id, next + 1)
      if (call.blankName && !isPresent(result.name)) result = { ...result, name: call.name }
      out.push(result)
    }
  }

  if (out.length === messages.length) {
    let same = true
    for (let i = 0; i < out.length && same; i++) same = out[i] === messages[i]
    if (same) return undefined
  }
  const unclaimed = new Set<string>()
  for (const [id, queue] of results) if (queue.length > (taken.get(id) ?? 0)) unclaimed.add(id)
  return { messages: out, synthesized, unclaimed }
}

/**
 * The patched history, or `undefined` when it is already well-formed. Pure; see the module comment for
 * what is patched.
 */
export const patchMessages = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> | undefined =>
  isWellFormed(messages) ? undefined : rebuild(messages)?.messages

/** The request with a well-formed history; the same object when nothing changes. */
export const patchRequest = (request: ModelRequest): ModelRequest => {
  const patched = patchMessages(request.messages)
  return patched === undefined ? request : { ...request, messages: patched }
}

/** What one run's DanglingToolCall remembers between its model calls. */
interface Seen {
  /** The last history it was given, and what it sent for it. */
  lastIn: ReadonlyArray<Message>
  lastOut: ReadonlyArray<Message>
  /** The ids of the calls the last full path answered synthetically. */
  synthesized: ReadonlySet<string>
  /** The call ids of the results the last full path dropped unclaimed. */
  unclaimed: ReadonlySet<string>
  /** Whether `lastIn` was not well-formed as it stood (its output may differ from it). */
  patched: boolean
  /** Where the scan of `lastIn` ended, and a scan in progress. */
  readonly end: ScanState
  readonly scan: ScanState
}

// Module functions over the run's state rather than closures made per run: a closure made per run starts
// in the interpreter every run, and these loop over the whole history.

const remember = (seen: Seen, input: ReadonlyArray<Message>, output: ReadonlyArray<Message>) => {
  seen.lastIn = input
  seen.lastOut = output
  seen.end.calls = seen.scan.calls
  seen.end.answered = seen.scan.answered
}

/** Whether the part after the last history can follow the last output as is. */
const suffixFits = (seen: Seen, messages: ReadonlyArray<Message>): boolean => {
  const { scan, lastIn, synthesized, unclaimed } = seen
  scan.calls = seen.patched ? EMPTY : seen.end.calls
  scan.answered = seen.patched ? 0 : seen.end.answered
  if (!scanWellFormed(messages, lastIn.length, scan) || scan.answered < scan.calls.length) return false
  if (seen.patched && (synthesized.size > 0 || unclaimed.size > 0)) {
    for (let i = lastIn.length; i < messages.length; i++) {
      const message = messages[i]!
      // A result for a call answered synthetically earlier would pair with that call on the full path.
      if (message.type === "tool" && synthesized.has(message.tool_call_id)) return false
      // A call whose id an earlier, dropped result has (one that came before its call) would take that result.
      if (message.type === "ai" && unclaimed.size > 0) {
        for (const call of effectiveCalls(message)) if (call.id !== undefined && unclaimed.has(call.id)) return false
      }
    }
  }
  return true
}

const patchSeen = (seen: Seen, messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  const { lastIn, lastOut, scan } = seen
  if (lastIn.length > 0 && Incremental.extendsHistory(messages, lastIn)) {
    if (suffixFits(seen, messages)) {
      const out = lastOut === lastIn
        ? messages
        : messages.length === lastIn.length
        ? lastOut
        : lastOut.concat(messages.slice(lastIn.length))
      remember(seen, messages, out)
      return out
    }
  } else {
    scan.calls = EMPTY
    scan.answered = 0
    if (scanWellFormed(messages, 0, scan) && scan.answered >= scan.calls.length) {
      seen.patched = false
      remember(seen, messages, messages)
      return messages
    }
  }
  // Not well-formed as it stands: from here on, new parts must be well-formed on their own.
  const rebuilt = rebuild(messages)
  seen.patched = true
  seen.synthesized = rebuilt?.synthesized ?? new Set()
  seen.unclaimed = rebuilt?.unclaimed ?? new Set()
  const out = rebuilt?.messages ?? messages
  remember(seen, messages, out)
  return out
}

/**
 * DanglingToolCall: no options; needs nothing from context.
 *
 * Within a run the history only grows, so each call remembers the last history it saw and what it sent:
 * a history that extends it (the same message objects up to its length) is checked from where the last one
 * ended. If the last one needed no change, the new part is scanned on; if it was patched, a new part that
 * is well-formed on its own is appended to the patched one. Anything else takes the full path.
 */
export const layer = (): Middleware.Middleware =>
  Middleware.make(Effect.sync(() => {
    const seen: Seen = {
      lastIn: [],
      lastOut: [],
      synthesized: new Set(),
      unclaimed: new Set(),
      patched: false,
      end: { calls: EMPTY, answered: 0 },
      scan: { calls: EMPTY, answered: 0 }
    }
    return {
      modelHooks: {
        before: (request) => {
          const messages = patchSeen(seen, request.messages)
          return messages === request.messages ? request : { ...request, messages }
        }
      }
    }
  }))

/** Its chain entry: outside the retry loop, so the history is repaired once per call. */
export const entry = () =>
  Chain.entry("DanglingToolCall", () => layer(), [
    { outside: "LLMErrorHandling", reason: "the history is repaired once per call, not once per retry" }
  ])
