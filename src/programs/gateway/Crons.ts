/**
 * LangGraph's crons on the gateway's scheduler. A cron is a scheduled task (`TaskStore`) of kind cron: its
 * schedule (`schedule_spec.cron`, with its `end_time`), time zone, assistant and thread are the task's, and what
 * LangGraph keeps besides (the run `payload`, the cron's `metadata`, a stateless cron's `on_run_completed`) is
 * its `cron` field, as the JSON `Stored` describes. So one scheduler ticks DeerFlow's tasks and LangGraph's crons
 * alike: a tick is claimed by one process of those sharing the database, is not run again after a restart, and a
 * cron has one run at a time (a tick coming while its previous run goes is recorded skipped).
 *
 * A payload is read as a run request is (`RunSettings.prepare`: interrupts, input that is not messages, an unknown
 * model are refused): when a cron is created or changed, so that its runs do not fail for what could be said then,
 * and again at each tick (`launch`), over the payload as stored. A cron's run is never an admin's.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import { describeParseError } from "./api/Problem.js"
import { runFields } from "./api/Crons.js"
import { MultitaskStrategy } from "./api/Runs.js"
import { JsonRecord } from "./api/Threads.js"
import * as InputBounds from "./InputBounds.js"
import * as Protocol from "./Protocol.js"
import * as Quotas from "./Quotas.js"
import * as RunSettings from "./RunSettings.js"
import type { ActiveRun, RunRequest } from "./Runs.js"
import type { LaunchError } from "./scheduler/Scheduler.js"
import type { Service as TaskStoreService, Task } from "./scheduler/TaskStore.js"
import * as ThreadIds from "./ThreadIds.js"

/** The run a cron starts at each tick, as kept (LangGraph's cron `payload`: the API's run fields, checked again). */
export const Payload = Schema.Struct({
  assistant_id: Schema.String,
  multitask_strategy: Schema.optional(Schema.NullOr(MultitaskStrategy)),
  ...runFields
})
export type Payload = typeof Payload.Type

/** A cron's own fields, as a task's `cron` keeps them. */
export const Stored = Schema.Struct({
  payload: JsonRecord,
  metadata: JsonRecord,
  on_run_completed: Schema.NullOr(Schema.Literal("delete", "keep"))
})
export type Stored = typeof Stored.Type

const decodeStored = Schema.decodeUnknownEither(Stored)
const decodePayload = Schema.decodeUnknownEither(Payload, { onExcessProperty: "ignore" })

/** The fields of a run payload a cron keeps (of those LangGraph's clients send). */
export const PAYLOAD_KEYS = [
  "input",
  "config",
  "context",
  "metadata",
  "interrupt_before",
  "interrupt_after",
  "webhook",
  "stream_mode",
  "stream_subgraphs",
  "stream_resumable",
  "durability",
  "checkpoint_during",
  "multitask_strategy"
] as const

/** The largest payload and metadata a cron keeps (bytes of their JSON). */
export const MAX_STORED_BYTES = 256 * 1024

/** A task's cron fields, if it is a cron (and they are readable). */
export const storedOf = (task: Task): Option.Option<Stored> =>
  task.cron == null ? Option.none() : Option.getRight(decodeStored(task.cron))

/** A cron's payload as a run reads it, or why it cannot be read. */
export const payloadOf = (payload: Readonly<Record<string, unknown>>): Either.Either<Payload, string> =>
  Either.mapLeft(decodePayload(payload), (error) => `payload: ${describeParseError(error)}`)

/** A cron's run started: its thread as the cron's user names it, and the run (none: started before, by a process
 * that stopped; see `Scheduler.settle`). */
export interface Launched {
  readonly threadId: string
  readonly run: ActiveRun | undefined
}

/**
 * Starts a tick's run of cron `task` under `ids.runId`: on its thread, or on a new thread of its user (metadata
 * `cron_id`; `ids.threadId`, made the first time), deleted after the run unless the cron keeps it. The run's
 * metadata is the cron's payload's, with `cron_id`.
 */
export const launch = (
  deps: {
    readonly start: (
      request: RunRequest & { readonly runId: string }
    ) => Effect.Effect<ActiveRun | undefined, { readonly message: string }>
    readonly store: ThreadStore["Type"]
    readonly quotas: Quotas.Service
    readonly app: AppConfigService["Type"]
  },
  task: Task,
  ids: { readonly runId: string; readonly threadId: string }
): Effect.Effect<Launched, LaunchError> =>
  Effect.gen(function*() {
    const stored = yield* Option.match(storedOf(task), {
      onNone: () => Effect.fail({ message: `Cron ${task.id} is not one this build reads` }),
      onSome: Effect.succeed
    })
    const payload = yield* Either.match(payloadOf(stored.payload), {
      onLeft: (message) => Effect.fail({ message }),
      onRight: Effect.succeed
    })
    const { config } = deps.app
    const prepared = yield* Either.match(
      RunSettings.prepare(payload, {
        recursionLimit: config.recursion_limit,
        maxRecursionLimit: config.max_recursion_limit,
        admin: false,
        bounds: InputBounds.fromConfig(config.gateway)
      }),
      { onLeft: ({ message }) => Effect.fail({ message }), onRight: Effect.succeed }
    )
    const stateless = task.thread_id === null
    const publicId = task.thread_id ?? ids.threadId
    const thread = yield* ThreadIds.forRun(
      deps.store,
      deps.quotas,
      task.user_id,
      publicId,
      stateless ? { cron_id: task.id } : undefined
    )
    const run = yield* deps.start({
      runId: ids.runId,
      threadId: thread.thread_id,
      publicThreadId: publicId,
      userId: task.user_id,
      assistantId: task.assistant_id,
      // (under ids of the run's: a run adopted again is given the same messages, not second ones)
      messages: prepared.messages.map((message, i) => ({ ...message, id: `${ids.runId}-input-${i}` })),
      settings: prepared.settings,
      modes: Protocol.modesOf(payload.stream_mode),
      multitaskStrategy: payload.multitask_strategy ?? "reject",
      metadata: { ...(payload.metadata ?? {}), cron_id: task.id },
      deleteThread: stateless && stored.on_run_completed !== "keep"
    })
    return { threadId: publicId, run }
  }).pipe(Effect.mapError(Quotas.launchError))

/** Deletes the user's crons of thread `threadId` (the thread was deleted, as LangGraph deletes them with it). */
export const removeThreadCrons = (tasks: TaskStoreService, userId: string, threadId: string) =>
  Effect.flatMap(tasks.crons(userId), (crons) =>
    Effect.forEach(crons.filter((cron) => cron.thread_id === threadId), (cron) => tasks.remove(cron.id, userId), {
      discard: true
    }))
