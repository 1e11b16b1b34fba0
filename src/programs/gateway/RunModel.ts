/**
 * What a gateway run is (SPEC §12.3): the request that starts it, the run as this process follows it (its event
 * buffer, its state, its end), how a client or a handover stops it, and the run manager's options. See `Runs`.
 */
import * as Clock from "effect/Clock"
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as SkillSecrets from "../../services/SkillSecrets.js"
import type * as TraceContext from "../../services/TraceContext.js"
import type { RunRecord, StoredRunEvent } from "../../services/ThreadStore.js"
import type { Message } from "../../state/Message.js"
import type * as Redact from "../../state/Redact.js"
import type { ThreadState } from "../../state/ThreadState.js"
import { GatewayError } from "./api/Problem.js"
import type * as Protocol from "./Protocol.js"
import type * as RunBuffer from "./RunBuffer.js"
import type * as StorageQuota from "./StorageQuota.js"

/** What a new run is. */
export interface RunRequest {
  /** The thread as stored (see `ThreadIds`). */
  readonly threadId: string
  /** The thread as its user's client names it (what the run's stream and messages say); default `threadId`. */
  readonly publicThreadId?: string | undefined
  readonly userId: string
  /** Whether the run is an admin's (`RunOptions.admin`, from the request's token). */
  readonly admin?: boolean | undefined
  /** The role of the run's user (`authorization`, from the request's token or account; none: `default_role`). */
  readonly role?: string | undefined
  readonly assistantId: string
  /** The run's new messages (already decoded). */
  readonly messages: ReadonlyArray<Message>
  /** The thread's title the run's input sets. */
  readonly title?: string | undefined
  /** `command.resume`, when given. */
  readonly resume?: unknown
  /** Merged run settings (configurable + context, recursion limit). */
  readonly settings: Record<string, unknown>
  /**
   * The request's secrets for skills (`context.secrets`): held in memory for the run only, never in `settings`,
   * `kwargs`, the store or the events (see `RunSettings.requestSecrets`).
   */
  readonly secrets?: SkillSecrets.RequestSecrets | undefined
  readonly modes: ReadonlyArray<Protocol.StreamMode>
  readonly multitaskStrategy: "reject" | "interrupt" | "rollback" | "enqueue"
  /** The run's metadata, as its Run object shows it. */
  readonly metadata: Readonly<Record<string, unknown>>
  /** What the run was asked with, as its Run object shows it (LangGraph's `kwargs`; already redacted). */
  readonly kwargs?: Readonly<Record<string, unknown>> | undefined
  /** Delete the thread once the run ends (a stateless run's `on_completion: delete`). */
  readonly deleteThread?: boolean | undefined
  /** The checkpoint the run starts from (the head: as usual; an older one: a fork, see `Fork`). */
  readonly checkpointId?: string | undefined
  /**
   * The run's id, when the caller chose it (a scheduled tick's, so that a tick started again after its process
   * died is the same run, never a second one); else a new one. A run of that id already recorded is refused.
   */
  readonly runId?: string | undefined
  /** How many times the run was resumed after its runner died (its event ids: `EventIds`); set by `resume`. */
  readonly resumes?: number | undefined
  /** The trace id of the request that started it (`TraceId.forRun`), when request trace ids are on. */
  readonly traceId?: string | undefined
  /** The client's span of the request that started it (its W3C `traceparent`), which the run's span joins. */
  readonly traceContext?: TraceContext.Remote | undefined
}

/** How a run is being stopped by a client. */
export type CancelAction = "interrupt" | "rollback"

/** A run this process executes, or executed recently: its event buffer and its end. */
export interface ActiveRun extends RunBuffer.Reader {
  readonly runId: string
  /** The thread as stored. */
  readonly threadId: string
  /** The thread as its user's client names it. */
  readonly publicThreadId: string
  readonly userId: string
  readonly modes: ReadonlyArray<Protocol.StreamMode>
  /** Ends with the run's final record once everything (rollback, deletion) is done. */
  readonly done: Deferred.Deferred<RunRecord>
  /**
   * The state as the run's events left it, without the secrets the run hides (its request's too: a stateless run's
   * answer is this state, where a value the model wrote out was shown that its stream hid).
   */
  readonly state: () => ThreadState
  /**
   * The run's events (`.../runs/{run_id}/events`) recorded so far, secrets redacted: read while this process runs it
   * (the store holds them as last kept); absent for a run of another process.
   */
  readonly events?: (() => ReadonlyArray<StoredRunEvent>) | undefined
}

/** Wraps a run's fiber (e.g. in the root span of its trace). */
export type Traced = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  run: RunRequest & { readonly runId: string }
) => Effect.Effect<A, E, R>

/** Options of the run manager. */
export interface Options {
  /** Events kept per run for replay. */
  readonly bufferSize: number
  /** Characters of event data kept per run for replay (the oldest events go first). */
  readonly bufferBytes: number
  /** Finished runs whose buffers are kept (and, up to GRACE_CAP times as many, those that ended recently). */
  readonly keepFinished: number
  /** Seconds between heartbeats. */
  readonly heartbeatSeconds: number
  /** The name of the model a run uses when its settings name none (what its stream metadata says). */
  readonly defaultModel?: string | undefined
  /** Runs executing at once; the others wait (`pending`) for a place. Absent: no limit. */
  readonly maxActiveRuns?: number | undefined
  /** Runs of one user executing at once; the user's others wait (`pending`). Absent: no limit. */
  readonly maxActiveRunsPerUser?: number | undefined
  /** The quotas on what threads keep in the database (`StorageQuota`), checked before a run starts. */
  readonly storageLimits?: StorageQuota.Limits | undefined
  /** What never leaves the server (secrets in streamed events). */
  readonly redact?: Redact.Redactor | undefined
  /** Runs its fibers with this wrapper (a trace root span). */
  readonly traced?: Traced | undefined
  /**
   * Whether a run its process dies in is resumed by another (a cluster's runner): a run then records when its last
   * turn ended and only its settling remains, so it is ended, not run again (`RunSettling`).
   */
  readonly resumable?: boolean | undefined
  /**
   * With `resumable`: seconds the runs go on when the manager stops (counted from `Runs.Service.drain`, else from its
   * scope's closing) before they are handed over to the process that resumes them (`RunDrain`); default 0.
   */
  readonly drainSeconds?: number | undefined
}

/** A run stopped to hand it over to another process (see `Runs.Service.handOver`). */
export const HANDOVER = "handover"

/**
 * A run stopped because another process took its thread's lease (this one stalled past the lease's life: `RunLease`):
 * it ends at once, as the new owner needs (see `RunExecution.execute`).
 */
export const LEASE_LOST = "lease-lost"

/**
 * How a run is stopped: by a client, to hand it over to another process (see `Runs.Service.handOver`), or because
 * another process took its thread.
 */
export type Stop = CancelAction | typeof HANDOVER | typeof LEASE_LOST

/** A thread's active run here, with how to stop it. */
export interface Entry extends ActiveRun {
  readonly stop: (action: Stop) => Effect.Effect<void>
}

/** A failure of the store or the factory, as the gateway answers it (500). */
export const internal = (error: { readonly message: string }) =>
  new GatewayError({ reason: "internal", message: error.message, cause: error })

/** The time now, as the store's records write it. */
export const now: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())
