/**
 * Title: names a thread after its first exchange. Without `title.model_name` it is local and free: the first
 * user message, clipped. With a model name, one internal model call writes a short title (never streamed),
 * and any failure falls back to the local title. Written with the step's message, once per thread.
 */
import * as Effect from "effect/Effect"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import type { TitleConfig } from "../services/AppConfig.js"
import { withUpdate } from "../services/ModelService.js"
import { RunState } from "../services/RunContext.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Chain from "./Chain.js"

const isUserMessage = (message: Message) =>
  message.type === "human" && message.additional_kwargs?.dynamic_context_reminder !== true

/** The user's own words of a message (without a prepended uploads block). */
export const userText = (message: Message): string => {
  const original = message.additional_kwargs?.original_user_content
  return (typeof original === "string" ? original : M.text(message)).trim()
}

/** The local title: the first user message, at most `min(maxChars, 50)` characters. */
export const fallbackTitle = (text: string, maxChars: number): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  if (oneLine === "") return "New Conversation"
  const limit = Math.min(maxChars, 50)
  return oneLine.length > limit ? `${oneLine.slice(0, limit - 3).trimEnd()}...` : oneLine
}

/** Whether the thread should get its title now: none yet, exactly one user message and an answer. */
export const due = (title: string | null, messages: ReadonlyArray<Message>): Message | undefined => {
  if (title !== null) return undefined
  let user: Message | undefined
  for (const m of messages) {
    if (isUserMessage(m)) {
      if (user !== undefined) return undefined
      user = m
    }
  }
  return user
}

/** Cleans a model's title: no thinking, no quotes, one line, at most `maxChars`. */
export const cleanTitle = (raw: string, maxChars: number): string =>
  raw.replace(/<think>[\s\S]*?<\/think>/g, "").replace(/["'`]/g, "").replace(/\s+/g, " ").trim().slice(0, maxChars)

/** The Title middleware (SPEC §4.1 slot 22). */
export const layer = (config: TitleConfig): Middleware => {
  if (!config.enabled) return MW.make({})
  return MW.make(Effect.map(RunState, (state) => {
    let done = false
    return {
      model: (request, next) =>
        Effect.flatMap(next(request), (response) => {
          if (done || request.internal !== undefined) return Effect.succeed(response)
          return Effect.flatMap(state.get, (current) => {
            const user = due(current.title, current.messages)
            done = true
            if (user === undefined) return Effect.succeed(response)
            const local = fallbackTitle(userText(user), config.max_chars)
            const model = config.model_name
            if (model === undefined || model === null) return Effect.succeed(withUpdate(response, { title: local }))
            const prompt = `Write a title of at most ${config.max_words} words for this conversation.\n` +
              `User: ${userText(user).slice(0, 500)}\nAssistant: ${M.text(response.message).slice(0, 500)}\n\n` +
              "Answer with the title only: no quotes, no explanation."
            return next({
              systemPrompt: undefined,
              messages: [M.human(prompt)],
              tools: [],
              settings: { modelName: model },
              internal: "title"
            }).pipe(
              Effect.map((titled) => cleanTitle(M.text(titled.message), config.max_chars) || local),
              Effect.orElseSucceed(() => local),
              Effect.map((title) => withUpdate(response, { title }))
            )
          })
        })
    }
  }))
}

/** Its chain entry: names the thread after its first exchange. */
export const entry = (config: TitleConfig) => Chain.entry("Title", () => layer(config))
