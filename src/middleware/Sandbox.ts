/**
 * Sandbox (DeerFlow's SandboxMiddleware, SPEC §5.6): binds the thread's sandbox into state and gives it back
 * after the run. Lazy by default: nothing is acquired before the run; tools acquire the sandbox when they
 * first need it, and the tool wrap persists its id (`sandbox: { sandbox_id }`) with that tool's result.
 * After the run, whatever way it ends, the sandbox is released to the provider.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { RunContext, RunState } from "../services/RunContext.js"
import { SandboxProvider } from "../services/Sandbox.js"
import type { ToolResult } from "../services/ToolService.js"
import { Interrupt } from "../services/ToolService.js"
import * as Middleware from "./Middleware.js"

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

    const boundId = Effect.map(state.get, (s) => s.sandbox?.sandbox_id ?? undefined)
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
        Effect.flatMap(boundId, (id) => {
          if (id !== undefined) return next(call)
          return next(call).pipe(
            Effect.flatMap((result) =>
              Effect.map(lookup, (found) => Option.isNone(found) ? result : withSandboxBinding(result, found.value))
            ),
            Effect.catchIf(
              (error): error is Interrupt => error instanceof Interrupt,
              (interrupt) =>
                Effect.flatMap(lookup, (found) =>
                  Effect.fail(
                    Option.isNone(found) ? interrupt : new Interrupt({
                      reason: interrupt.reason,
                      payload: interrupt.payload,
                      result: withSandboxBinding(interrupt.result, found.value)
                    })
                  ))
            ),
            // A failed or cancelled tool may still have acquired the sandbox: remember it, so it is released.
            Effect.tapErrorTag("ToolError", () => lookup),
            Effect.onInterrupt(() => lookup)
          )
        })
    }
  }))
