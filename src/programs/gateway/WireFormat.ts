/**
 * The gateway's wire format as the library exports it (`GatewayProtocol` of `antler/gateway`): the objects and
 * framing (`Protocol.ts`) and the projection of a run's events onto the stream modes (`Projection.ts`).
 */
export * from "./Projection.js"
export * from "./Protocol.js"
