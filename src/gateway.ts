/**
 * Antler's LangGraph-compatible HTTP gateway (what `antler serve` runs), as a layer, and its wire format:
 *
 * ```ts
 * import { Gateway, GatewayProtocol } from "antler/gateway"
 * ```
 *
 * A subpath of its own: it loads an HTTP server (`@effect/platform-node`), which an app that only embeds the
 * agent does not need (`import "antler"` does not load it).
 */
export * as Gateway from "./programs/gateway/Gateway.js"
export * as GatewayProtocol from "./programs/gateway/WireFormat.js"
