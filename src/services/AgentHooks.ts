/**
 * The run-level wrap: DeerFlow's `before_agent` / `after_agent` (thread directories, uploads, sandbox
 * acquire and release, memory queue, per-run cleanup) as one `around` function over the whole loop.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { RunFailure, RunServices } from "./RunContext.js"
import type { RunEndEvent } from "./RunEvents.js"

/** The loop as the hooks see it: it ends with the run's end event or a typed failure. */
export type RunLoop = Effect.Effect<RunEndEvent, RunFailure, RunServices>

/** The run-level port. */
export class AgentHooks extends Context.Tag("antler/AgentHooks")<
  AgentHooks,
  { readonly around: (run: RunLoop) => RunLoop }
>() {}
