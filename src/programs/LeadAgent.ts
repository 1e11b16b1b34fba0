/**
 * The lead agent: the documented middleware order, one line per entry with the reason it stands there.
 * The first entry is the outermost wrapper: its `before` work runs first and its `after` work last.
 * (SPEC-deerflow §4.1 gives DeerFlow's order; entries land here as they are built.)
 */
import type * as Layer from "effect/Layer"
import type { Middleware, Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import type { AppConfig } from "../services/AppConfig.js"

/** What the lead agent's chain is built from. */
export interface Options {
  readonly config: AppConfig
}

/** The lead agent's middlewares, outermost first. Fresh layer values on every call. */
export const middlewares = (_options: Options): ReadonlyArray<Middleware<any, any>> => []

/** The lead agent's stack over a base (the real model and tools). */
export const stack = <E, R>(options: Options, base: Layer.Layer<Ports, E, R>) => MW.stack(middlewares(options), base)
