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
import type { ModelRequest } from "../services/ModelService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"

/** An in-history system message as the hidden user-role message it is sent as. */
export const asHidden = (message: Message): Message =>
  M.human(message.content, {
    id: message.id,
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs: { ...message.additional_kwargs, hide_from_ui: true, coalesced_system_message: true }
  })

/** The request with the system prompt alone at the top: every in-history system message sent in place as user. */
export const coalesce = (request: ModelRequest): ModelRequest => {
  if (!request.messages.some((m) => m.type === "system")) return request
  return { ...request, messages: request.messages.map((m) => (m.type === "system" ? asHidden(m) : m)) }
}

/** The SystemMessageCoalescing middleware (SPEC §4.1 slot 27). */
export const layer = (): Middleware =>
  MW.make({ model: (request, next) => Effect.suspend(() => next(coalesce(request))) })
