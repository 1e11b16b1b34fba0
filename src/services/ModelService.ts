/**
 * The model port: one call of a chat model. A request carries the projected messages (never the state
 * itself), the static system prompt, the tool definitions visible to the model and the model settings.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { AIMessage, JsonObject, Message } from "../state/Message.js"
import type { StateUpdate } from "../state/ThreadState.js"
import type { RunServices } from "./RunContext.js"
import { extend } from "../state/internal/Objects.js"
import type { ModelError } from "./ModelError.js"

export { ModelError, ModelErrorReason } from "./ModelError.js"

/** A tool as the model sees it: name, description and a JSON Schema for its arguments. */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: JsonObject
  /**
   * The tool only reads (files, the web): running a call again changes nothing, so a run need not save the
   * call durably before it runs it (a crash at worst makes the model ask again). Never sent to the model.
   */
  readonly readOnly?: boolean | undefined
  /**
   * The tool's successful results carry the read mark of the file they read (`ReadMark`), stamped from the bytes
   * the tool itself read: ReadBeforeWrite takes no lock and reads nothing again for its calls. Never sent to the
   * model.
   */
  readonly marksReads?: boolean | undefined
}

/** Per-call model settings. */
export interface ModelSettings {
  /** The configured model name (`models[].name`), if the run chose one. */
  readonly modelName?: string | undefined
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  readonly thinkingEnabled?: boolean | undefined
  readonly reasoningEffort?: string | undefined
}

/** One model call. */
export interface ModelRequest {
  /** The static system prompt (never holds date, memory or uploads: those live in hidden messages). */
  readonly systemPrompt: string | undefined
  readonly messages: ReadonlyArray<Message>
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly settings: ModelSettings
  /**
   * Set for calls the harness makes for itself (summaries, titles): their tokens are not streamed to the
   * user as if they were the answer. The value names the purpose, e.g. `"summarization"`.
   */
  readonly internal?: string | undefined
}

/** The assembled response of one model call. */
export interface ModelResponse {
  readonly message: AIMessage
  /**
   * State changes that belong with this message (token totals, rewritten earlier messages). The loop applies
   * them in the same update as the message, so a step stays one write.
   */
  readonly update?: StateUpdate | undefined
  /**
   * Set when `message` is a stand-in written because the model could not answer (LLMErrorHandling's fallback
   * after its retries): the run saves the message, then ends with status `error` and this error.
   */
  readonly failure?: { readonly name: string; readonly message: string } | undefined
}

/** Adds state changes to a response: message writes and token deltas accumulate, other fields are replaced. */
export const withUpdate = (response: ModelResponse, update: StateUpdate): ModelResponse => {
  const previous = response.update
  if (previous === undefined) return extend(response, { update })
  const merged: { -readonly [K in keyof StateUpdate]: StateUpdate[K] } = { ...previous, ...update }
  if (previous.messages !== undefined && update.messages !== undefined) {
    merged.messages = [...previous.messages, ...update.messages]
  }
  if (previous.token_usage !== undefined && update.token_usage !== undefined) {
    merged.token_usage = [...previous.token_usage, ...update.token_usage]
  }
  return extend(response, { update: merged })
}

/**
 * The model port. A call runs inside a run: a streaming model publishes its token deltas on the run's
 * `RunEvents` while it assembles the response (calls marked `internal` publish nothing).
 */
export class ModelService extends Context.Tag("antler/ModelService")<
  ModelService,
  {
    readonly generate: (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, RunServices>
  }
>() {}
