/**
 * SystemMessageCoalescing: many providers accept one system message, first. When a request carries system
 * messages inside its history (the durable-context contract, dynamic-context reminders), they are merged
 * with the static system prompt into that one prompt, and removed from the messages. Only the latest
 * dynamic-context reminder survives. Request-only; a request without in-history system messages passes
 * through as the same object, so the prompt prefix stays cacheable.
 */
import * as Effect from "effect/Effect"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import type { ModelRequest } from "../services/ModelService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"

const isReminder = (message: Message) => message.additional_kwargs?.dynamic_context_reminder === true

/** The request with every in-history system message folded into the system prompt. */
export const coalesce = (request: ModelRequest): ModelRequest => {
  const messages = request.messages
  let first = -1
  for (let i = 0; i < messages.length; i++) {
    if (messages[i]!.type === "system") {
      first = i
      break
    }
  }
  if (first === -1) return request
  const systems = messages.filter((m) => m.type === "system")
  let lastReminder: Message | undefined
  for (const m of systems) if (isReminder(m)) lastReminder = m
  const parts = [
    ...(request.systemPrompt !== undefined && request.systemPrompt.trim() !== "" ? [request.systemPrompt] : []),
    ...systems.filter((m) => !isReminder(m) || m === lastReminder).map(M.text).filter((t) => t.trim() !== "")
  ]
  return {
    ...request,
    systemPrompt: parts.join("\n\n"),
    messages: messages.filter((m) => m.type !== "system")
  }
}

/** The SystemMessageCoalescing middleware (SPEC §4.1 slot 27). */
export const layer = (): Middleware => MW.make({ model: (request, next) => Effect.suspend(() => next(coalesce(request))) })
