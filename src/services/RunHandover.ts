/**
 * A run handed over to another process (issue 30, a cluster's runner draining): whoever stops the run's fiber
 * says, through this service in the run's context, that the stop is a handover rather than a cancellation. The
 * run then keeps its completed steps (a tool call left open is answered "interrupted", never run again) and
 * stops at its last completed step: what the model was streaming is not kept, and the run is not recorded as
 * ended. It stays `running`, its lease released, for the thread's next runner to resume under the same run id.
 * Without this service (every run outside a cluster) a stop is a cancellation.
 */
import * as Context from "effect/Context"

/** Asked when the run's fiber is interrupted: whether the run is being handed over. */
export class RunHandover extends Context.Tag("antler/RunHandover")<RunHandover, {
  readonly requested: () => boolean
}>() {}
