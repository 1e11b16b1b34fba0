/**
 * Sandbox (DeerFlow's SandboxMiddleware, SPEC §5.6): binds the thread's sandbox into state and gives it back
 * after the run. Lazy by default: nothing is acquired before the run; tools acquire the sandbox when they
 * first need it, and the tool wrap persists its id (`sandbox: { sandbox_id }`) with that tool's result.
 * After the run, whatever way it ends, the sandbox is released to the provider.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { RunContext, RunState } from "../services/RunContext.js"
import { SandboxProvider } from "../services/Sandbox.js"
import type { ToolResult } from "../services/ToolService.js"
import type { ThreadState } from "../state/ThreadState.js"
import { Interrupt } from "../services/ToolService.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"
import { withState } from "./internal/StateRead.js"

/**
 * The result with `sandbox: { sandbox_id }` merged into its update, unless the update already binds a
 * sandbox (the reducer decides between two bindings; identical concurrent ones are accepted).
 */
export const withSandboxBinding = (result: ToolResult, sandboxId: string): ToolResult => {
  if (result.update?.sandbox != null) return result
  return { ...result, update: { ...result.update, sandbox: { sandbox_id: sandboxId } } }
}

/** Options of Sandbox. */
export interface Options {
  /** Acquire only when a tool needs it (default), or acquire and bind before the run. */
  readonly lazyInit?: boolean
}

/**
 * Sandbox. Needs `SandboxProvider`, `RunContext` and `RunState`. Released after the run: the sandbox in
 * state, else the one a tool acquired during this run.
 */
export const layer = (options: Options = {}) =>
  Middleware.make(Effect.gen(function*() {
    const provider = yield* SandboxProvider
    const context = yield* RunContext
    const state = yield* RunState
    let acquired: string | undefined
    // The thread's binding, once seen in state: a thread is bound to one sandbox (a second id is a reducer
    // conflict), so from then on a tool call goes straight through.
    let bound: string | undefined

    const bindingOf = (s: ThreadState) => (bound = s.sandbox?.sandbox_id ?? undefined)
    const boundId = Effect.map(state.get, bindingOf)
    const lookup = Effect.map(provider.current(context.threadId, context.userId), (sandbox) => {
      if (Option.isSome(sandbox)) acquired ??= sandbox.value.id
      return Option.map(sandbox, (s) => s.id)
    })

    const before = options.lazyInit === false
      ? Effect.flatMap(boundId, (id) =>
        id !== undefined ? Effect.void : Effect.flatMap(
          Effect.orDie(provider.acquire(context.threadId, context.userId)),
          (sandbox) => {
            acquired = sandbox.id
            return state.update({ sandbox: { sandbox_id: sandbox.id } })
          }
        ))
      : Effect.void

    const release = Effect.suspend(() =>
      Effect.flatMap(boundId, (id) => {
        const target = id ?? acquired
        return target === undefined ? Effect.void : provider.release(target)
      })
    )

    return {
      run: (loop) => Effect.ensuring(Effect.zipRight(before, loop), release),
      tool: (call, next) =>
        bound !== undefined ? next(call) : withState(state, (s) => {
          if (bindingOf(s) !== undefined) return next(call)
          // One handler for every way the call ends (each tool call of a run without a sandbox comes here).
          return Effect.uninterruptibleMask((restore) =>
            Effect.matchCauseEffect(restore(next(call)), {
              // (the lookup and the binding in one step: every call of a run without a sandbox comes here)
              onSuccess: (result) =>
                Effect.map(provider.current(context.threadId, context.userId), (sandbox) => {
                  if (Option.isNone(sandbox)) return result
                  acquired ??= sandbox.value.id
                  return withSandboxBinding(result, sandbox.value.id)
                }),
              onFailure: (cause) => {
                // A failed or cancelled tool may still have acquired the sandbox: remember it, so it is released.
                if (Cause.isInterruptedOnly(cause)) return Effect.zipRight(lookup, Effect.failCause(cause))
                const failure = Cause.failureOption(cause)
                if (Option.isNone(failure)) return Effect.failCause(cause)
                const error = failure.value
                if (error instanceof Interrupt) {
                  return Effect.flatMap(lookup, (found) =>
                    Effect.fail(
                      Option.isNone(found) ? error : new Interrupt({
                        reason: error.reason,
                        payload: error.payload,
                        result: withSandboxBinding(error.result, found.value)
                      })
                    ))
                }
                return error._tag === "ToolError"
                  ? Effect.zipRight(lookup, Effect.failCause(cause))
                  : Effect.failCause(cause)
              }
            })
          )
        })
    }
  }))

/** Its chain entry: records the sandbox a tool acquired, releases it after the run. */
export const entry = () =>
  Chain.entry("Sandbox", () => layer(), [
    { inside: "ThreadData", reason: "the sandbox is made over the thread's directories ThreadData records" }
  ])
