/**
 * A SCRIPTED model, for tests, benchmarks and the demo: it does not think, it replays turns you give it.
 * Each turn is text, tool calls, or a function of the request. Tokens are streamed as one delta per turn
 * so that renderers see the same events as with a real model.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelRequest } from "../services/ModelService.js"
import { ModelError, ModelService } from "../services/ModelService.js"
import { RunEvents } from "../services/RunEvents.js"
import type { AIMessage, JsonObject, UsageMetadata } from "../state/Message.js"
import * as M from "../state/Message.js"

/** One scripted turn. */
export interface Turn {
  readonly content?: string
  readonly toolCalls?: ReadonlyArray<{ readonly name: string; readonly args: JsonObject; readonly id?: string }>
  readonly finishReason?: string
  readonly usage?: UsageMetadata
  readonly responseMetadata?: JsonObject
}

/** A script: a fixed list of turns, or a function of the request and the call number (from 0). */
export type Script =
  | ReadonlyArray<Turn | string | ((request: ModelRequest) => Turn | string | AIMessage)>
  | ((request: ModelRequest, call: number) => Turn | string | AIMessage | undefined)

/** Builds the AI message of a turn. Its id is fresh (unique across processes and model instances). */
export const message = (turn: Turn | string): AIMessage => {
  const t: Turn = typeof turn === "string" ? { content: turn } : turn
  const id = `scripted-${crypto.randomUUID()}`
  const calls = (t.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `${id}-call-${i}`,
    name: call.name,
    args: call.args,
    type: "tool_call" as const
  }))
  return M.ai(t.content ?? "", {
    id,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
    ...(t.usage !== undefined ? { usage_metadata: t.usage } : {}),
    response_metadata: {
      finish_reason: t.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop"),
      model_name: "scripted",
      ...t.responseMetadata
    }
  })
}

const isMessage = (value: unknown): value is AIMessage =>
  typeof value === "object" && value !== null && (value as { type?: unknown }).type === "ai"

/** A scripted ModelService. Fails with a `ModelError` when the script has no turn left. */
export const make = (script: Script): ModelService["Type"] => {
  let calls = 0
  return ModelService.of({
    generate: (request) =>
      Effect.suspend(() => {
        const call = calls++
        let turn: Turn | string | AIMessage | undefined
        if (typeof script === "function") turn = script(request, call)
        else {
          const entry = script[call]
          turn = typeof entry === "function" ? entry(request) : entry
        }
        if (turn === undefined) {
          return Effect.fail(
            new ModelError({
              reason: "other",
              errorType: "ScriptExhausted",
              message: `The scripted model has no turn ${call + 1} (its script has ${
                typeof script === "function" ? "ended" : `${script.length} turns`
              })`
            })
          )
        }
        const out = isMessage(turn) ? turn : message(turn)
        const text = M.text(out)
        if (text === "" || request.internal !== undefined) return Effect.succeed({ message: out })
        return Effect.as(
          Effect.flatMap(RunEvents, (sink) =>
            sink.emit({ type: "token", message_id: out.id, text })),
          { message: out }
        )
      })
  })
}

/** A layer providing a scripted ModelService. */
export const layer = (script: Script): Layer.Layer<ModelService> => Layer.sync(ModelService, () => make(script))
