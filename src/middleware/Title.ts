/**
 * Title: names a thread after its first exchange. Without `title.model_name` it is local and free: the first
 * user message, clipped. With a model name, one internal model call (thinking off, never streamed) asked with
 * `title.prompt_template` writes a short title, and any failure (an invalid template included, which calls no
 * model) falls back to the local title. Written with the step's message, once per thread; a run that ends
 * before the first answer (cancelled, failed) still leaves the local title.
 */
import * as Either from "effect/Either"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import type { TitleConfig } from "../services/AppConfig.js"
import { withUpdate } from "../services/ModelService.js"
import type * as Authz from "../services/Authorization.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunState } from "../services/RunContext.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as LlmText from "../state/LlmText.js"
import * as PyFormat from "../state/PyFormat.js"
import * as AuthorizationMW from "./Authorization.js"
import * as Chain from "./Chain.js"
import { isGenuineUserMessage, originalUserContent } from "./InputSanitization.js"
import { headChars } from "../state/Chars.js"

/**
 * Fills a prompt template as Python's `str.format` does for DeerFlow's three fields (`{max_words}`, `{user_msg}`,
 * `{assistant_msg}`; `{{` and `}}` are literal braces). Undefined when the template is invalid: an unknown or
 * positional field, a format spec, an unmatched brace (DeerFlow's `format` raises there, and it falls back).
 */
export const formatPrompt = (template: string, fields: Readonly<Record<string, string>>): string | undefined =>
  Either.getOrUndefined(PyFormat.format(template, fields))

/** Text without the `<think>…</think>` blocks reasoning models write into their answer (in linear time). */
export const withoutThinking = (text: string): string =>
  LlmText.splitBlocks(text, "<think>", "<\\/think>", "i").text.trim()

/** The user's own words of a message (without a prepended uploads block). */
export const userText = (message: Message): string => (originalUserContent(message) ?? M.text(message)).trim()

/**
 * The local title: the first user message on one line; longer than `min(maxChars, 50)` characters (code points),
 * it is cut (to 50, or less where `...` would not fit in `maxChars`) and ends with `...`: never longer than
 * `maxChars`.
 */
export const fallbackTitle = (text: string, maxChars: number): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  if (oneLine === "") return "New Conversation"
  const limit = Math.min(maxChars, 50)
  if (headChars(oneLine, limit) === oneLine) return oneLine
  return `${headChars(oneLine, Math.min(limit, maxChars - 3)).trimEnd()}...`
}

/**
 * The thread's user message if the thread should get its title now: no title yet (an empty one is none, as in
 * DeerFlow) and exactly one message the user wrote (hidden reminders, injected context and summaries are not the
 * user's).
 */
export const due = (title: string | null, messages: ReadonlyArray<Message>): Message | undefined => {
  if (title !== null && title !== "") return undefined
  let user: Message | undefined
  for (const m of messages) {
    if (isGenuineUserMessage(m)) {
      if (user !== undefined) return undefined
      user = m
    }
  }
  return user
}

/** Cleans a model's title: no thinking, no surrounding quotes, one line, at most `maxChars`. */
export const cleanTitle = (raw: string, maxChars: number): string =>
  headChars(withoutThinking(raw).replace(/\s+/g, " ").replace(/^["'`]+|["'`]+$/g, "").trim(), maxChars)

/** The prompt the title model gets, or undefined when the template is invalid. */
export const titlePrompt = (config: TitleConfig, userText: string, answer: string): string | undefined =>
  formatPrompt(config.prompt_template, {
    max_words: String(config.max_words),
    user_msg: headChars(userText, 500),
    assistant_msg: headChars(withoutThinking(answer), 500)
  })

/** The Title middleware (SPEC §4.1 slot 22). */
export const layer = (config: TitleConfig, authorization?: Authz.Authorization): Middleware => {
  if (!config.enabled) return MW.make({})
  return MW.make(Effect.gen(function*() {
    const state = yield* RunState
    // The local title is the user's words cut (the model's title too): a secret of the run or of the process they
    // typed is masked before the cut, which would leave its beginning where no mask of the whole value finds it (the
    // thread's title, listed; the title model's prompt).
    const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
    const localTitle = (user: Message) => fallbackTitle(hide.text(userText(user)), config.max_chars)
    // (`title.model_name` the run's role may not use: the local title, as with none)
    const model = yield* AuthorizationMW.configuredModel(authorization, config.model_name, "Title")
    let done = false
    // A run that ends before its first answer (cancelled, failed) leaves the local title, as DeerFlow's worker
    // writes one for an interrupted first turn.
    const onEnd = (exit: Exit.Exit<unknown, unknown>) =>
      Exit.isSuccess(exit) ? Effect.void : Effect.flatMap(state.get, (current) => {
        const user = due(current.title, current.messages)
        return user === undefined
          ? Effect.void
          : Effect.ignore(state.update({ title: localTitle(user) }))
      })
    return {
      run: (loop) => Effect.onExit(loop, onEnd),
      modelHooks: {
        after: (response, request, _sent, next) => {
          if (done || request.internal !== undefined) return response
          return Effect.flatMap(state.get, (current) => {
            const user = due(current.title, current.messages)
            done = true
            if (user === undefined) return Effect.succeed(response)
            const local = localTitle(user)
            if (model === undefined || model === null) return Effect.succeed(withUpdate(response, { title: local }))
            const prompt = titlePrompt(config, hide.text(userText(user)), hide.text(M.text(response.message)))
            if (prompt === undefined) {
              return Effect.as(
                Effect.logWarning("title.prompt_template is not a valid template; the local title is used"),
                withUpdate(response, { title: local })
              )
            }
            return next({
              systemPrompt: undefined,
              messages: [M.human(prompt)],
              tools: [],
              settings: { modelName: model, thinkingEnabled: false },
              internal: "title"
            }).pipe(
              // (masked before its cut too: a title model repeating the user's words repeats a secret they typed)
              Effect.map((titled) => cleanTitle(hide.text(M.text(titled.message)), config.max_chars) || local),
              Effect.orElseSucceed(() => local),
              Effect.map((title) => withUpdate(response, { title }))
            )
          })
        }
      }
    }
  }))
}

/** Its chain entry: names the thread after its first exchange. */
export const entry = (config: TitleConfig, authorization?: Authz.Authorization) =>
  Chain.entry("Title", () => layer(config, authorization))
