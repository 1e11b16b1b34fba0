/**
 * The retry middleware's span, when the app traces: each model call is one `LLMErrorHandling.call` span over
 * all its attempts, saying how many there were and, when it gave up, why.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as LLMErrorHandling from "../../src/middleware/LLMErrorHandling.js"
import type { ModelRequest, ModelResponse } from "../../src/services/ModelService.js"
import { ModelError } from "../../src/services/ModelService.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"

const request: ModelRequest = { systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} }

/** A model that plays `outcomes` in turn, each attempt its own `model.attempt` span. */
const scripted = (outcomes: ReadonlyArray<ModelError | string>) => {
  let attempts = 0
  return (_: ModelRequest): Effect.Effect<ModelResponse, ModelError> =>
    Effect.suspend(() => {
      const outcome = outcomes[attempts++] ?? "unused"
      return typeof outcome === "string" ? Effect.succeed({ message: M.ai(outcome) }) : Effect.fail(outcome)
    }).pipe(Effect.withSpan("model.attempt"))
}

const error = (fields: ConstructorParameters<typeof ModelError>[0]) => new ModelError(fields)
const busy = error({ reason: "server", errorType: "InternalServerError", status: 503, message: "busy" })
const denied = error({ reason: "auth", errorType: "AuthenticationError", status: 401, message: "Invalid API key" })

describe("LLMErrorHandling spans", () => {
  it.effect("one LLMErrorHandling.call span per call over its attempts, with their number and the final reason", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      const wrap = LLMErrorHandling.wrap()
      const retried = yield* Effect.fork(wrap(request, scripted([busy, "recovered"])))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(M.text((yield* Fiber.join(retried)).message), "recovered")
      yield* wrap(request, scripted(["at once"]))
      yield* wrap(request, scripted([denied]))

      // read while the exporter is alive (it drops its spans at shutdown)
      const spans = exporter.getFinishedSpans()
      const calls = spans.filter((span) => span.name === "LLMErrorHandling.call")
      assert.deepStrictEqual(calls.map((span) => span.attributes), [
        { "antler.llm.attempts": 2 },
        {},
        { "antler.llm.attempts": 1, "antler.llm.error_reason": "auth" }
      ])
      const attempts = spans.filter((span) => span.name === "model.attempt")
      assert.deepStrictEqual(
        attempts.map((span) => calls.findIndex((call) => call.spanContext().spanId === span.parentSpanContext?.spanId)),
        [0, 0, 1, 2],
        "every attempt is under its call's span"
      )
    }).pipe(
      Effect.provideService(RunEvents, RunEvents.discard),
      Effect.provide(NodeSdk.layer(() => ({ spanProcessor: new SimpleSpanProcessor(exporter) })))
    )
  })
})
