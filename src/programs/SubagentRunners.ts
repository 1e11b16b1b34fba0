/**
 * The factory's subagent runners: one per configuration taken (`LiveConfig`), built when a run first enables
 * subagents, each in a scope of its own that the agents using it hold. A runner a later configuration's replaced is
 * closed once the agents built over it are gone; a run that started before the last edit taken gets a runner over
 * its own configuration, closed with its agent. One pool for the app, whichever configuration a subagent's run
 * started with.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type { AppConfigService } from "../services/AppConfig.js"
import type { Snapshot } from "../services/LiveConfig.js"
import type { ModelService } from "../services/ModelService.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import { SubagentRunner } from "../services/SubagentRunner.js"
import * as Shared from "./Shared.js"
import * as Subagents from "./Subagents.js"

/** The runners of a factory. */
export interface Runners {
  /** The runner of `snap`'s configuration for an agent built over it, held until `agentScope` closes. */
  readonly forAgent: (
    snap: Snapshot,
    agentScope: Scope.Scope
  ) => Effect.Effect<SubagentRunner["Type"]>
}

/**
 * The runners of a factory whose scope is `scope`: `options` are the subagents' (their pool shared by every
 * runner), `contextOf` the services an agent over a configuration is built with. Call `forAgent` under the
 * factory's lock (it replaces the kept runner).
 */
export const make = (
  scope: Scope.Scope,
  options: Subagents.Options,
  contextOf: (snap: Snapshot) => Context.Context<ModelService | SandboxProvider | AppConfigService>
): Effect.Effect<Runners> =>
  Effect.gen(function*() {
    const pool = yield* Effect.makeSemaphore(Math.max(1, options.poolSize ?? 3))
    const runnerOf = (snap: Snapshot) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Scope.fork(scope, ExecutionStrategy.sequential), (own) =>
          restore(Layer.buildWithScope(Subagents.layer({ models: snap.models, pool, ...options }), own)).pipe(
            Effect.provide(contextOf(snap)),
            Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(own, exit))),
            Effect.map((context) => Shared.make(Context.get(context, SubagentRunner), own))
          )
        )
      )
    let current: { readonly revision: number; shared: Shared.Shared<SubagentRunner["Type"]> | undefined } = {
      revision: 0,
      shared: undefined
    }
    const forAgent: Runners["forAgent"] = (snap, agentScope) =>
      Effect.gen(function*() {
        if (snap.revision > current.revision) {
          const previous = current.shared
          current = { revision: snap.revision, shared: undefined }
          if (previous !== undefined) yield* previous.retire
        }
        const kept = current.revision === snap.revision
        const shared = kept && current.shared !== undefined ? current.shared : yield* runnerOf(snap)
        if (kept) current.shared = shared
        shared.hold()
        yield* Scope.addFinalizer(agentScope, shared.release)
        if (!kept) yield* shared.retire
        return shared.value
      })
    return { forAgent }
  })
