/**
 * Streaming one call: the request sent with an abort signal, the stream read chunk by chunk into the
 * accumulator (text and reasoning deltas emitted as `token` events unless the call is internal), a
 * non-stream 200 handed to NonStreamBody, and a watchdog on the Clock that emits `llm_waiting` while the
 * call is silent and ends it after `timeoutMs` (a first-byte or an idle-stream timeout). Every failure,
 * a bug included, comes back as a `ModelError` cut to size, without control characters, the adapter's secrets, the
 * process's (`ProcessSecrets`: another model's key, a tool's) or the run's request secrets (a cut inside one hides its
 * beginning too: `Redact.Redactor.last`). Each call is
 * one `OpenAiModel.generate` span, whose context its request carries (`traceparent`) when the app traces.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import type * as ParseResult from "effect/ParseResult"
import type { ModelRequest, ModelService } from "../../services/ModelService.js"
import { ModelError } from "../../services/ModelService.js"
import * as ProcessSecrets from "../../services/ProcessSecrets.js"
import { RunContext } from "../../services/RunContext.js"
import { RunEvents } from "../../services/RunEvents.js"
import * as SkillSecrets from "../../services/SkillSecrets.js"
import * as TraceContext from "../../services/TraceContext.js"
import * as Redact from "../../state/Redact.js"
import type { ChunkText } from "./ChunkAccumulator.js"
import { accumulator, decodeChunk, issuesText } from "./ChunkAccumulator.js"
import type { Resolved } from "./Config.js"
import { toModelError } from "./ErrorClassification.js"
import * as MindIe from "./MindIe.js"
import * as MiniMax from "./MiniMax.js"
import { MAX_BODY_BYTES, nonStreamBody, readBody } from "./NonStreamBody.js"
import { toChatRequest } from "./RequestMapping.js"
import * as SseEvents from "./SseEvents.js"

/** The per-call HTTP state: the request's abort controller, when something last arrived, why it was ended. */
interface Call {
  readonly controller: AbortController
  /** Clock time of the request, the headers or the last chunk. */
  lastActivity: number
  headers: boolean
  timedOut: boolean
}

/** The longest error message kept (a server may answer with a whole HTML page). */
const MAX_ERROR_CHARS = 2000

/** The `llm_waiting` event: a model call has been silent for `waitedMs` (it gives up at `timeoutMs`). */
export const waitingEvent = (model: string, waitedMs: number, timeoutMs: number, started: boolean) => ({
  type: "llm_waiting" as const,
  model,
  waited_ms: waitedMs,
  timeout_ms: timeoutMs,
  message: `Waiting for model ${model}: ${started ? "its answer paused" : "no answer yet"}, ` +
    `nothing received for ${seconds(waitedMs)} (gives up after ${seconds(timeoutMs)}).`
})

const seconds = (ms: number): string => `${Number((ms / 1000).toFixed(1))}s`

/** How often a silent call says it is still waiting: every 15 s (twice per timeout when that is shorter). */
export const noticeEvery = (timeoutMs: number): number => Math.max(1, Math.min(15_000, Math.floor(timeoutMs / 2)))

/** The `generate` of one resolved model. */
export const generateWith = (resolved: Resolved): ModelService["Type"]["generate"] => {
  const { baseURL, client, model, redactor, timeoutMs } = resolved
  const where = `model ${model} at ${Redact.url(baseURL)}`
  const every = noticeEvery(timeoutMs)
  const timeoutError = (call: Call) =>
    call.headers
      ? new ModelError({
        reason: "timeout",
        errorType: "StreamChunkTimeoutError",
        message: `The model server stopped sending its answer: nothing came for ${seconds(timeoutMs)} (${where}).`
      })
      : new ModelError({
        reason: "timeout",
        errorType: "APITimeoutError",
        message: `The model server did not start answering within ${seconds(timeoutMs)} (${where}).`
      })
  const malformed = (error: ParseResult.ParseError, hide: Redact.Redactor) =>
    new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server sent a malformed stream chunk (${where}): ${issuesText(error, 3, hide.last)}`
    })
  // Nothing the server sent reaches a log, an event or the store with this adapter's secrets, the run's request
  // secrets (a server may quote the request) or raw controls; a cut inside one hides its beginning too, which no mask
  // of the whole value finds later.
  const clean = (error: ModelError, hide: Redact.Redactor): ModelError => {
    const safe = (text: string) => Redact.controls(hide.last(text.slice(0, MAX_ERROR_CHARS)))
    const cause = error.cause as { name?: unknown; message?: unknown } | undefined
    return new ModelError({
      ...error,
      message: safe(error.message),
      cause: cause === undefined
        ? undefined
        : Object.assign(new Error(safe(String(cause.message ?? cause))), { name: String(cause.name ?? "Error") })
    })
  }
  const failWith = (call: Call) => (error: unknown) =>
    call.timedOut ? timeoutError(call) : toModelError(error, model, baseURL, resolved.sdk, resolved.keyless)

  return Effect.fn("OpenAiModel.generate", { attributes: { model, "gen_ai.request.model": model } })(
    function*(request: ModelRequest) {
      yield* Effect.annotateCurrentSpan("internal", request.internal ?? false)
      const sink = yield* RunEvents
      const clock = yield* Effect.clock
      const messageId = `run-${crypto.randomUUID()}`
      // (what hides the server's words in an error, the process's secrets with the adapter's: made only when needed)
      const secrets = (yield* RunContext).options.secrets
      const process = yield* ProcessSecrets.current
      let hidden: Redact.Redactor | undefined
      const hide = () =>
        hidden ??= SkillSecrets.runRedactor(
          process === undefined ? redactor : Redact.also(process, redactor.secrets),
          secrets
        )
      const acc = accumulator(messageId, model, hide)
      const silent = request.internal !== undefined
      // (the request once sent is the SDK's: not kept while its answer streams, which may take minutes; a long
      // thread's request holds a copy of every tool call's arguments as JSON)
      let body: ReturnType<typeof toChatRequest> | undefined = toChatRequest(request, resolved)
      const token = (delta: ChunkText): Effect.Effect<void> =>
        delta.reasoning === ""
          ? sink.emit({ type: "token", message_id: messageId, text: delta.text })
          : delta.text === ""
          ? sink.emit({ type: "token", message_id: messageId, reasoning: delta.reasoning })
          : Effect.zipRight(
            sink.emit({ type: "token", message_id: messageId, reasoning: delta.reasoning }),
            sink.emit({ type: "token", message_id: messageId, text: delta.text })
          )
      const call: Call = {
        controller: new AbortController(),
        lastActivity: clock.unsafeCurrentTimeMillis(),
        headers: false,
        timedOut: false
      }
      const touch = () => {
        call.lastActivity = clock.unsafeCurrentTimeMillis()
      }

      // The watchdog: says that the call is waiting while nothing arrives, and ends it after `timeoutMs` of
      // silence (before the headers: a first-byte timeout; after: an idle stream). It runs on the Clock.
      const watchdog = Effect.gen(function*() {
        let since = call.lastActivity
        let notices = 0
        for (;;) {
          if (call.lastActivity !== since) {
            since = call.lastActivity
            notices = 0
          }
          const now = clock.unsafeCurrentTimeMillis()
          const waited = now - since
          if (waited >= timeoutMs) {
            call.timedOut = true
            call.controller.abort()
            return
          }
          if (waited >= every * (notices + 1)) {
            notices = Math.floor(waited / every)
            const data = waitingEvent(model, waited, timeoutMs, call.headers)
            yield* sink.emit({ type: "custom", name: "llm_waiting", data })
            continue
          }
          yield* Effect.sleep(Math.max(1, Math.min(since + timeoutMs, since + every * (notices + 1)) - now))
        }
      })

      // An event's chunk, or what the SDK would throw for it: its data not JSON (a SyntaxError), or an `error`
      // the server reported mid-stream (an APIError without a status).
      const chunkOf = (sse: SseEvents.SseEvent, headers: Headers): Either.Either<unknown, unknown> => {
        let data: any
        try {
          data = JSON.parse(sse.data)
        } catch (error) {
          return Either.left(error)
        }
        if (sse.event !== null && sse.event.startsWith("thread.")) return Either.right({ event: sse.event, data })
        if (data && data.error) return Either.left(new resolved.sdk.APIError(undefined, data.error, undefined, headers))
        return Either.right(data)
      }

      const add = (raw: unknown, whole = false): Effect.Effect<void, ModelError> => {
        const chunk = resolved.mindIe === true
          ? MindIe.readChunk(raw, whole)
          : whole && resolved.reasoningSplit === true
          ? MiniMax.readWholeChunk(raw)
          : raw
        const decoded = decodeChunk(chunk)
        if (Either.isLeft(decoded)) return Effect.fail(malformed(decoded.left, hide()))
        const delta = acc.add(decoded.right)
        if (silent || (delta.text === "" && delta.reasoning === "")) return Effect.void
        return token(delta)
      }

      const consume = Effect.gen(function*() {
        // (the call's span goes with its request, W3C's `traceparent`, when the app traces)
        const headers = yield* TraceContext.outgoingHeaders
        // (the body's events are read here, not by the SDK's stream: see SseEvents)
        const response = yield* Effect.tryPromise({
          try: () => {
            const sending = body!
            body = undefined
            return client.chat.completions.create(sending, { signal: call.controller.signal, headers }).asResponse()
          },
          catch: failWith(call)
        })
        call.headers = true
        touch()
        const contentType = response.headers.get("content-type") ?? ""
        if (!/event-stream/i.test(contentType) && /json|html/i.test(contentType)) {
          const { cut, text } = yield* Effect.tryPromise({
            try: () => readBody(response, MAX_BODY_BYTES),
            catch: failWith(call)
          })
          const chunk = nonStreamBody(contentType, text, cut, where, hide().last)
          if (Either.isLeft(chunk)) return yield* Effect.fail(chunk.left)
          return yield* add(chunk.right, true)
        }
        if (response.body === null) {
          return yield* Effect.fail(failWith(call)(new Error("Attempted to iterate over a response with no body")))
        }
        const reader = response.body.getReader()
        const read = Effect.tryPromise({ try: () => reader.read(), catch: failWith(call) })
        const decoder = new TextDecoder()
        const parser = SseEvents.makeParser()
        // after `[DONE]` the rest of the body is read and ignored, as the SDK does
        let done = false
        for (;;) {
          const result = yield* read
          if (call.timedOut) return yield* Effect.fail(timeoutError(call))
          // every event of what arrived at once, in one go
          const events = result.done
            ? [...parser.push(decoder.decode()), ...parser.end()]
            : parser.push(decoder.decode(result.value, { stream: true }))
          if (!result.done) touch()
          if (parser.tooLong()) {
            yield* Effect.promise(() => reader.cancel().catch(() => undefined))
            return yield* Effect.fail(
              new ModelError({
                reason: "invalid_response",
                errorType: "InvalidResponseError",
                message: `The model server sent a stream event longer than ${SseEvents.MAX_EVENT_CHARS} characters ` +
                  `(${where}); the rest of its answer was not read.`
              })
            )
          }
          for (const sse of events) {
            if (done) continue
            if (sse.data.startsWith("[DONE]")) {
              done = true
              continue
            }
            const chunk = chunkOf(sse, response.headers)
            if (Either.isLeft(chunk)) return yield* Effect.fail(failWith(call)(chunk.left))
            yield* add(chunk.right)
          }
          if (result.done) break
          // (an answer past MAX_ANSWER_CHARS is cut: the rest of the body is not read)
          if (acc.full()) {
            yield* Effect.promise(() => reader.cancel().catch(() => undefined))
            break
          }
        }
        if (acc.empty()) {
          return yield* Effect.fail(
            new ModelError({
              reason: "empty_response",
              errorType: "EmptyResponseError",
              message: `The model server answered with status 200 and content type ` +
                `${contentType === "" ? "(none)" : contentType}, but its stream held no answer (${where}).`
            })
          )
        }
      })

      // (the watchdog's fiber is interrupted when the call ends, without a Scope of its own: a Scope made, a
      // finalizer added and the Scope closed cost a fifth of a call's effect steps)
      const done = Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.fork(Effect.interruptible(watchdog)), (dog) =>
          Effect.ensuring(
            restore(Effect.flatMap(consume, () =>
              Either.match(acc.finish(), {
                onLeft: Effect.fail,
                onRight: (message) => Effect.succeed({ message })
              }))),
            Fiber.interrupt(dog)
          ))
      ).pipe(
        // Ends the HTTP request when the call is interrupted or fails; after a complete answer it is a no-op.
        Effect.ensuring(Effect.sync(() => call.controller.abort())),
        // A bug here must not take the run down: it is a failed model call like any other.
        Effect.catchAllDefect((defect) =>
          Effect.fail(toModelError(defect, model, baseURL, resolved.sdk, resolved.keyless))
        ),
        Effect.mapError((error) => clean(error, hide()))
      )
      const response = yield* done
      // what a trace viewer shows per call (OpenTelemetry's GenAI attribute names)
      const usage = response.message.usage_metadata
      if (usage !== undefined) {
        yield* Effect.annotateCurrentSpan({
          "gen_ai.usage.input_tokens": usage.input_tokens,
          "gen_ai.usage.output_tokens": usage.output_tokens
        })
      }
      return response
    }
  )
}
