/**
 * DynamicContext (SPEC §5.14, lead chain slot #15): what changes with time reaches the model in hidden
 * messages of the thread, never in the system prompt, so the prompt stays byte-identical across turns, runs
 * and days and providers can cache its prefix.
 *
 * Before each run, with the date from Effect's `Clock` (in `timezone`, else the machine's zone):
 * - first turn of a thread: the user's new message is swapped out for the context. A hidden system reminder
 *   `<system-reminder><current_date>…</current_date></system-reminder>` takes its id (so it sits where the
 *   message was, and replaying the write changes nothing), the memory block follows as a hidden human
 *   message `<id>__memory` (user-influenceable data stays at user level), and the message itself comes back
 *   last as `<id>__user`. The snapshot is then frozen for the thread: memory is read once per thread.
 * - later turns on the same day: nothing.
 * - the first turn after the date changed: the same swap, with the date only.
 *
 * Every run whose model reads a memory block (written now, or kept in the thread from its first turn) records
 * the block's sha256 in a `memory_context` custom event.
 *
 * Reminders carry `dynamic_context_reminder: true` (Summarization keeps them when it compacts the history;
 * the date one also `reminder_date`). `subagentLayer` gives subagents the date alone, in one reminder per run,
 * before the task.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { createHash } from "node:crypto"
import type { Memory } from "../services/Memory.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import * as Tracing from "../services/Tracing.js"
import { block, escapeText } from "../state/Markup.js"
import type { Message, MessageWrite } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"

/** `additional_kwargs` key marking a dynamic-context reminder. */
export const REMINDER_KEY = "dynamic_context_reminder"

/** `additional_kwargs` key holding the date a date reminder gave. */
export const DATE_KEY = "reminder_date"

/** Suffix of the id under which the user's message comes back after the swap. */
export const USER_SUFFIX = "__user"

/** Suffix of the id of the memory message. */
export const MEMORY_SUFFIX = "__memory"

/** How long reading memory may take before a turn goes without it. */
export const MEMORY_TIMEOUT = Duration.seconds(5)

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"] as const

const twoDigits = (n: number) => String(n).padStart(2, "0")

/**
 * The date a reminder gives: `YYYY-MM-DD, Weekday` in a time zone (an IANA name; undefined: the machine's).
 * Pure: the time is given. The machine's zone needs no `Intl.DateTimeFormat`, whose first use costs tens of
 * milliseconds (before a run's first model request).
 */
export const dateString = (millis: number, timeZone?: string | undefined): string => dateFormat(timeZone)(millis)

const localDate = (millis: number): string => {
  const date = new Date(millis)
  return `${date.getFullYear()}-${twoDigits(date.getMonth() + 1)}-${twoDigits(date.getDate())}, ${
    WEEKDAYS[date.getDay()]
  }`
}

/**
 * `dateString` in one time zone, its formatter made once (making an `Intl.DateTimeFormat` costs far more than
 * formatting with it); the machine's zone needs none. Throws, as `Intl` does, on an unknown time zone.
 */
export const dateFormat = (timeZone?: string | undefined): (millis: number) => string => {
  if (timeZone === undefined) return localDate
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    weekday: "long"
  })
  return (millis) => {
    const parts = format.formatToParts(new Date(millis))
    const part = (type: string) => parts.find((p) => p.type === type)?.value ?? ""
    return `${part("year")}-${part("month")}-${part("day")}, ${part("weekday")}`
  }
}

/** The content of a date reminder. */
export const dateReminder = (date: string): string =>
  `<system-reminder>\n<current_date>${escapeText(date)}</current_date>\n</system-reminder>`

/**
 * The content of the memory message: the `<memory>` block alone, as DeerFlow writes it (the body is escaped: the
 * user can influence it). Only the date reminder, at system level, is a `<system-reminder>`.
 */
export const memoryBlock = (body: string): string => block("memory", body.trim())

/** Whether a message is a dynamic-context reminder (date or memory). */
export const isReminder = (message: Message): boolean => message.additional_kwargs?.[REMINDER_KEY] === true

/** The date the thread was last told, if any (a legacy reminder without the key is read from its text). */
export const lastInjectedDate = (messages: ReadonlyArray<Message>): string | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (!isReminder(message)) continue
    const date = message.additional_kwargs?.[DATE_KEY]
    if (typeof date === "string") return date
    if (message.type === "system") {
      const legacy = /<current_date>([^<]*)<\/current_date>/.exec(M.text(message))
      if (legacy !== null) return legacy[1]!.trim()
    }
  }
  return undefined
}

/**
 * Whether a human message may take the context: not a reminder, not a summary, and not a message the swap made
 * (ids ending in `__user` or `__memory`), so a swap never swaps its own output again.
 */
export const isTarget = (message: Message): boolean =>
  message.type === "human" && !isReminder(message) && message.name !== "summary" &&
  !message.id.endsWith(USER_SUFFIX) && !message.id.endsWith(MEMORY_SUFFIX)

/** Name of the custom event that records the memory block a run's model reads. */
export const MEMORY_EVENT = "memory_context"

/** Whether a message is a memory block this middleware wrote (a hidden reminder under an `__memory` id). */
export const isMemoryMessage = (message: Message): boolean =>
  message.type === "human" && isReminder(message) && message.id.endsWith(MEMORY_SUFFIX)

/**
 * The memory block in effect for a run: the one its injection writes, else the thread's latest one (written by an
 * earlier run and kept in the thread, never read from memory again).
 */
export const effectiveMemory = (
  messages: ReadonlyArray<Message>,
  writes: ReadonlyArray<MessageWrite> | undefined
): Message | undefined => {
  const written = writes?.find((w): w is Message => "type" in w && isMemoryMessage(w as Message))
  if (written !== undefined) return written
  for (let i = messages.length - 1; i >= 0; i--) if (isMemoryMessage(messages[i]!)) return messages[i]
  return undefined
}

/** The sha256 (hex) of a memory block's text, as the run's `memory_context` event records it. */
export const memoryHash = (message: Message): string =>
  createHash("sha256").update(M.text(message), "utf8").digest("hex")

/**
 * The message the context goes with: the last human message, when it is the current turn's (nothing but tool
 * traffic after it is impossible at a run's start, so: no AI message after it), not a reminder, not a summary,
 * and not already swapped.
 */
export const target = (messages: ReadonlyArray<Message>): Message | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type === "ai") return undefined
    if (message.type !== "human") continue
    if (!isTarget(message)) return undefined
    return message
  }
  return undefined
}

/**
 * The writes that give a thread its context before a run, or none: the swap (a date reminder under the
 * target's id, the memory message when there is a memory body and the thread was never told anything, the
 * user's message again under `<id>__user`) when the thread was never told a date or was told another one.
 */
export const injection = (
  messages: ReadonlyArray<Message>,
  date: string,
  memory: string | undefined
): ReadonlyArray<MessageWrite> | undefined => {
  const last = lastInjectedDate(messages)
  if (last === date) return undefined
  const user = target(messages)
  if (user === undefined) return undefined
  const writes: Array<MessageWrite> = [
    M.system(dateReminder(date), {
      id: user.id,
      additional_kwargs: { hide_from_ui: true, [REMINDER_KEY]: true, [DATE_KEY]: date }
    })
  ]
  if (last === undefined && memory !== undefined && memory.trim() !== "") {
    writes.push(M.human(memoryBlock(memory), {
      id: `${user.id}${MEMORY_SUFFIX}`,
      additional_kwargs: { hide_from_ui: true, [REMINDER_KEY]: true }
    }))
  }
  writes.push({ ...user, id: `${user.id}${USER_SUFFIX}` } as Message)
  return writes
}

/** Options of `layer`. */
export interface Options {
  /** The time zone of the date (an IANA name); default: the machine's. */
  readonly timeZone?: string | undefined
  /** Where the memory block comes from; none: no memory block. */
  readonly memory?: Memory["Type"] | undefined
  /** Whether the memory block is injected (`memory.enabled` and `memory.injection_enabled`). */
  readonly injectMemory?: boolean | undefined
  /** The custom agent whose memory is read (default: the user's). */
  readonly agentName?: string | undefined
}

/** The DynamicContext middleware (lead agent). Requires `RunContext` and `RunState`. */
export const layer = (options: Options = {}): Middleware => {
  // made at the first run (an unknown time zone fails that run, as before), then kept for the agent's life
  let format: ((millis: number) => string) | undefined
  return MW.make(Effect.gen(function*() {
    const context = yield* RunContext
    const state = yield* RunState
    const memory = options.memory
    const before = Tracing.withSpanWhenTraced(Effect.gen(function*() {
      const messages = (yield* state.get).messages
      const date = (format ??= dateFormat(options.timeZone))(yield* Clock.currentTimeMillis)
      let writes: ReadonlyArray<MessageWrite> | undefined
      if (lastInjectedDate(messages) !== date && target(messages) !== undefined) {
        let body: string | undefined
        if (memory !== undefined && options.injectMemory !== false && lastInjectedDate(messages) === undefined) {
          const read = yield* memory.context({ userId: context.userId, agentName: options.agentName }).pipe(
            Effect.timeoutOption(MEMORY_TIMEOUT)
          )
          body = Option.getOrUndefined(read)
        }
        writes = injection(messages, date, body)
        if (writes !== undefined) yield* state.update({ messages: writes })
      }
      // which memory the run's model reads, by hash (DeerFlow's run journal records the same)
      const effective = effectiveMemory(messages, writes)
      if (effective !== undefined) yield* emitCustom(MEMORY_EVENT, { content_sha256: memoryHash(effective) })
      // (no stack trace: capturing one costs more than the rest of the span, at the start of every run)
    }), "DynamicContext.inject", { captureStackTrace: false })
    return { run: (loop) => Effect.zipRight(before, loop) }
  }))
}

/**
 * The writes that give a subagent's run its date: one hidden reminder with the date alone (no memory), put before
 * the task by the lead's swap (the reminder takes the task's id, the task comes back last as `<id>__user`), so the
 * task stays the run's last human message; appended when there is no task to go before.
 */
export const subagentInjection = (messages: ReadonlyArray<Message>, date: string): ReadonlyArray<MessageWrite> => {
  const task = target(messages)
  const kwargs = { hide_from_ui: true, [REMINDER_KEY]: true, [DATE_KEY]: date }
  if (task === undefined) return [M.system(dateReminder(date), { additional_kwargs: kwargs })]
  return [
    M.system(dateReminder(date), { id: task.id, additional_kwargs: kwargs }),
    { ...task, id: `${task.id}${USER_SUFFIX}` } as Message
  ]
}

/**
 * DeerFlow's SubagentDateContext: before each run of a subagent, one hidden reminder with the date alone, before
 * the task (`subagentInjection`).
 */
export const subagentLayer = (options: Pick<Options, "timeZone"> = {}): Middleware => {
  let format: ((millis: number) => string) | undefined
  return MW.make(Effect.gen(function*() {
    const state = yield* RunState
    const before = Effect.gen(function*() {
      const date = (format ??= dateFormat(options.timeZone))(yield* Clock.currentTimeMillis)
      const messages = (yield* state.get).messages
      return yield* state.update({ messages: subagentInjection(messages, date) })
    })
    return { run: (loop) => Effect.zipRight(before, loop) }
  }))
}

/** Its chain entry: before_agent, the date (and memory) as hidden messages, never in the prompt. */
export const entry = (options: Options = {}) =>
  Chain.entry("DynamicContext", () => layer(options), [
    { inside: "Uploads", reason: "the user's message is moved after the context with its uploads block" },
    { inside: "ThreadData", reason: "the user's message is moved after the context with its run stamp" }
  ])

/** The subagent's chain entry: the date, alone, in one hidden reminder per run (no memory). */
export const subagentEntry = (options: Pick<Options, "timeZone"> = {}) =>
  Chain.entry("SubagentDateContext", () => subagentLayer(options), [
    { inside: "ThreadData", reason: "the task it moves after the reminder keeps the run stamp ThreadData gave it" }
  ])
