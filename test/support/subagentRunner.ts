/**
 * The app's real subagent runner (`Subagents.layer`) over a model, a configuration written as an object (one model,
 * `ark-model`, unless it names its own) and the local sandbox, in a temporary home; bash is not offered unless
 * `options.bash` says so.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as Subagents from "../../src/programs/Subagents.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import { SubagentRunner } from "../../src/services/SubagentRunner.js"
import { tempDir } from "./fixtures.js"

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
