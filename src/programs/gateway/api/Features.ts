/**
 * What this server has, declared as DeerFlow's app asks it (`/api/features`), and DeerFlow's endpoints of the
 * features Antler does not have, answered as DeerFlow answers them when the feature is off: the channels
 * (Slack, Telegram, Lark... as chat fronts) with no providers and no connections, the Lark integration not
 * installed. Implemented in `handlers/Features.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { Authentication } from "./Security.js"

const Flag = Schema.Struct({ enabled: Schema.Boolean })

/** DeerFlow's `FeaturesResponse`. */
export const Features = Schema.Struct({
  agents_api: Flag.annotations({ description: "Whether the custom agents API (/api/agents) is served" }),
  browser_control: Flag.annotations({ description: "Live browser control (never, in Antler)" }),
  mcp_tasks: Flag.annotations({
    description: "Durable MCP tasks (on when the gateway runs its task runtime: mcp_tasks.enabled)"
  })
}).annotations({ identifier: "Features" })

/** DeerFlow's channel providers (none: Antler has no channels). */
export const ChannelProviders = Schema.Struct({
  enabled: Schema.Boolean,
  providers: Schema.Array(Schema.Unknown)
}).annotations({ identifier: "ChannelProviders" })

/** DeerFlow's channel connections (none). */
export const ChannelConnections = Schema.Struct({
  connections: Schema.Array(Schema.Unknown)
}).annotations({ identifier: "ChannelConnections" })

/** DeerFlow's Lark integration status, not installed. */
export const LarkStatus = Schema.Struct({
  installed: Schema.Boolean,
  version: Schema.String,
  manifest_version: Schema.NullOr(Schema.String),
  latest_available_version: Schema.NullOr(Schema.String),
  runtime_version_mismatch: Schema.Boolean,
  app_configured: Schema.Boolean,
  app_id: Schema.NullOr(Schema.String),
  app_brand: Schema.NullOr(Schema.String),
  skills_expected: Schema.Int,
  skills_installed: Schema.Int,
  installed_skills: Schema.Array(Schema.String),
  enabled_skills: Schema.Array(Schema.String),
  install_path: Schema.String,
  cli: Schema.Struct({
    available: Schema.Boolean,
    path: Schema.NullOr(Schema.String),
    version: Schema.NullOr(Schema.String),
    error: Schema.NullOr(Schema.String)
  }),
  auth: Schema.Struct({
    status: Schema.String,
    message: Schema.NullOr(Schema.String),
    user: Schema.NullOr(Schema.String),
    verified: Schema.Boolean
  }),
  sandbox_runtime_mode: Schema.String,
  sandbox_runtime_ready: Schema.Boolean,
  sandbox_runtime_detail: Schema.NullOr(Schema.String)
}).annotations({ identifier: "LarkStatus" })

/** The features group (served under `/api`). */
export const group = HttpApiGroup.make("features")
  .add(
    HttpApiEndpoint.get("listFeatures", "/features")
      .addSuccess(Features)
      .annotate(OpenApi.Summary, "Which of DeerFlow's optional features this server has")
  )
  .add(
    HttpApiEndpoint.get("channelProviders", "/channels/providers")
      .addSuccess(ChannelProviders)
      .annotate(OpenApi.Summary, "Chat channels (none: not implemented)")
  )
  .add(
    HttpApiEndpoint.get("channelConnections", "/channels/connections")
      .addSuccess(ChannelConnections)
      .annotate(OpenApi.Summary, "The user's chat channel connections (none: not implemented)")
  )
  .add(
    HttpApiEndpoint.get("larkStatus", "/integrations/lark/status")
      .addSuccess(LarkStatus)
      .annotate(OpenApi.Summary, "The Lark/Feishu integration (not installed: not implemented)")
  )
  .middlewareEndpoints(Authentication)
