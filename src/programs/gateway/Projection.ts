/**
 * The projection of a run's events onto LangGraph's stream modes (SPEC §12.2): `values`, `messages-tuple` (SSE event
 * `messages`), `messages` (`messages/metadata`, `messages/partial`, `messages/complete`), `updates` and `custom`,
 * as the events to frame, with the JSON of streamed chunks and `values` snapshots kept in parts for the run's
 * buffer. The wire's objects and framing are `Protocol.ts`. Pure: no services, no I/O.
 */
import * as Either from "effect/Either"
import * as TextBuilder from "../../internal/TextBuilder.js"
import type { RunEvent } from "../../services/RunEvents.js"
import type { AIMessage, Message } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type * as Redact from "../../state/Redact.js"
import { applyUpdate, makeIndexes } from "../../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../../state/ThreadState.js"
import type { StreamMode } from "./api/Runs.js"
import * as CallbackEvents from "./CallbackEvents.js"
import { publicValues, toolCallChunks } from "./Protocol.js"
import type { Out, Spliced } from "./StreamEvent.js"
import { SplicedOut } from "./StreamEvent.js"

export type { Out, Spliced } from "./StreamEvent.js"


const messageDict = (message: Message): Record<string, unknown> => ({ ...message })

const chunkBase = (id: string) => ({
  type: "AIMessageChunk",
  id,
  additional_kwargs: {},
  response_metadata: {},
  tool_calls: [],
  invalid_tool_calls: [],
  tool_call_chunks: [],
  name: null
})

/**
 * The last piece of a streamed AI message: what the deltas did not carry (text held back or written after the
 * stream, tool calls, usage, finish reason).
 */
const finalChunk = (message: AIMessage, content: string) => ({
  ...chunkBase(message.id),
  content,
  response_metadata: message.response_metadata ?? {},
  tool_call_chunks: toolCallChunks(message.tool_calls ?? []),
  ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {})
})

/**
 * A streamed AI message so far, as LangGraph's `messages/partial` carries it (its chunks concatenated, typed
 * `ai`): the text so far, then, once the message is written, its tool calls, usage and finish reason.
 */
const partialOf = (id: string, content: string, reasoning: string, message?: AIMessage) => {
  const calls = message?.tool_calls ?? []
  return {
    content,
    additional_kwargs: reasoning === "" ? {} : { reasoning_content: reasoning },
    response_metadata: message?.response_metadata ?? {},
    tool_call_chunks: toolCallChunks(calls),
    tool_calls: calls,
    id,
    invalid_tool_calls: [],
    ...(message?.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
    type: "ai"
  }
}

/** Options of a projector. */
export interface ProjectorOptions {
  readonly runId: string
  readonly threadId: string
  readonly modes: ReadonlyArray<StreamMode>
  /** The thread's state before the run (its values are streamed from there). */
  readonly initial: ThreadState
  readonly modelName?: string | undefined
  /**
   * Secrets never streamed: token deltas go through a streaming redactor per message, so a secret split across
   * deltas is caught too (whole events are redacted by the caller).
   */
  readonly redact?: Redact.Redactor | undefined
  /** Which attempt of the run this is (its `metadata` event's `attempt`): 1, or more once resumed elsewhere. */
  readonly attempt?: number | undefined
  /** The run's new messages, as the `events` mode's graph start says them. */
  readonly input?: { readonly messages: ReadonlyArray<Message> } | null
  /** The run's assistant (the `events` mode's metadata). */
  readonly assistantId?: string | undefined
}

/** The node of a compaction's `updates` entry: DeerFlow's summarization hook, which its frontend recognises. */
export const SUMMARIZATION_NODE = "DeerFlowSummarizationMiddleware.before_model"

/** A compaction's update: every message removed and the kept ones written again, with the new summary. */
const isCompaction = (update: StateUpdate): boolean => {
  const first = update.messages?.[0]
  return first?.type === "remove" && first.id === M.REMOVE_ALL_MESSAGES && update.summary_text !== undefined
}

/** Whether an update changes the goal alone (the goal loop's write). */
const isGoalChange = (update: StateUpdate): boolean =>
  update.goal !== undefined && Object.keys(update).every((key) => key === "goal")

/** One `updates` entry: the updates merged (their messages in order), under their node. */
const updatesOut = (updates: ReadonlyArray<StateUpdate>, node?: string): Out => {
  const messages = updates.flatMap((u) => u.messages ?? [])
  // (a goal alone changes in a run where the goal loop judged it: DeerFlow's `goal_evaluator` writes it)
  const name = node ?? (messages.some((m) => m.type === "ai")
    ? "model"
    : messages.some((m) => m.type === "tool")
    ? "tools"
    : updates.every(isGoalChange)
    ? "goal_evaluator"
    : "agent")
  const merged: Record<string, unknown> = {}
  for (const update of updates) {
    for (const [key, value] of Object.entries(update)) if (key !== "messages") merged[key] = value
  }
  if (messages.length > 0) merged.messages = messages
  // (a goal cleared is none, as the state says it)
  if (typeof merged.goal === "object" && merged.goal !== null && "clear" in merged.goal) merged.goal = null
  delete merged.thread_data
  return { event: "updates", data: { [name]: merged } }
}

/**
 * The stream of one run in LangGraph's shape. `push` takes a batch of run events (what arrived together, e.g.
 * the messages and fields of one state update) and returns the events to send, in order: `metadata` first;
 * token deltas as `messages` chunks (accumulated by message id), messages written whole as `messages` tuples;
 * one `values` snapshot and one `updates` entry per batch of state changes, sent before anything that follows
 * them; custom events as `{type: name, ...data}`; an `error` for a failed run. The caller adds `end`.
 */
export const makeProjector = (options: ProjectorOptions) => {
  const modes = new Set(options.modes)
  const wants = (mode: StreamMode) => modes.has(mode)
  let state = options.initial
  const indexes = makeIndexes()
  // each streamed message's text so far (compact: read whole only in `messages` mode and when the message is written)
  const streamed = new Map<string, TextBuilder.TextBuilder>()
  const redactors = new Map<string, Redact.TextStream>()
  const redactorOf = (key: string) => {
    let stream = redactors.get(key)
    if (stream === undefined && options.redact !== undefined) redactors.set(key, stream = options.redact.stream())
    return stream
  }
  const endOf = (key: string) => {
    const stream = redactors.get(key)
    redactors.delete(key)
    return stream === undefined ? "" : stream.end()
  }
  let step = 0
  let dirty = false
  let pending: Array<StateUpdate> = []
  // `messages` mode: the reasoning streamed so far per message, the messages written since the last flush (sent
  // as `messages/complete` after the `values` that holds them) and the ids already sent complete
  const thoughts = new Map<string, string>()
  let written: Array<Message> = []
  const completed = new Set<string>()
  const meta = (node: string) => ({
    run_id: options.runId,
    thread_id: options.threadId,
    langgraph_node: node,
    langgraph_step: step,
    tags: [],
    ...(options.modelName !== undefined ? { ls_model_name: options.modelName } : {})
  })

  // Text kept in parts (`Spliced`) is checked for secrets here, as the caller checks a whole event's: a part that
  // holds one makes the event go as data, which the caller redacts.
  const clean = (text: string) => options.redact === undefined || !options.redact.test(text)

  const callbacks = wants("events")
    ? CallbackEvents.make({
      runId: options.runId,
      threadId: options.threadId,
      assistantId: options.assistantId,
      attempt: options.attempt ?? 1,
      modelName: options.modelName,
      input: options.input ?? null,
      clean,
      messages: () => state.messages
    })
    : undefined

  // the head and tail of the chunks of the message streaming now: with a chunk's content between them, the same
  // JSON text as `JSON.stringify([{ ...chunkBase(id), content }, meta("model")])`; made once per message and step
  let template: { readonly id: string; readonly step: number; readonly head: string; readonly tail: string } | undefined
  const chunkOf = (id: string, content: string): Spliced | undefined => {
    if (template === undefined || template.id !== id || template.step !== step) {
      const head = `[${JSON.stringify(chunkBase(id)).slice(0, -1)},"content":`
      const tail = `},${JSON.stringify(meta("model"))}]`
      if (!clean(head) || !clean(tail)) return undefined
      template = { id, step, head, tail }
    }
    const body = JSON.stringify(content)
    return clean(body) ? { head: template.head, body, tail: template.tail } : undefined
  }

  // each message's JSON text, made (and checked) once: the snapshots of a run share it (null: it holds a secret)
  const texts = new WeakMap<Message, string | null>()
  const textOf = (message: Message): string | null => {
    let text = texts.get(message)
    if (text === undefined) {
      const made = JSON.stringify(message)
      texts.set(message, text = clean(made) ? made : null)
    }
    return text
  }
  /** A `values` snapshot: its messages' texts joined (a rope over them, not a copy), the other fields after. */
  const valuesOut = (): Out => {
    const values = publicValues(state)
    const { messages, ...others } = values as { messages: ReadonlyArray<Message> }
    let body = ""
    for (let i = 0; i < messages.length; i++) {
      const text = textOf(messages[i]!)
      if (text === null) return { event: "values", data: values }
      body = i === 0 ? text : body + "," + text
    }
    const rest = JSON.stringify(others)
    if (!clean(rest)) return { event: "values", data: values }
    return new SplicedOut("values", { head: `{"messages":[`, body, tail: rest === "{}" ? "]}" : `],${rest.slice(1)}` })
  }

  const apply = (update: StateUpdate) => {
    const next = applyUpdate(state, update, indexes)
    if (Either.isRight(next)) state = next.right
    dirty = true
    if (wants("updates")) pending.push(update)
    if (wants("messages")) {
      for (const message of update.messages ?? []) if (message.type !== "remove") written.push(message)
    }
  }

  const flush = (out: Array<Out>) => {
    if (!dirty) return
    dirty = false
    if (wants("updates") && pending.length > 0) {
      // A compaction is an entry of its own, under the node DeerFlow's clients look for (they keep showing the
      // summarised messages); the updates around it are merged as before.
      let group: Array<StateUpdate> = []
      for (const update of pending) {
        if (!isCompaction(update)) {
          group.push(update)
          continue
        }
        if (group.length > 0) out.push(updatesOut(group))
        group = []
        out.push(updatesOut([update], SUMMARIZATION_NODE))
      }
      if (group.length > 0) out.push(updatesOut(group))
      pending = []
    }
    if (wants("values")) out.push(valuesOut())
    if (written.length > 0) {
      const fresh: Array<Record<string, unknown>> = []
      for (const message of written) {
        if (completed.has(message.id)) continue
        completed.add(message.id)
        fresh.push(messageDict(message))
      }
      written = []
      if (fresh.length > 0) out.push({ event: "messages/complete", data: fresh })
    }
  }

  const push = (events: Iterable<RunEvent>): Array<Out> => {
    const out: Array<Out> = []
    for (const event of events) {
      switch (event.type) {
        case "run_start":
          out.push({
            event: "metadata",
            data: { run_id: options.runId, thread_id: options.threadId, attempt: options.attempt ?? 1 }
          })
          if (callbacks !== undefined) out.push(...callbacks.start())
          break
        case "token": {
          flush(out)
          const id = event.message_id
          const raw = event.text ?? ""
          const text = redactorOf(`t:${id}`)?.push(raw) ?? raw
          const reasoning = event.reasoning === undefined
            ? undefined
            : redactorOf(`r:${id}`)?.push(event.reasoning) ?? event.reasoning
          let sofar = streamed.get(id)
          const first = sofar === undefined
          if (sofar === undefined) {
            step++
            streamed.set(id, sofar = TextBuilder.make())
          }
          sofar.append(text)
          if (callbacks !== undefined) out.push(...callbacks.token(id, text, reasoning))
          if (wants("messages")) {
            if (first) out.push({ event: "messages/metadata", data: { [id]: { metadata: meta("model") } } })
            const thought = (thoughts.get(id) ?? "") + (reasoning ?? "")
            thoughts.set(id, thought)
            if (first || text !== "" || (reasoning ?? "") !== "") {
              out.push({ event: "messages/partial", data: [partialOf(id, sofar.text(), thought)] })
            }
          }
          if (!wants("messages-tuple")) break
          if (reasoning !== undefined && reasoning !== "") {
            out.push({
              event: "messages",
              data: [
                { ...chunkBase(id), content: text, additional_kwargs: { reasoning_content: reasoning } },
                meta("model")
              ]
            })
          } else if (text !== "") {
            const spliced = chunkOf(id, text)
            out.push(
              spliced !== undefined
                ? new SplicedOut("messages", spliced)
                : { event: "messages", data: [{ ...chunkBase(id), content: text }, meta("model")] }
            )
          }
          break
        }
        case "message": {
          const message = event.message
          const sofar = streamed.get(message.id)?.text()
          const held = sofar === undefined ? "" : endOf(`t:${message.id}`)
          const thought = sofar === undefined ? "" : endOf(`r:${message.id}`)
          if (wants("messages") && message.type === "ai" && sofar !== undefined) {
            // the message so far, whole: what the deltas did not carry, its tool calls and usage
            const full = options.redact?.text(M.text(message)) ?? M.text(message)
            const reasoned = (thoughts.get(message.id) ?? "") + thought
            thoughts.delete(message.id)
            out.push({ event: "messages/partial", data: [partialOf(message.id, full, reasoned, message)] })
          }
          if (callbacks !== undefined) {
            let rest = ""
            if (message.type === "ai" && sofar !== undefined) {
              const full = options.redact?.text(M.text(message)) ?? M.text(message)
              const sent = sofar + held
              rest = held + (full.startsWith(sent) ? full.slice(sent.length) : "")
            }
            out.push(...callbacks.message(message, rest, thought))
          }
          if (wants("messages-tuple")) {
            if (message.type === "ai" && sofar !== undefined) {
              const full = options.redact?.text(M.text(message)) ?? M.text(message)
              const sent = sofar + held
              const content = held + (full.startsWith(sent) ? full.slice(sent.length) : "")
              const chunk = finalChunk(message, content)
              out.push({
                event: "messages",
                data: [
                  thought === "" ? chunk : { ...chunk, additional_kwargs: { reasoning_content: thought } },
                  meta("model")
                ]
              })
            } else {
              if (message.type === "ai") step++
              const node = message.type === "tool" ? "tools" : "model"
              out.push({ event: "messages", data: [messageDict(message), meta(node)] })
            }
          }
          apply({ messages: [message] })
          break
        }
        case "state":
          // a change of the goal alone is the goal evaluator's step, between turns (DeerFlow writes it as a
          // checkpoint of its own and streams its values): never merged with a turn's step, whatever came with it
          if (isGoalChange(event.update)) flush(out)
          apply(event.update)
          if (isGoalChange(event.update)) flush(out)
          break
        case "custom": {
          flush(out)
          const data = event.data
          const payload: Record<string, unknown> = typeof data === "object" && data !== null && !Array.isArray(data)
            ? { type: event.name, ...data }
            : { type: event.name, data }
          if (wants("custom")) out.push({ event: "custom", data: payload })
          if (callbacks !== undefined) out.push(...callbacks.custom(payload))
          break
        }
        case "run_end":
          flush(out)
          if (callbacks !== undefined) {
            const succeeded = event.status === "success" || event.status === "interrupted"
            out.push(...callbacks.end(succeeded, () => publicValues(state)))
          }
          if (event.status === "error") {
            out.push({
              event: "error",
              // DeerFlow's `{message, name}`, and LangGraph's `error` (the name) for its clients
              data: {
                message: event.error?.message ?? "The run failed",
                name: event.error?.name ?? "Error",
                error: event.error?.name ?? "Error"
              }
            })
          }
          break
      }
    }
    flush(out)
    return out
  }

  return {
    push,
    /** The state as the run's events left it. */
    state: () => state
  }
}
