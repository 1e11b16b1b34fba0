/**
 * The health endpoints of the LangGraph API, declared: open to every client (no token), they say the gateway
 * answers and what it offers. Implemented in `handlers/Health.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"

/** `GET /ok` */
export const Ok = Schema.Struct({ ok: Schema.Boolean }).annotations({ identifier: "Ok" })

/** `GET /health`: DeerFlow's health check (its Docker healthcheck and proxy ask for it). */
export const Healthy = Schema.Struct({ status: Schema.Literal("healthy"), service: Schema.String }).annotations({
  identifier: "Healthy"
})

/** `GET /info` */
export const Info = Schema.Struct({
  version: Schema.String,
  flags: Schema.Struct({ assistants: Schema.Boolean, crons: Schema.Boolean })
}).annotations({ identifier: "Info" })

/** The health group. */
export const group = HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("ok", "/ok").addSuccess(Ok).annotate(OpenApi.Summary, "Whether the gateway answers"))
  .add(
    HttpApiEndpoint.get("health", "/health").addSuccess(Healthy).annotate(OpenApi.Summary, "DeerFlow's health check")
  )
  .add(HttpApiEndpoint.get("info", "/info").addSuccess(Info).annotate(OpenApi.Summary, "What the gateway offers"))
