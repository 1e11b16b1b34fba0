/**
 * MCP routing (SPEC §5.24): operator keywords (`routing: { mode: prefer, keywords, priority }` in
 * `extensions_config.json`) that promote matching deferred MCP tools before a model call, so the model sees
 * their schemas without a `tool_search` first. Before each model call: the latest message the user typed (its
 * original words), case-folded; the routed tools with a keyword in it, by priority then name; the first
 * `tool_search.auto_promote_top_k` of them written to `promoted` (merged by the reducer). It never runs a tool.
 */
import * as Effect from "effect/Effect"
import { RunState } from "../services/RunContext.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import { originalUserContent } from "./InputSanitization.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"

/** A deferred tool with routing keywords. */
export interface Route {
  readonly name: string
  readonly priority: number
  readonly keywords: ReadonlyArray<string>
}

/**
 * The text of the latest message the user typed, or undefined: its `original_user_content` when a middleware
 * framed it (an uploads block naming the files must not match a keyword), else its content. Hidden messages never
 * count, a clarification answer either (DeerFlow's `is_real_user_message`): routing follows the user's request.
 */
export const latestUserText = (messages: ReadonlyArray<Message>): string | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (M.isRealUserMessage(message)) {
      return originalUserContent(message) ?? M.contentText(message.content)
    }
  }
  return undefined
}

/** The routed tools a text asks for: any keyword contained (case-folded), by priority then name, at most `topK`. */
export const matches = (routes: ReadonlyArray<Route>, text: string, topK: number): ReadonlyArray<string> => {
  const folded = text.toLocaleLowerCase()
  return routes
    .filter((route) => route.keywords.some((k) => k.trim() !== "" && folded.includes(k.toLocaleLowerCase())))
    .sort((a, b) => b.priority - a.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .slice(0, Math.min(5, Math.max(1, topK)))
    .map((route) => route.name)
}

/** Options of the middleware. */
export interface Options {
  readonly routes: ReadonlyArray<Route>
  /** The deferred catalog's hash (`DeferredToolFilter.catalogHash`). */
  readonly catalogHash: string
  /** `tool_search.auto_promote_top_k` (1–5). */
  readonly topK: number
}

/** The middleware. */
export const layer = (options: Options): Middleware =>
  MW.make({
    model: (request, next) =>
      Effect.flatMap(RunState, (holder) =>
        Effect.flatMap(holder.get, (state) => {
          const text = latestUserText(state.messages)
          const names = text === undefined ? [] : matches(options.routes, text, options.topK)
          const promoted = state.promoted
          const known = promoted !== null && promoted.catalog_hash === options.catalogHash
            ? new Set(promoted.names)
            : new Set<string>()
          if (names.length === 0 || names.every((name) => known.has(name))) return next(request)
          return holder.update({ promoted: { catalog_hash: options.catalogHash, names } }).pipe(
            Effect.orDie,
            Effect.zipRight(next(request))
          )
        }))
  })

/** Its chain entry: promotes routed tools before the deferred-tool filter reads the promotions. */
export const entry = (options: Options) =>
  Chain.entry("McpRouting", () => layer(options), [
    { outside: "DeferredToolFilter", reason: "promotions it writes before a call must be seen by that call's filter" }
  ])
