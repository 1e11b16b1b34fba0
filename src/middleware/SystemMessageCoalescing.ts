/**
 * SystemMessageCoalescing (SPEC §5.26, lead chain slot #27): many providers accept one system message, first.
 * The system prompt is that message, and nothing else goes into it: it stays byte-identical on every request
 * of an agent, so providers can cache the prompt's prefix. System messages inside the history (dynamic-context
 * reminders, the durable-context contract) are sent where they stand, as hidden user-role messages with the
 * same content and id.
 *
 * This departs from DeerFlow, which folds them into the system message (and keeps only the latest date
 * reminder): that changes the system message whenever the date changes or a summary appears, so the provider's
 * cache misses the whole prompt. Kept in place, a reminder from an earlier day stays where it was told (each
 * date reminder holds the date of the messages after it) and every earlier request stays a prefix of the next.
 * Request-only; a request without in-history system messages passes through as the same object.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelRequest } from "../services/ModelService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"

/** An in-history system message as the hidden user-role message it is sent as. */
export const asHidden = (message: Message): Message =>
  M.human(message.content, {
    id: message.id,
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs: { ...message.additional_kwargs, hide_from_ui: true, coalesced_system_message: true }
  })

/**
 * The request with the system prompt alone at the top: every in-history system message sent in place as user.
 * With a cache (kept by the middleware for its agent's life), each system message is converted once: the same
 * hidden message object every call, so what keys on message objects downstream (token counts) stays cached.
 */
export const coalesce = (
  request: ModelRequest,
  cache?: WeakMap<Message, Message>,
  memo?: Incremental.Memo<ReadonlyArray<Message>>
): ModelRequest => {
  const messages = Incremental.mapMessages(request.messages, (message) => {
    if (message.type !== "system") return message
    let hidden = cache?.get(message)
    if (hidden === undefined) {
      hidden = asHidden(message)
      cache?.set(message, hidden)
    }
    return hidden
  }, memo)
  return messages === request.messages ? request : { ...request, messages }
}

/** The SystemMessageCoalescing middleware (SPEC §4.1 slot 27). */
export const layer = (): Middleware =>
  Layer.unwrapEffect(Effect.sync(() => {
    const cache = new WeakMap<Message, Message>()
    const memo = Incremental.makeMemo<ReadonlyArray<Message>>()
    return MW.make({ modelHooks: { before: (request) => coalesce(request, cache, memo) } })
  }))

/**
 * Its chain entry: inside the context middlewares whose system messages it sends as user.
 * `innermost` (a subagent's chain, SPEC §4.2): it also stands last, after every wrapper that adds one.
 */
export const entry = (options: { readonly innermost?: boolean | undefined } = {}) =>
  Chain.entry("SystemMessageCoalescing", () => layer(), [
    { inside: "DurableContext", reason: "it merges the system messages the context middlewares add" },
    ...(options.innermost === true
      ? [{ last: true as const, reason: "it merges every system message the wrappers outside it add" }]
      : [])
  ])
