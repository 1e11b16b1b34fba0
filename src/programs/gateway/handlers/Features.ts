/**
 * What this server has (declared in `api/Features.ts`): the custom agents API is on when `/api/agents` is served
 * (read from the API it serves) and `agents_api.enabled` is not false; durable MCP tasks when the gateway runs its
 * task runtime (`mcp_tasks.enabled`: DeerFlow's app shows its Background tasks button only then); live browser
 * control never. Channels and the Lark integration answer as DeerFlow's do with the feature off.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { AppConfigService } from "../../../services/AppConfig.js"
import { McpTasks } from "../../../services/McpTasks.js"
import * as Live from "./Live.js"
import * as FeaturesApi from "../api/Features.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { json } from "./Http.js"

const OFF = "Not available on this server: Antler has no Lark/Feishu integration."

/** DeerFlow's status of a Lark integration that is not there. */
export const LARK_OFF: typeof FeaturesApi.LarkStatus.Type = {
  installed: false,
  version: "",
  manifest_version: null,
  latest_available_version: null,
  runtime_version_mismatch: false,
  app_configured: false,
  app_id: null,
  app_brand: null,
  skills_expected: 0,
  skills_installed: 0,
  installed_skills: [],
  enabled_skills: [],
  install_path: "",
  cli: { available: false, path: null, version: null, error: OFF },
  auth: { status: "unavailable", message: OFF, user: null, verified: false },
  sandbox_runtime_mode: "none",
  sandbox_runtime_ready: false,
  sandbox_runtime_detail: OFF
}

/** The `METHOD /path` of every endpoint `api` serves. */
const servedBy = (api: DeerFlowApi): ReadonlySet<string> => {
  const served = new Set<string>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => void served.add(`${endpoint.method} ${endpoint.path}`)
  })
  return served
}

/** The features endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "features", (handlers) => Effect.gen(function*() {
    // (`config.yaml` as it is now: whether the custom agents API is on)
    const now = yield* Live.config
    const served = servedBy(api)
    // (the runtime is made at the start, from the configuration of the start: a later edit does not change it)
    const tasks = Option.isSome(yield* Effect.serviceOption(McpTasks))
    const features = (app: AppConfigService["Type"]): typeof FeaturesApi.Features.Type => ({
      agents_api: { enabled: served.has("GET /api/agents") && app.config.agents_api.enabled },
      browser_control: { enabled: false },
      mcp_tasks: { enabled: tasks }
    })
    return handlers
      .handleRaw("listFeatures", () => Effect.map(now, (app) => json(FeaturesApi.Features, features(app))))
      .handleRaw("channelProviders", () =>
        Effect.succeed(json(FeaturesApi.ChannelProviders, { enabled: false, providers: [] })))
      .handleRaw("channelConnections", () =>
        Effect.succeed(json(FeaturesApi.ChannelConnections, { connections: [] })))
      .handleRaw("larkStatus", () => Effect.succeed(json(FeaturesApi.LarkStatus, LARK_OFF)))
  }))
