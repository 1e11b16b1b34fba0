/**
 * The gateway's runs (SPEC §12.3): each run executes in a fiber of the server (a `FiberMap` keyed by run id,
 * living as long as the server), never in the fiber of the request that started it, so a client that goes
 * away and comes back loses nothing. Every event of a run gets an id and is kept in a bounded buffer of its
 * run; a subscriber streams from any cursor (`Last-Event-ID`) without loss or repetition, and one whose
 * cursor fell out of the buffer gets the `gap` event. A thread has one active run at a time: the manager
 * takes the thread's lease in the store when it accepts a run (so a second gateway process sharing the store
 * refuses too), and `multitask_strategy` decides what a new run does to an active one (reject, interrupt, roll
 * back). On start, runs a previous process left `running` are recorded as `error` (`orphan_recovered`).
 *
 * The parts: what a run is (`RunModel`), the runs this process knows (`RunRegistry`), how a run starts (`RunStart`,
 * `Queue`), its body from its start to its end (`RunExecution`), how it is stopped (`RunCancel`), and how a client
 * streams it (`RunStream`).
 */
import type { Readable } from "node:stream"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { AppConfigService } from "../../services/AppConfig.js"
import { LiveConfig } from "../../services/LiveConfig.js"
import type { RunRecord } from "../../services/ThreadStore.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as Redact from "../../state/Redact.js"
import * as Factory from "../Factory.js"
import * as Admission from "./Admission.js"
import type { GatewayError } from "./api/Problem.js"
import type * as Protocol from "./Protocol.js"
import * as QuotaReservations from "./QuotaReservations.js"
import type * as RunBuffer from "./RunBuffer.js"
import * as RunCancel from "./RunCancel.js"
import * as RunDrain from "./RunDrain.js"
import * as RunLease from "./RunLease.js"
import type { ActiveRun, CancelAction, Options, RunRequest } from "./RunModel.js"
import { internal } from "./RunModel.js"
import * as RunRecords from "./RunRecords.js"
import * as RunRegistry from "./RunRegistry.js"
import * as RunStart from "./RunStart.js"
import * as RunStream from "./RunStream.js"

export { GatewayError, statusOf } from "./api/Problem.js"
export { SAVE_EVERY } from "./RunExecution.js"
export type { ActiveRun, CancelAction, Options, RunRequest, Traced } from "./RunModel.js"
export { ORPHAN_RECOVERED, ROLLED_BACK, SERVER_RESTARTED } from "./RunRecords.js"
export { FINISHED_GRACE_MS, GRACE_CAP } from "./RunRegistry.js"
/** (Re-exported: the cluster follows runs of other processes with them.) */
export { framesOf, sseOf } from "./RunStream.js"

/** The run manager of a gateway. */
export interface Service {
  /** Accepts a run and starts it in the server's fiber; refuses (409) when the thread is busy. */
  readonly start: (request: RunRequest) => Effect.Effect<ActiveRun, GatewayError>
  /** The run this process knows (running, or finished and still buffered). */
  readonly get: (runId: string) => ActiveRun | undefined
  /**
   * The run as this process can follow it: its own (as `get`), or, in a cluster, the one the thread's runner
   * runs or ran recently (see `cluster/ClusterRuns`).
   */
  readonly lookup: (threadId: string, runId: string) => Effect.Effect<ActiveRun | undefined, GatewayError>
  /**
   * Starts again, here and under its id, a run that a runner which died was running (or never started): from the
   * thread's last checkpoint (a tool call left open is answered "interrupted" by the run, never run again); of
   * its messages, those the thread already has are not added again.
   */
  readonly resume: (request: RunRequest, runId: string) => Effect.Effect<ActiveRun, GatewayError>
  /**
   * In a cluster: makes sure run `runId`, started with `request` by a process that may have died before making it
   * durable, goes on (its durable message sent again: harmless when it exists, the thread's runner answers both
   * once the run ended, and resumes it if no live process runs it); its end followed. None without a cluster (a
   * process starting records what a dead one left as ended).
   */
  readonly adopt?: ((request: RunRequest, runId: string) => Effect.Effect<ActiveRun, GatewayError>) | undefined
  /** The active run of a thread in this process. */
  readonly activeOf: (threadId: string) => ActiveRun | undefined
  /**
   * Calls `listener` with each run that starts on thread `threadId` (as stored) in this process from now on (in a
   * cluster: on this runner); returns how to stop.
   */
  readonly onStart: (threadId: string, listener: (run: ActiveRun) => void) => () => void
  /**
   * In a cluster: calls `listener` when a run of thread `threadId` starts or ends on any runner (and whenever such
   * news may have been missed); returns how to stop. None without a cluster (`onStart` says it all).
   */
  readonly onNotice?: ((threadId: string, listener: () => void) => () => void) | undefined
  /** Stops a run; with `wait`, returns once it ended (and was rolled back). */
  readonly cancel: (runId: string, action: CancelAction, wait: boolean) => Effect.Effect<void, GatewayError>
  /**
   * A run's stream as SSE text from `cursor` (0: from its first event), filtered to `modes` (all of the run's
   * when absent), with heartbeats; ends after `end`, or after `gap`. `onDisconnect` runs when the client is
   * gone before that (the stream destroyed). A Node `Readable`, which the response pipes to the socket.
   */
  readonly subscribe: (
    run: ActiveRun,
    cursor: number,
    modes?: ReadonlyArray<Protocol.StreamMode> | undefined,
    onDisconnect?: Effect.Effect<void> | undefined
  ) => Readable
  /**
   * In a cluster: run `run` as a reader of this process can follow it, its events after `cursor` (a run of
   * another runner: its frames kept here, as they come from its runner, while `Scope` lasts; a run of this
   * process: itself). None without a cluster (every run a process follows is its own).
   */
  readonly mirror?:
    | ((run: ActiveRun, cursor: number) => Effect.Effect<RunBuffer.Reader, never, Scope.Scope>)
    | undefined
  /** Records runs a previous process left `running` or `pending` as `error` (`orphan_recovered`). */
  readonly recover: Effect.Effect<ReadonlyArray<RunRecord>, GatewayError>
  /**
   * Stops a run of this process to hand it over to another (a cluster's runner draining, see `RunHandover`): it
   * stops at its last completed step, stays `running` in the store with its thread's lease released, and its
   * followers here see their streams end without `end` (they join again where it resumes). Returns once it
   * stopped; false when the run is not running here.
   */
  readonly handOver?: (runId: string) => Effect.Effect<boolean>
  /**
   * A manager whose runs another process resumes (`Options.resumable`): begins its stop's drain (`RunDrain`), the runs
   * going on for `Options.drainSeconds` from now, then handed over; the manager's scope closing waits for it.
   */
  readonly drain?: Effect.Effect<void>
  /**
   * Where its runs reserve what they add against the storage quotas, for the other writes that add to threads to
   * reserve theirs beside them (`QuotaReservations`; absent: each reserves in a place of its own).
   */
  readonly reservations?: QuotaReservations.Service | undefined
}

/** The run manager service. */
export class Runs extends Context.Tag("antler/gateway/Runs")<Runs, Service>() {}

/** The run manager over the app's factory, store and configuration; its runs end with its scope. */
export const layer = (
  options: Options
): Layer.Layer<Runs, never, Factory.AgentFactory | ThreadStore | AppConfigService> =>
  Layer.scoped(
    Runs,
    Effect.gen(function*() {
      const store = yield* ThreadStore
      const registry = RunRegistry.make(options.keepFinished)
      // the default model of a run: the first of `config.yaml`'s models as it is when the run starts (`LiveConfig`)
      const live = yield* Effect.serviceOption(LiveConfig)
      const defaultModel = Option.isNone(live)
        ? Effect.succeed(options.defaultModel)
        : Effect.map(live.value.current, (snap) => snap.models[0]?.name ?? options.defaultModel)
      // (shared by the processes of one PostgreSQL database when the gateway provides them: `QuotaReservations`)
      const reservations = Option.getOrElse(
        yield* Effect.serviceOption(QuotaReservations.QuotaReservations),
        QuotaReservations.inProcess
      )
      const starter = RunStart.make({
        factory: yield* Factory.AgentFactory,
        store,
        app: yield* AppConfigService,
        options,
        redact: options.redact ?? Redact.none,
        registry,
        admitted: yield* Admission.make(options.maxActiveRuns, options.maxActiveRunsPerUser),
        leases: yield* RunLease.make(store),
        // the goal evaluator's model: the clients of the configuration as it is when it judges
        goalModel: Option.isNone(live)
          ? Effect.succeed(undefined)
          : Effect.map(live.value.current, (snap) => snap.model),
        fibers: yield* FiberMap.make<string>(),
        lock: yield* Effect.makeSemaphore(1),
        defaultModel,
        reservations
      })
      const stopper = RunCancel.make(store, registry, starter.queues)
      // what a subscriber's stream runs when its client goes away (outside any request's fiber)
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())

      const subscribe: Service["subscribe"] = (run, cursor, modes, onDisconnect) =>
        RunStream.subscribe(
          run,
          cursor,
          modes,
          onDisconnect === undefined ? undefined : () => runFork(onDisconnect),
          options.heartbeatSeconds
        )

      // stopped, a manager whose runs another process resumes hands over those still going once they had their
      // drain period, before its fibers are interrupted (which would end them `cancelled`): `RunDrain`
      const drain = options.resumable === true
        ? yield* RunDrain.make(options.drainSeconds ?? 0, () => [...registry.active.values()], stopper.handOver)
        : undefined
      if (drain !== undefined) yield* Effect.addFinalizer(() => drain.finish)

      return Runs.of({
        handOver: stopper.handOver,
        ...(drain === undefined ? {} : { drain: drain.begin }),
        reservations,
        start: starter.start,
        get: (runId) => registry.known.get(runId),
        lookup: (_threadId, runId) => Effect.sync(() => registry.known.get(runId)),
        resume: starter.resume,
        activeOf: (threadId) => registry.active.get(threadId),
        onStart: registry.onStart,
        cancel: stopper.cancel,
        subscribe,
        recover: Effect.mapError(RunRecords.recover(store), internal)
      })
    })
  )
