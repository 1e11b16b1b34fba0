/**
 * The configuration a gateway endpoint reads at each request: `config.yaml` as it is now when the gateway takes its
 * edits (`LiveConfig`, see `layers/ConfigReload.ts`), else the configuration it started with.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ModelConfig } from "../../../services/AppConfig.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import type { Snapshot } from "../../../services/LiveConfig.js"
import { LiveConfig } from "../../../services/LiveConfig.js"
import type { ModelService } from "../../../services/ModelService.js"

/**
 * How an endpoint gets the configuration of a request: `LiveConfig`'s, else the one of the start with `models` and
 * their clients `model` (the gateway's).
 */
export const snapshot = (
  started: { readonly models: ReadonlyArray<ModelConfig>; readonly model: ModelService["Type"] }
): Effect.Effect<Effect.Effect<Snapshot>, never, AppConfigService> =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const live = yield* Effect.serviceOption(LiveConfig)
    return Option.isSome(live) ? live.value.current : Effect.succeed({ ...started, app, revision: 0 })
  })

/** How an endpoint gets the configuration of a request (`LiveConfig`'s, else the one of the start). */
export const config: Effect.Effect<Effect.Effect<AppConfigService["Type"]>, never, AppConfigService> = Effect.gen(
  function*() {
    const app = yield* AppConfigService
    const live = yield* Effect.serviceOption(LiveConfig)
    return Option.isSome(live) ? Effect.map(live.value.current, (snap) => snap.app) : Effect.succeed(app)
  }
)

/** How an endpoint gets the configuration of a request and the models runs choose from (the start's: `models`). */
export const choice = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<
  Effect.Effect<{ readonly app: AppConfigService["Type"]; readonly models: ReadonlyArray<ModelConfig> }>,
  never,
  AppConfigService
> =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const live = yield* Effect.serviceOption(LiveConfig)
    return Option.isSome(live) ? live.value.current : Effect.succeed({ app, models })
  })
