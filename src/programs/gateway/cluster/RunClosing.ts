/**
 * How a cluster's follower ends the stream of a run whose runner never sent it the run's last frames: the runner
 * died while the run settled and the thread's next runner ended it without running it again (`RunSettling`), or the
 * runner's stream to the follower was cut as the runner stopped (SIGTERM: its requests interrupted after
 * `drain_seconds`) while it settled the run there. The run is over, and its record says how: the follower ends the
 * stream as a stream of a run of its own process ends (`RunExecution`): a failed run's `error` (DeerFlow's
 * `{message, name}`, LangGraph's `error`), a cancelled or rolled-back run's thread values, then `end`.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { RunRecord, ThreadStore } from "../../../services/ThreadStore.js"
import * as Protocol from "../Protocol.js"
import * as RunRecords from "../RunRecords.js"

/** The error's class the run's journal names (its `run.error`'s `error_type`), else LangGraph's default. */
const errorName = (store: ThreadStore["Type"], record: RunRecord) =>
  Effect.map(
    Effect.orElseSucceed(store.runEvents(record.thread_id, record.run_id), () => []),
    (events) => {
      const type = events.findLast((event) => event.event_type === "run.error")?.metadata?.error_type
      return typeof type === "string" ? type : "Error"
    }
  )

/**
 * The last frames of ended run `record`'s stream, numbered after `last` (the last id the follower passed on);
 * `modes`: the run's stream modes (the thread's values only with `values`).
 */
export const frames = (
  store: ThreadStore["Type"],
  record: RunRecord,
  last: number,
  modes: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<Protocol.Frame>> =>
  Effect.gen(function*() {
    const out: Array<{ readonly event: string; readonly data: string }> = []
    // (a client stopped it: no `error`, what it left of the thread instead, as its own runner sends)
    const stopped = record.status === "cancelled" || record.error === RunRecords.ROLLED_BACK
    if (stopped && modes.includes("values")) {
      const loaded = yield* Effect.orElseSucceed(store.load(record.thread_id), () => Option.none())
      if (Option.isSome(loaded)) {
        out.push({ event: "values", data: JSON.stringify(Protocol.publicValues(loaded.value.state)) })
      }
    } else if (!stopped && record.status === "error") {
      const name = yield* errorName(store, record)
      const message = record.error ?? "The run failed"
      out.push({ event: "error", data: JSON.stringify({ message, name, error: name }) })
    }
    out.push({ event: "end", data: "null" })
    return out.map((frame, i) => ({ id: last + i + 1, ...frame }))
  })
