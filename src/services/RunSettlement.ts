/**
 * A run whose record its caller settles: the gateway's, which may go on past a turn (a goal's continuation) and be
 * judged after its last one (the delivery check, its receipt kept). Through this service in the run's context, the
 * caller names the run whose turns leave its record `running` when they end (their `run_end` still says how); the
 * caller writes the run's end once, when its last phase ended, so a client reading the record never sees `success`
 * turn into another status. The caller also holds the thread's lease until then (a turn takes and renews it under
 * the run's id, and leaves it held), so no other process takes the thread, or the run, while it settles. Without it
 * (the CLI, the library, a subagent's run), a turn records how it ended and releases the lease.
 */
import * as Context from "effect/Context"

/** Whether the caller settles the record of run `runId` itself. */
export class RunSettlement extends Context.Tag("antler/RunSettlement")<RunSettlement, {
  readonly settles: (runId: string) => boolean
}>() {}
