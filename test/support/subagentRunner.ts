/**
 * The app's real subagent runner (`Subagents.layer`) over a model, a configuration written as an object (one model,
 * `ark-model`, unless it names its own) and the local sandbox, in a temporary home; bash is not offered unless
 * `options.bash` says so.
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as Subagents from "../../src/programs/Subagents.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import type { TaskRequest } from "../../src/services/SubagentRunner.js"
import { SubagentRunner } from "../../src/services/SubagentRunner.js"
import { inRun, tempDir } from "./fixtures.js"

/** The runner, built in the current scope. */
export const subagentRunner = (
  model: ModelService["Type"],
  raw: Record<string, unknown> = {},
  options: Subagents.Options = {}
) =>
  Effect.gen(function*() {
    const models = [{ name: "ark-model", use: "langchain_openai:ChatOpenAI", model: "m" }]
    const app = yield* ConfigFile.fromObject({ models, ...raw }, { home: tempDir("antler-subagent-runner-") })
    const config = Layer.succeed(AppConfigService, app)
    const services = Layer.mergeAll(
      config,
      Layer.succeed(ModelService, model),
      LocalSandbox.layer().pipe(Layer.provide(config))
    )
    const context = yield* Layer.build(Subagents.layer({ bash: false, ...options }).pipe(Layer.provide(services)))
    return Context.get(context, SubagentRunner)
  })

/**
 * A task of the runner over the model `modelOf` makes, forked in a run of thread-1 and returned once the model has
 * stalled: `stall` (given to `modelOf`) never ends and tells the test it was reached. The test then interrupts the
 * task, or moves the clock past its timeout.
 */
export const stalledTask = (
  modelOf: (stall: Effect.Effect<never>) => ModelService["Type"],
  request: TaskRequest,
  raw: Record<string, unknown> = {}
) =>
  Effect.gen(function*() {
    const stalled = yield* Deferred.make<void>()
    const stall = Effect.zipRight(Deferred.succeed(stalled, undefined), Effect.never)
    const runner = yield* subagentRunner(modelOf(stall), raw)
    const run = inRun({ threadId: "thread-1" })
    const task = yield* Effect.fork(runner.run(request).pipe(Effect.provide(run.context)))
    yield* Deferred.await(stalled)
    return { task, run }
  })

/** A model that answers as `first` once, then stalls. */
export const stallsAfterFirst = (first: ModelService["Type"]) => (stall: Effect.Effect<never>) => {
  let calls = 0
  return ModelService.of({ generate: (request) => calls++ === 0 ? first.generate(request) : stall })
}
