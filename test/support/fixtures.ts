/** Small fixtures shared by tests: temporary directories removed after the file's tests, a run context. */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type { Ports } from "../../src/middleware/Middleware.js"
import { AgentHooks } from "../../src/services/AgentHooks.js"
import type { RunServices } from "../../src/services/RunContext.js"
import { RunContext, RunState } from "../../src/services/RunContext.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import { applyUpdate } from "../../src/state/Reducers.js"
import type { ThreadState } from "../../src/state/ThreadState.js"
import * as TS from "../../src/state/ThreadState.js"

/** `tempDir(prefix)` makes a directory under the system temp dir; all of them go when the file's tests end. */
export const tempDirs = () => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const dir of dirs) Fs.rmSync(dir, { recursive: true, force: true })
  })
  return (prefix: string) => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
    dirs.push(dir)
    return dir
  }
}

/**
 * A new directory under the system temp dir, by its real path; it goes when the test run ends (its temp dir is
 * one of its own: see tmpDir.ts).
 */
export const tempDir = (prefix: string) => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix)))

/** A run context for calling tools or middlewares outside a run. */
export const runContext = (threadId = "t1", userId = "u1"): RunContext["Type"] =>
  RunContext.of({
    threadId,
    runId: "r1",
    userId,
    options: { recursionLimit: 100, toolConcurrency: 4 },
    stopReason: Effect.succeed(undefined),
    setStopReason: () => Effect.void
  })

/** The services of a run, for calling ports, tools or middlewares outside `Run.execute`; events are recorded. */
export const inRun = (options: { readonly threadId?: string; readonly userId?: string; readonly state?: ThreadState } = {}) => {
  const events: Array<RunEvent> = []
  let state = options.state ?? TS.empty
  const context: Context.Context<RunServices> = Context.make(RunContext, runContext(options.threadId, options.userId)).pipe(
    Context.add(RunState, {
      get: Effect.sync(() => state),
      update: (update) =>
        Effect.suspend(() => {
          const next = applyUpdate(state, update)
          if (Either.isLeft(next)) return Effect.fail(next.left)
          state = next.right
          return Effect.void
        })
    }),
    Context.add(RunEvents, { emit: (event) => Effect.sync(() => void events.push(event)) })
  )
  return { context, events, state: () => state }
}

/** Provides the services of a (fresh) run to an effect that calls ports outside `Run.execute`. */
export const provideRun = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, inRun().context)

/**
 * Runs `body` inside the run hooks of built ports, with the services of a run: where middlewares with
 * per-run state have it (their wrappers exist only inside `AgentHooks.around`, as in a real run).
 */
export const insideRun = <A, E, R>(
  ports: Context.Context<Ports>,
  body: Effect.Effect<A, E, R>,
  services: Context.Context<RunServices> = inRun().context
): Effect.Effect<A, E, Exclude<R, RunServices>> =>
  Effect.suspend(() => {
    let exit: Exit.Exit<A, E> | undefined
    const loop = Effect.map(Effect.exit(body), (e) => {
      exit = e
      return { type: "run_end", status: "success", stop_reason: "completed" } as const
    })
    return Context.get(ports, AgentHooks).around(loop as any).pipe(
      Effect.provide(services),
      Effect.orDie,
      Effect.flatMap(() => exit!)
    ) as Effect.Effect<A, E, Exclude<R, RunServices>>
  })
