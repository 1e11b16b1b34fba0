/**
 * LangGraph's crons on the gateway's scheduler. A cron is a scheduled task (`TaskStore`) of kind cron: its
 * schedule (`schedule_spec.cron`, with its `end_time`), time zone, assistant and thread are the task's, and what
 * LangGraph keeps besides (the run `payload`, the cron's `metadata`, a stateless cron's `on_run_completed`) is
 * its `cron` field, as the JSON `Stored` describes. So one scheduler ticks DeerFlow's tasks and LangGraph's crons
 * alike: a tick is claimed by one process of those sharing the database, is not run again after a restart, and a
 * cron has one run at a time (a tick coming while its previous run goes is recorded skipped).
 *
 * `prepare` turns a payload into what the run manager starts, refusing what a run would refuse (interrupts, input
 * that is not messages, an unknown model); it runs when a cron is created or changed, so that its runs do not
 * fail for what could be said then, and again at each tick (`launch`), over the payload as stored.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import type { Message } from "../../state/Message.js"
import * as Factory from "../Factory.js"
import { describeParseError } from "./api/Problem.js"
import { StreamModes } from "./api/Runs.js"
import { JsonRecord } from "./api/Threads.js"
import * as Protocol from "./Protocol.js"
import type { ActiveRun, Service as RunsService } from "./Runs.js"
import type { Service as TaskStoreService, Task } from "./scheduler/TaskStore.js"
import * as ThreadIds from "./ThreadIds.js"

/** The run a cron starts at each tick, as kept (LangGraph's cron `payload`). */
export const Payload = Schema.Struct({
  assistant_id: Schema.String,
  input: Schema.optional(Schema.NullOr(Schema.Unknown)),
  config: Schema.optional(Schema.NullOr(Schema.Struct({
    recursion_limit: Schema.optional(Schema.NullOr(Schema.Number)),
    configurable: Schema.optional(Schema.NullOr(JsonRecord)),
    tags: Schema.optional(Schema.Unknown)
  }))),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  interrupt_before: Schema.optional(Schema.NullOr(Schema.Unknown)),
  interrupt_after: Schema.optional(Schema.NullOr(Schema.Unknown)),
  stream_mode: Schema.optional(Schema.NullOr(StreamModes)),
  multitask_strategy: Schema.optional(Schema.NullOr(Schema.Literal("reject", "interrupt", "rollback", "enqueue")))
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

/** What the run manager starts for a cron. */
export interface Prepared {
  readonly messages: ReadonlyArray<Message>
  readonly settings: Record<string, unknown>
}

/** Limits of `prepare`: the configuration's recursion limits, and the models runs may name (none: any). */
export interface Limits {
  readonly recursionLimit: number
  readonly maxRecursionLimit: number
  readonly models?: ReadonlySet<string> | undefined
}

/** The messages and settings of a cron's run, or what is wrong with its payload (the field named). */
export const prepare = (payload: Payload, limits: Limits): Either.Either<Prepared, string> => {
  for (const key of ["interrupt_before", "interrupt_after"] as const) {
    const value = payload[key]
    if (value != null && !(Array.isArray(value) && value.length === 0)) {
      return Either.left(`${key} is not supported: Antler's agent has no graph nodes to stop at.`)
    }
  }
  return Either.flatMap(Protocol.inputMessages(payload.input), (messages) => {
    const settings: Record<string, unknown> = Factory.mergeRuntime(
      payload.config?.configurable,
      Protocol.allowedContext(payload.context)
    )
    delete settings.non_interactive
    const agentName = Protocol.agentNameOf(payload.assistant_id)
    if (agentName !== undefined && settings.agent_name === undefined) settings.agent_name = agentName
    settings.recursion_limit = Protocol.recursionLimit(
      payload.config?.recursion_limit,
      limits.recursionLimit,
      limits.maxRecursionLimit
    )
    for (const key of ["model_name", "model"]) {
      const name = settings[key]
      const known = limits.models
      if (typeof name === "string" && known !== undefined && known.size > 0 && !known.has(name)) {
        return Either.left(`Unknown model "${name}". Configured models: ${[...known].join(", ")}.`)
      }
    }
    // a cron's run is not an admin's: it may not change the default agent's SOUL.md (see handlers/Runs.ts)
    if (settings.is_bootstrap === true && settings.agent_name == null) {
      return Either.left("context.is_bootstrap needs context.agent_name (the agent to create, one of your own).")
    }
    return Either.right({ messages, settings })
  })
}

/** A cron's run started: its id, its thread as the cron's user names it, and the run. */
export interface Launched {
  readonly runId: string
  readonly threadId: string
  readonly run: ActiveRun
}

/**
 * Starts a tick's run of cron `task`: on its thread, or on a new thread of its user (metadata `cron_id`), deleted
 * after the run unless the cron keeps it. The run's metadata is the cron's payload's, with `cron_id`.
 */
export const launch = (
  deps: {
    readonly runs: RunsService
    readonly store: ThreadStore["Type"]
    readonly app: AppConfigService["Type"]
  },
  task: Task
): Effect.Effect<Launched, { readonly message: string }> =>
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
      prepare(payload, { recursionLimit: config.recursion_limit, maxRecursionLimit: config.max_recursion_limit }),
      { onLeft: (message) => Effect.fail({ message }), onRight: Effect.succeed }
    )
    const stateless = task.thread_id === null
    const publicId = task.thread_id ?? M.newId()
    const thread = stateless
      ? yield* ThreadIds.create(deps.store, task.user_id, publicId, { cron_id: task.id })
      : yield* ThreadIds.find(deps.store, task.user_id, publicId)
    if (Option.isNone(thread)) {
      return yield* Effect.fail({
        message: stateless ? "Cannot create the run's thread" : `Thread ${publicId} not found`
      })
    }
    const run = yield* deps.runs.start({
      threadId: thread.value.thread_id,
      publicThreadId: publicId,
      userId: task.user_id,
      assistantId: task.assistant_id,
      messages: prepared.messages,
      settings: prepared.settings,
      modes: Protocol.modesOf(payload.stream_mode),
      multitaskStrategy: payload.multitask_strategy ?? "reject",
      metadata: { ...(payload.metadata ?? {}), cron_id: task.id },
      deleteThread: stateless && stored.on_run_completed !== "keep"
    })
    return { runId: run.runId, threadId: publicId, run }
  }).pipe(Effect.mapError((error) => ({ message: error.message })))

/** Deletes the user's crons of thread `threadId` (the thread was deleted, as LangGraph deletes them with it). */
export const removeThreadCrons = (tasks: TaskStoreService, userId: string, threadId: string) =>
  Effect.flatMap(tasks.crons(userId), (crons) =>
    Effect.forEach(crons.filter((cron) => cron.thread_id === threadId), (cron) => tasks.remove(cron.id, userId), {
      discard: true
    }))
