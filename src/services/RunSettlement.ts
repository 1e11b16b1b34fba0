/**
 * A run whose record its caller settles: the gateway's, which may go on past a turn (a goal's continuation) and be
 * judged after its last one (the delivery check, its receipt kept). Through this service in the run's context, the
 * caller names the run whose turns leave its record `running` when they end (their `run_end` still says how); the
 * caller writes the run's end once, when its last phase ended, so a client reading the record never sees `success`
 * turn into another status. The caller also holds the thread's lease, and is the one that renews it, from the
 * run's acceptance until its end is recorded: a turn of that run takes and renews no lease of its own, and asks
 * `lost` before each checkpoint and each round of tool calls (a run whose lease another took, or whose lease's life
 * ran out unrenewed, writes nothing more and starts no tool); its checkpoints are fenced by the lease in the store
 * too (`confirm`: one the store refused). Without it (the CLI, the
 * library, a subagent's run), a turn takes the lease, renews it, records how it ended and releases it.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { LeaseHolder } from "./ThreadStore.js"

/** Whether the caller settles the record of run `runId` itself, and holds its thread's lease meanwhile. */
export class RunSettlement extends Context.Tag("antler/RunSettlement")<RunSettlement, {
  readonly settles: (runId: string) => boolean
  /** Whether the run the caller settles lost the thread's lease, and how (`undefined`: the run still holds it). */
  readonly lost: () => Lost | undefined
  /**
   * Asks the store now whether the run still holds the thread's lease, after the store refused a checkpoint of the
   * run's fenced by it (another took the lease between the run's `lost` and its write): as `lost` then says, the
   * loss told to the run as when the caller's renewal finds it.
   */
  readonly confirm: Effect.Effect<Lost | undefined>
}>() {}

/**
 * A lease whose life ran out without a renewal that succeeded (the store did not answer): who holds it now is not
 * known, and the run may no longer act as its owner (DeerFlow's worker's fence).
 */
export const LAPSED = "lapsed"

/** How a run lost its thread's lease: taken by another (who holds it), or `LAPSED`. */
export type Lost = LeaseHolder | typeof LAPSED
