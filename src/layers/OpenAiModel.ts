/**
 * The real model: a ModelService over the `openai` SDK's Chat Completions API, for OpenAI and every
 * OpenAI-compatible server (vLLM, DeepSeek, Ollama, LiteLLM...).
 *
 * Every call streams. Text, reasoning (`reasoning_content` / `reasoning`) and tool-call deltas are assembled
 * into one AI message, while text and reasoning deltas go to the run's event sink as `token` events. What
 * the server sends is untrusted: chunks are decoded with Schema (leniently, as providers differ) and the
 * assembled message is validated; anything malformed is a `ModelError` with reason `invalid_response`.
 *
 * The SDK's own retries are off (`maxRetries: 0`): retrying is the LLM error-handling middleware's job, and
 * every failure comes back as a classified `ModelError` (reason, SDK error class, status, code, retry
 * headers). Interrupting a call aborts its HTTP request.
 *
 * A hostile or broken server cannot take a run down: tool-call arguments are bounded in depth and size
 * before they are parsed (refused ones become invalid tool calls with a readable error), repeated tool-call
 * ids are made unique (`M.uniqueToolCallIds`), usage and other metadata are read best-effort, a 200 that is
 * not an event stream is described (content type, an HTML page's title) or, when it is a whole completion,
 * taken as one, and any bug left in here comes back as a `ModelError` rather than a defect. A watchdog on
 * the Clock ends a call that stays silent for `timeoutMs` (before the first byte or mid-stream) and emits an
 * `llm_waiting` event every 15 s while it waits. Error messages are cut to 2,000 characters, carry no
 * control characters and none of the adapter's own secrets (its API key, its base URL's credentials).
 *
 * This module is the public face: the layers and their options. The parts live in `openai/`: Config (options,
 * environment, client), RequestMapping (messages and settings as a Chat Completions request), ToolArguments
 * (bounded argument parsing), ChunkAccumulator (chunks into one message), ErrorClassification (anything thrown
 * as a `ModelError`), NonStreamBody (a 200 that is not a stream), MindIe (MindIE's dialect: tool calls as XML in
 * the text), MiniMax (`<think>` blocks of a whole answer) and Streaming (one call, its watchdog, its span).
 */
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import { ModelError, ModelService } from "../services/ModelService.js"
import type { Options } from "./openai/Config.js"
import { optionsFromConfig, resolve } from "./openai/Config.js"
import { generateWith } from "./openai/Streaming.js"

export type { Accumulator, ChunkText } from "./openai/ChunkAccumulator.js"
export { accumulator, Chunk, issuesText, usageOf } from "./openai/ChunkAccumulator.js"
export type { Options } from "./openai/Config.js"
export { optionsFromConfig } from "./openai/Config.js"
export { toModelError } from "./openai/ErrorClassification.js"
export { nonStreamBody } from "./openai/NonStreamBody.js"
export type { ModelProfile } from "./openai/RequestMapping.js"
export {
  deepMerge,
  normaliseArguments,
  thinkingFields,
  toChatMessage,
  toChatMessages,
  toChatRequest,
  toChatTools
} from "./openai/RequestMapping.js"
export { noticeEvery, waitingEvent } from "./openai/Streaming.js"
export { jsonDepth, MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, parseArguments } from "./openai/ToolArguments.js"

/**
 * A ModelService for one model. The OpenAI client is created here, once; unset connection options are read
 * from the environment (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`, `OPENAI_TIMEOUT` in seconds).
 * `settings.modelName` of a request is ignored (there is one model).
 */
export const make = (options: Options = {}): Effect.Effect<ModelService["Type"], ConfigError.ConfigError> =>
  Effect.map(resolve(options), (resolved) => ModelService.of({ generate: generateWith(resolved) }))

/**
 * A ModelService over the configured models, one client each, routing every request by
 * `settings.modelName` (default: the first model). An unknown name fails with a `bad_request` ModelError
 * listing the configured names. With no model configured, one model is taken from the environment.
 */
export const fromConfig = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<ModelService["Type"], ConfigError.ConfigError> =>
  Effect.gen(function*() {
    if (models.length === 0) return yield* make()
    const byName = new Map<string, ModelService["Type"]["generate"]>()
    for (const config of models) {
      if (byName.has(config.name)) continue
      byName.set(config.name, generateWith(yield* resolve(optionsFromConfig(config))))
    }
    const names = [...byName.keys()]
    const first = byName.get(names[0]!)!
    return ModelService.of({
      generate: (request) => {
        const name = request.settings.modelName
        if (name === undefined) return first(request)
        const generate = byName.get(name)
        if (generate !== undefined) return generate(request)
        return Effect.fail(new ModelError({
          reason: "bad_request",
          errorType: "UnknownModelError",
          message: `No model named "${name}" is configured. Configured models: ${names.join(", ")}.`
        }))
      }
    })
  })

/** A layer providing a ModelService for one model (see `make`). */
export const layer = (options: Options = {}): Layer.Layer<ModelService, ConfigError.ConfigError> =>
  Layer.effect(ModelService, make(options))

/** A layer providing a ModelService over these configured models (see `fromConfig`). */
export const layerFromConfig = (
  models: ReadonlyArray<ModelConfig>
): Layer.Layer<ModelService, ConfigError.ConfigError> => Layer.effect(ModelService, fromConfig(models))

/** A layer providing a ModelService over the models of the loaded `config.yaml`. */
export const layerFromAppConfig = (): Layer.Layer<ModelService, ConfigError.ConfigError, AppConfigService> =>
  Layer.effect(ModelService, Effect.flatMap(AppConfigService, (app) => fromConfig(app.config.models)))
