/** The health endpoints (declared in `api/Health.ts`): open to every client. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import type { LangGraphApi } from "../api/GatewayApi.js"
import * as Health from "../api/Health.js"
import { json } from "./Http.js"

/** The health endpoints of `api` (the LangGraph API under one of its prefixes). */
export const layer = (api: LangGraphApi) =>
  HttpApiBuilder.group(api, "health", (handlers) =>
    handlers
      .handleRaw("ok", () => Effect.succeed(json(Health.Ok, { ok: true })))
      .handleRaw("health", () => Effect.succeed(json(Health.Healthy, { status: "healthy", service: "antler-gateway" })))
      .handleRaw("info", () =>
        Effect.succeed(json(Health.Info, { version: "antler", flags: { assistants: true, crons: true } }))))
