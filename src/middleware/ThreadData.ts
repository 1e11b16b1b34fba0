/**
 * ThreadData (SPEC §5.4), before the run: writes the thread's host directories into `thread_data` and stamps
 * the last human message (same id) with its name and the run's id and time. Lazy by default: the paths are
 * written, the directories are created by whoever first writes a file.
 */
import * as fs from "node:fs/promises"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { AppConfigService } from "../services/AppConfig.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { ThreadPaths } from "../services/Sandbox.js"
import { isSafeId, threadPaths } from "../services/Sandbox.js"
import type { HumanMessage } from "../state/Message.js"
import type { ThreadData } from "../state/ThreadState.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

/** A thread or user id that cannot be used as a directory name (it would leave the data directory). */
export class UnsafeThreadPath extends Schema.TaggedError<UnsafeThreadPath>()("UnsafeThreadPath", {
  field: Schema.Literal("thread_id", "user_id"),
  value: Schema.String
}) {
  override get message() {
    return `The ${this.field} ${JSON.stringify(this.value)} cannot name a directory: ids must be 1-128 letters, ` +
      `digits, '.', '_' or '-', starting with a letter or digit`
  }
}

/** The host directories of a thread, refusing ids that are not one safe path segment. */
export const resolveThreadPaths = (
  home: string,
  userId: string,
  threadId: string
): Effect.Effect<ThreadPaths, UnsafeThreadPath> =>
  !isSafeId(threadId)
    ? Effect.fail(new UnsafeThreadPath({ field: "thread_id", value: threadId }))
    : !isSafeId(userId)
    ? Effect.fail(new UnsafeThreadPath({ field: "user_id", value: userId }))
    : Effect.succeed(threadPaths(home, userId, threadId))

/** The `thread_data` state value for a thread's directories. */
export const threadDataOf = (paths: ThreadPaths): ThreadData => ({
  workspace_path: paths.workspace,
  uploads_path: paths.uploads,
  outputs_path: paths.outputs
})

/** The last human message stamped for this run: `name` (kept, else `user-input`), `run_id`, `timestamp`. */
export const stampHumanMessage = (message: HumanMessage, runId: string, timestamp: string): HumanMessage => ({
  ...message,
  name: message.name !== undefined && message.name !== "" ? message.name : "user-input",
  additional_kwargs: { ...message.additional_kwargs, run_id: runId, timestamp }
})

/** Options of ThreadData. */
export interface Options {
  /** Only write the paths (default), or also create the three directories before the run. */
  readonly lazyInit?: boolean
}

/**
 * ThreadData. Needs `AppConfigService` (the data directory), `RunContext` and `RunState`. An id that is not a
 * safe path segment ends the run as failed (`UnsafeThreadPath`), before anything is written.
 */
export const layer = (options: Options = {}) =>
  Middleware.make(Effect.gen(function*() {
    const { home } = yield* AppConfigService
    const context = yield* RunContext
    const state = yield* RunState
    const before = Effect.gen(function*() {
      const paths = yield* Effect.orDie(resolveThreadPaths(home, context.userId, context.threadId))
      if (options.lazyInit === false) {
        yield* Effect.orDie(Effect.tryPromise(() =>
          Promise.all([paths.workspace, paths.uploads, paths.outputs].map((dir) => fs.mkdir(dir, { recursive: true })))
        ))
      }
      const messages = (yield* state.get).messages
      const last = messages[messages.length - 1]
      if (last?.type !== "human") return yield* state.update({ thread_data: threadDataOf(paths) })
      const now = yield* Clock.currentTimeMillis
      yield* state.update({
        thread_data: threadDataOf(paths),
        messages: [stampHumanMessage(last, context.runId, new Date(now).toISOString())]
      })
    })
    return { run: (loop) => Effect.zipRight(before, loop) }
  }))

/** Its chain entry: before_agent, the thread's directories and the run stamp the entries inside it read. */
export const entry = () => Chain.entry("ThreadData", () => layer())
