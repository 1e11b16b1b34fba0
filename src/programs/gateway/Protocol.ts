/**
 * The LangGraph Platform wire format the gateway speaks (SPEC §12): the thread, run and state objects (of the
 * shapes `api/` declares, as the request bodies re-exported here), the input messages of a run, and the framing
 * of server-sent events. What a run's events become in each stream mode is `Projection.ts`. Pure: no services,
 * no I/O.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Clarification from "../../middleware/Clarification.js"
import * as DynamicContext from "../../middleware/DynamicContext.js"
import * as InputSanitization from "../../middleware/InputSanitization.js"
import * as SkillActivation from "../../middleware/SkillActivation.js"
import * as ViewImage from "../../middleware/ViewImage.js"
import type { CheckpointRecord, RunRecord, ThreadSummary } from "../../services/ThreadStore.js"
import type { ContentBlock, Message, ToolCall } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { ThreadState } from "../../state/ThreadState.js"
import { describeParseError } from "./api/Problem.js"
import type { RunObject, StreamMode } from "./api/Runs.js"
import type { StateObject, ThreadObject } from "./api/Threads.js"
import { isRecord } from "../../state/Json.js"

// ---------------------------------------------------------------------------------------------------------
// Requests (declared with their endpoints, in api/)

export { AssistantSearch } from "./api/Assistants.js"
export { describeParseError } from "./api/Problem.js"
export { RunCreate, StreamMode, StreamModes } from "./api/Runs.js"
export {
  HistoryRequest,
  StateUpdateRequest,
  ThreadCreate,
  ThreadPatch,
  ThreadSearch
} from "./api/Threads.js"

/** The modes asked for, in order, without repeats (default `["values"]`). */
export const modesOf = (
  value: StreamMode | ReadonlyArray<StreamMode> | null | undefined
): ReadonlyArray<StreamMode> => {
  if (value == null) return ["values"]
  const list = typeof value === "string" ? [value] : value
  return list.length === 0 ? ["values"] : [...new Set(list)]
}

/** A custom agent's name from an assistant id (SPEC §12.1: lower-case, hyphenated); none for the lead agent. */
export const agentNameOf = (assistantId: string | null | undefined): string | undefined => {
  if (assistantId == null || assistantId === "" || assistantId === LEAD_AGENT) return undefined
  const name = assistantId.trim().toLowerCase().replace(/[\s_]+/g, "-")
  return name === LEAD_AGENT.replace("_", "-") ? undefined : name
}

/** The assistant (graph) every run maps to (SPEC §3). */
export const LEAD_AGENT = "lead_agent"

/**
 * Context keys copied from a run's `context` into its settings (SPEC §12.1); `__`-prefixed keys never pass.
 * `non_interactive` is for internal callers only and is dropped.
 */
export const CONTEXT_KEYS: ReadonlyArray<string> = [
  "model_name",
  "mode",
  "thinking_enabled",
  "reasoning_effort",
  "is_plan_mode",
  "subagent_enabled",
  "max_concurrent_subagents",
  "max_total_subagents",
  "agent_name",
  "is_bootstrap"
]

/** `context` restricted to the keys a caller may set. */
export const allowedContext = (context: Readonly<Record<string, unknown>> | null | undefined) => {
  const out: Record<string, unknown> = {}
  if (context == null) return out
  for (const key of CONTEXT_KEYS) if (Object.hasOwn(context, key)) out[key] = context[key]
  return out
}

/** The recursion limit of a run: the client's (clamped to `max`), else `fallback` (SPEC §12.1). */
export const recursionLimit = (requested: number | null | undefined, fallback: number, max: number): number =>
  requested == null || !Number.isFinite(requested) || requested <= 0
    ? Math.min(fallback, max)
    : Math.min(Math.floor(requested), max)

// ---------------------------------------------------------------------------------------------------------
// Input messages

const Role = Schema.Literal("human", "user", "ai", "assistant", "system", "tool")

/**
 * Content as clients send it: a list may hold bare strings beside blocks (LangChain takes them as text, and some
 * SDK and IM clients send that shape); each becomes a text block, so the message is read and sanitised as text.
 */
const InputContent = Schema.Union(Schema.String, Schema.Array(Schema.Union(Schema.String, M.ContentBlock)))

const asContent = (content: typeof InputContent.Type): M.Content =>
  typeof content === "string" || !content.some((block) => typeof block === "string")
    ? content as M.Content
    : content.map((block) => typeof block === "string" ? { type: "text" as const, text: block } : block)

/** A message as clients send it: LangChain's dict (`type`) or OpenAI's (`role`); id optional. */
const InputMessage = Schema.Struct({
  type: Schema.optional(Role),
  role: Schema.optional(Role),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  content: InputContent
}, { key: Schema.String, value: Schema.Unknown })

const InputMessages = Schema.Struct({ messages: Schema.optional(Schema.NullOr(Schema.Array(InputMessage))) }, {
  key: Schema.String,
  value: Schema.Unknown
})

/** Server-owned keys a client may not set on its messages (SPEC §12.1). */
const SERVER_KEYS = [
  "original_user_content",
  DynamicContext.REMINDER_KEY,
  DynamicContext.DATE_KEY,
  ViewImage.CONTEXT_KEY,
  "deerflow_error_fallback",
  // a slash activation is the server's (SkillActivation's): a client's mark would choose the skill policy
  SkillActivation.ACTIVATION_KEY,
  SkillActivation.TARGET_KEY,
  SkillActivation.PATH_KEY
]

const decodeMessage = Schema.decodeUnknownEither(M.Message)

/**
 * The messages of a run's `input` (`{messages: [...]}`), as thread messages: roles mapped to types, missing
 * ids made, server-owned metadata removed, a human message marked hidden neutralised
 * (`InputSanitization.neutralizeHiddenClientMessage`). A value that is not a message is a readable error.
 */
export const inputMessages = (input: unknown): Either.Either<ReadonlyArray<Message>, string> => {
  if (input == null) return Either.right([])
  const decoded = Schema.decodeUnknownEither(InputMessages)(input)
  if (Either.isLeft(decoded)) return Either.left(`input: ${describeParseError(decoded.left)}`)
  const out: Array<Message> = []
  for (const [i, raw] of (decoded.right.messages ?? []).entries()) {
    const role = raw.type ?? raw.role ?? "human"
    const type = role === "user" ? "human" : role === "assistant" ? "ai" : role
    const { role: _role, ...rest } = raw
    const kwargs = typeof rest.additional_kwargs === "object" && rest.additional_kwargs !== null
      ? { ...(rest.additional_kwargs as Record<string, unknown>) }
      : undefined
    if (kwargs !== undefined) for (const key of SERVER_KEYS) delete kwargs[key]
    const candidate = {
      ...rest,
      type,
      content: asContent(raw.content),
      id: raw.id ?? M.newId(),
      ...(kwargs !== undefined ? { additional_kwargs: kwargs } : {})
    }
    const message = decodeMessage(candidate)
    if (Either.isLeft(message)) return Either.left(`input.messages.${i}: ${describeParseError(message.left)}`)
    // (a hidden one is left as it is by InputSanitization, as the harness's own are: neutralised here)
    out.push(InputSanitization.neutralizeHiddenClientMessage(message.right))
  }
  return Either.right(out)
}

/** The longest `input.title` a run takes. */
export const MAX_INPUT_TITLE = 1000

/**
 * The thread's title a run's input sets (LangGraph applies a run's input values to the state; DeerFlow's app sends
 * the thread's title with a regenerated or edited turn, so a rename is not rolled back with the checkpoint): a
 * non-empty string, or none.
 */
export const inputTitle = (input: unknown): Either.Either<string | undefined, string> => {
  const title = typeof input === "object" && input !== null && !Array.isArray(input)
    ? (input as Record<string, unknown>).title
    : undefined
  if (title == null || title === "") return Either.right(undefined)
  if (typeof title !== "string") return Either.left("input.title: expected a string.")
  if (title.length > MAX_INPUT_TITLE) return Either.left(`input.title: at most ${MAX_INPUT_TITLE} characters.`)
  return Either.right(title)
}

/**
 * The most bytes of JSON of what a run keeps besides its messages (`kwargs`): its `input` besides `messages` (its
 * `title`, keys Antler does not read), its `context` and its `config` (`configurable`, `context`, `metadata`...).
 * They are answered with each run of a list, where runs with megabytes of them made a list of a thread's runs
 * larger than the server can build.
 */
export const MAX_RUN_EXTRA_BYTES = 128 * 1024

/** Why what a run keeps besides its messages is too large, if it is. */
export const runExtraProblem = (request: {
  readonly input?: unknown
  readonly context?: unknown
  readonly config?: unknown
}): string | undefined => {
  const input = typeof request.input === "object" && request.input !== null && !Array.isArray(request.input)
    ? { ...(request.input as Record<string, unknown>), messages: undefined }
    : request.input
  const size = Buffer.byteLength(JSON.stringify({ input, context: request.context, config: request.config }))
  return size <= MAX_RUN_EXTRA_BYTES ? undefined : `input (besides its messages), context and config: ${size} bytes ` +
    `of JSON, more than ${MAX_RUN_EXTRA_BYTES} (128 KiB), the most a run keeps.`
}

/**
 * The messages of a run as the thread should get them: a lone human message while a clarification question
 * is pending becomes its answer (as the CLI does; DeerFlow's UI marks the answer itself), keeping the client's
 * id; `command.resume` answers the pending question too.
 */
export const withClarificationAnswer = (
  state: ThreadState,
  messages: ReadonlyArray<Message>,
  resume: unknown
): ReadonlyArray<Message> => {
  const pending = Clarification.pending(state.messages)
  if (pending === undefined) return messages
  if (messages.length === 0 && resume !== undefined) {
    const text = typeof resume === "string" ? resume : JSON.stringify(resume)
    return [Clarification.answer(pending, text)]
  }
  const [only] = messages
  if (messages.length !== 1 || only!.type !== "human" || Clarification.isAnswer(only!.additional_kwargs ?? {})) {
    return messages
  }
  const answer = Clarification.answer(pending, M.text(only!))
  return [{ ...answer, id: only!.id, additional_kwargs: { ...only!.additional_kwargs, ...answer.additional_kwargs } }]
}

// ---------------------------------------------------------------------------------------------------------
// Objects

const isDataImage = (block: ContentBlock): boolean => {
  if (block.type !== "image_url") return false
  const image = (block as { readonly image_url?: unknown }).image_url
  return isRecord(image) && String(image["url"] ?? "").startsWith("data:")
}

/**
 * The messages without the `data:` image blocks of those hidden from the UI (DeerFlow's
 * `strip_data_url_image_blocks`): base64 pixels meant for the model, of no use to a client and large. Visible
 * messages, linked images and every message's place are kept; the same array when there is nothing to drop.
 */
export const withoutHiddenDataImages = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  let out: Array<Message> | undefined
  messages.forEach((message, i) => {
    if (message.additional_kwargs?.hide_from_ui !== true || typeof message.content === "string") return
    if (!message.content.some(isDataImage)) return
    out ??= messages.slice()
    out[i] = { ...message, content: message.content.filter((block) => !isDataImage(block)) } as Message
  })
  return out ?? messages
}

/**
 * The thread's values as clients see them: the state without host paths (`thread_data`, viewed images'
 * `actual_path`) and without the base64 images of hidden messages (`withoutHiddenDataImages`).
 */
export const publicValues = (state: ThreadState): Record<string, unknown> => {
  const { thread_data: _hostPaths, viewed_images, messages, ...rest } = state
  const images: Record<string, unknown> = {}
  for (const [path, image] of Object.entries(viewed_images)) {
    images[path] = { mime_type: image.mime_type, size: image.size }
  }
  return { messages: withoutHiddenDataImages(messages), ...rest, viewed_images: images }
}

/** LangGraph's run status for a stored run (SPEC §12.3). */
export const runStatus = (
  record: Pick<RunRecord, "status">
): "pending" | "running" | "success" | "error" | "interrupted" => {
  switch (record.status) {
    case "pending":
    case "running":
    case "success":
    case "error":
      return record.status
    // a run waiting for a clarification answer completed (DeerFlow's clarification ends the run with success)
    case "interrupted":
      return "success"
    case "cancelled":
      return "interrupted"
  }
}

/** A run's stored `kwargs` with `config.configurable` naming the run and its thread (as the record does). */
const kwargsOf = (stored: unknown, record: RunRecord): Record<string, unknown> => {
  if (!isRecord(stored)) return {}
  const config = isRecord(stored.config) ? stored.config : {}
  const configurable = isRecord(config.configurable) ? config.configurable : {}
  return {
    ...stored,
    config: { ...config, configurable: { ...configurable, run_id: record.run_id, thread_id: record.thread_id } }
  }
}

/** What a run used and wrote, as DeerFlow's run response counts it. */
export interface RunCounts {
  readonly total_input_tokens: number
  readonly total_output_tokens: number
  readonly total_tokens: number
  /** The run's own model calls that reported tokens (not its subagents'). */
  readonly llm_call_count: number
  readonly lead_agent_tokens: number
  readonly subagent_tokens: number
  /** Titles, summaries, memory updates. */
  readonly middleware_tokens: number
  /** The questions, answers and tool results the run wrote (not the hidden ones). */
  readonly message_count: number
}

/** A run that used and wrote nothing (yet). */
export const noCounts: RunCounts = {
  total_input_tokens: 0,
  total_output_tokens: 0,
  total_tokens: 0,
  llm_call_count: 0,
  lead_agent_tokens: 0,
  subagent_tokens: 0,
  middleware_tokens: 0,
  message_count: 0
}

const COUNTED_MESSAGES: ReadonlySet<string> = new Set(["human", "ai", "tool"])

/** Who made a model call, as DeerFlow's usage counts it: the lead agent, a subagent, or a middleware. */
export type Caller = "lead_agent" | "subagent" | "middleware"

/** The caller of a usage record by its `purpose` (none: the lead agent's own call). */
export const callerOf = (purpose: string | undefined): Caller =>
  purpose === undefined || purpose === "agent" ? "lead_agent" : purpose === "subagent" ? "subagent" : "middleware"

/**
 * Each run's counts, by run id, from its thread's checkpoints: the usage records of its model calls (by caller as
 * the thread's `token-usage`) and the messages it first wrote.
 */
export const runCounts = (records: ReadonlyArray<CheckpointRecord>): ReadonlyMap<string, RunCounts> => {
  const counts = new Map<string, { -readonly [K in keyof RunCounts]: number }>()
  // by id, the run that first wrote the message and its latest version (a removed one still counts: the run
  // wrote it), as a date reminder takes over the id of the question it moves
  const written = new Map<string, { readonly run: string; message: Message }>()
  for (const record of records) {
    let run = counts.get(record.run_id)
    if (run === undefined) counts.set(record.run_id, run = { ...noCounts })
    for (const update of record.updates) {
      for (const delta of update.token_usage ?? []) {
        const total = M.spentTokens(delta)
        if (total <= 0) continue
        run.total_input_tokens += delta.input_tokens
        run.total_output_tokens += delta.output_tokens
        run.total_tokens += total
        const caller = callerOf(delta.purpose)
        // (a subagent's usage is its task's, rolled up: none of this run's model calls, as in DeerFlow)
        if (caller !== "subagent") run.llm_call_count += 1
        run[`${caller}_tokens`] += total
      }
      for (const message of update.messages ?? []) {
        if (message.type === "remove") continue
        const known = written.get(message.id)
        if (known === undefined) written.set(message.id, { run: record.run_id, message })
        else known.message = message
      }
    }
  }
  for (const { run, message } of written.values()) {
    const count = counts.get(run)
    if (count !== undefined && COUNTED_MESSAGES.has(message.type) && !M.isHidden(message)) count.message_count += 1
  }
  return counts
}

/** LangGraph's Run object, with DeerFlow's counts of what the run used and wrote. */
export const runObject = (record: RunRecord, counts: RunCounts = noCounts): typeof RunObject.Type => {
  const metadata = (record.metadata ?? {}) as Record<string, unknown>
  return {
    run_id: record.run_id,
    thread_id: record.thread_id,
    assistant_id: typeof metadata.assistant_id === "string" ? metadata.assistant_id : LEAD_AGENT,
    created_at: record.started_at,
    updated_at: record.ended_at ?? record.started_at,
    status: runStatus(record),
    metadata: metadata.metadata ?? {},
    multitask_strategy: metadata.multitask_strategy ?? "reject",
    kwargs: kwargsOf(metadata.kwargs, record),
    stop_reason: record.stop_reason,
    ...(record.error != null ? { error: record.error } : {}),
    total_input_tokens: counts.total_input_tokens,
    total_output_tokens: counts.total_output_tokens,
    total_tokens: counts.total_tokens,
    llm_call_count: counts.llm_call_count,
    lead_agent_tokens: counts.lead_agent_tokens,
    subagent_tokens: counts.subagent_tokens,
    middleware_tokens: counts.middleware_tokens,
    message_count: counts.message_count
  }
}

/** LangGraph's Thread object. */
export const threadObject = (
  summary: ThreadSummary,
  status: "idle" | "busy" | "interrupted" | "error",
  values: Record<string, unknown>
): typeof ThreadObject.Type => ({
  thread_id: summary.thread_id,
  created_at: summary.created_at,
  updated_at: summary.updated_at,
  metadata: summary.metadata ?? {},
  status,
  values,
  interrupts: {}
})

/** LangGraph's checkpoint reference. */
export const checkpointRef = (threadId: string, seq: number | undefined) =>
  seq === undefined
    ? null
    : { thread_id: threadId, checkpoint_ns: "", checkpoint_id: String(seq), checkpoint_map: null }

/** What the run id of a state update's checkpoint starts with (`POST /threads/{id}/state`). */
export const UPDATE_WRITER = "update-state-"

/** LangGraph's ThreadState object, with DeerFlow's `checkpoint_id` and `parent_checkpoint_id`. */
export const stateObject = (
  threadId: string,
  state: ThreadState,
  at: {
    readonly seq?: number | undefined
    readonly parent?: number | undefined
    readonly created_at?: string | null
    readonly run_id?: string | undefined
    readonly step?: number
  }
): typeof StateObject.Type => ({
  values: publicValues(state),
  next: [],
  tasks: [],
  checkpoint: checkpointRef(threadId, at.seq) ?? { thread_id: threadId, checkpoint_ns: "", checkpoint_id: null },
  parent_checkpoint: checkpointRef(threadId, at.parent),
  checkpoint_id: at.seq === undefined ? null : String(at.seq),
  parent_checkpoint_id: at.parent === undefined ? null : String(at.parent),
  metadata: {
    // (a state update's checkpoint is LangGraph's `update`; a run's, `loop`)
    source: at.run_id?.startsWith(UPDATE_WRITER) === true ? "update" : "loop",
    step: at.step ?? -1,
    ...(at.run_id !== undefined ? { run_id: at.run_id } : {})
  },
  created_at: at.created_at ?? null,
  interrupts: []
})

// ---------------------------------------------------------------------------------------------------------
// Server-sent events

/** One event of a run's stream, with the id it is replayed by. `data` is JSON text. */
export interface Frame {
  readonly id: number
  readonly event: string
  readonly data: string
}

/**
 * The SSE text of a frame: `event: …\ndata: <json>\nid: <id>\n\n` (SPEC §12.2). A `gap` has no `id:`, as DeerFlow's:
 * it is no event of the run, so a client's `Last-Event-ID` stays the last event it got.
 */
export const sse = (frame: Frame): string =>
  frame.event === "gap"
    ? `event: gap\ndata: ${frame.data}\n\n`
    : `event: ${frame.event}\ndata: ${frame.data}\nid: ${frame.id}\n\n`

/** The SSE heartbeat comment. */
export const HEARTBEAT = ": heartbeat\n\n"

/** The whole stream of a run that has ended whose events are no longer kept: DeerFlow's `end`, with no id. */
export const END_WITHOUT_ID = "event: end\ndata: null\n\n"

/** Which mode a frame belongs to, for filtering a join by `stream_mode`; control frames belong to all. */
export const modeOfEvent = (event: string): StreamMode | undefined =>
  event === "messages"
    ? "messages-tuple"
    : event.startsWith("messages/")
    ? "messages"
    : event === "values" || event === "updates" || event === "custom" || event === "events"
    ? event
    : undefined

/**
 * The `gap` event's payload (SPEC §12.2): the cursor fell out of the replay window. A client that gave no cursor
 * (`requested` 0) is named by none (`null`, as DeerFlow's).
 */
export const gapPayload = (runId: string, requested: number, earliest: number, latest: number) => ({
  code: "stream_replay_gap",
  run_id: runId,
  requested_event_id: requested > 0 ? String(requested) : null,
  earliest_available_event_id: String(earliest),
  latest_available_event_id: String(latest),
  recovery: "reload_durable_state"
})

/** A message's tool calls as the chunks that carried them, whole. */
export const toolCallChunks = (calls: ReadonlyArray<ToolCall>) =>
  calls.map((call, index) => ({
    name: call.name,
    args: JSON.stringify(call.args),
    id: call.id,
    index,
    type: "tool_call_chunk"
  }))
