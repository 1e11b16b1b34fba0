/**
 * The ids in the gateway's paths. Thread and run ids are also directory names, so only safe ones exist
 * (`SafeId`): a path naming any other is a path to nothing, answered 404 with the message given here (see
 * `Problem.respondError`), as for an id nobody has.
 */
import * as Schema from "effect/Schema"
import { SafeId } from "../../../services/Sandbox.js"

const PATTERN = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"

/** A thread id, as the user's client names the thread (see `ThreadIds`). */
export const ThreadId = SafeId.annotations({
  description: `The thread's id, as its client named it (${PATTERN})`,
  message: (issue) => `Thread ${JSON.stringify(issue.actual)} not found.`
})

/** A run id. */
export const RunId = SafeId.annotations({
  description: `The run's id (${PATTERN})`,
  message: (issue) => `Run ${JSON.stringify(issue.actual)} not found.`
})

/** The path of a thread's routes. */
export const ThreadPath = Schema.Struct({ thread_id: ThreadId })

/** The path of a run's routes. */
export const RunPath = Schema.Struct({ thread_id: ThreadId, run_id: RunId })
