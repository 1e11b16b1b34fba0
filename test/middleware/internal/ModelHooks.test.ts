/**
 * Model hooks fused (`internal/ModelHooks.ts`) against the wrappers they stand for: whatever the mix of hooked
 * and wrapping middlewares, and of hooks answering at once or with an effect, a model call through a stack sees
 * the same requests, in the same order, and answers the same response as the same stack made of wrappers only;
 * through the ports as they are and through the ports resolved for a run.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FC from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as MW from "../../../src/middleware/Middleware.js"
import { resolve } from "../../../src/middleware/internal/RunFrame.js"
import type { ModelRequest, ModelResponse } from "../../../src/services/ModelService.js"
import { ModelError, ModelService } from "../../../src/services/ModelService.js"
import { ToolService } from "../../../src/services/ToolService.js"
import * as M from "../../../src/state/Message.js"

/** One middleware of a generated stack. */
interface Shape {
  readonly hooked: boolean
  readonly before: "none" | "now" | "effect"
  readonly after: "none" | "now" | "effect"
  /** Its `after` calls the inner model again once (as TerminalResponse asks again). */
  readonly again: boolean
}

const shape: FC.Arbitrary<Shape> = FC.record({
  hooked: FC.boolean(),
  before: FC.constantFrom("none", "now", "effect"),
  after: FC.constantFrom("none", "now", "effect"),
  again: FC.boolean()
})

const textOf = (request: ModelRequest) => request.messages.map((m) => M.text(m)).join(",")

/** A stack of these shapes over a model that answers with the text of the request it got. */
const build = (shapes: ReadonlyArray<Shape>, fused: boolean, trace: Array<string>) => {
  const middlewares = shapes.map((s, i) => {
    const before = (request: ModelRequest): MW.Now<ModelRequest> => {
      if (s.before === "none") return request
      trace.push(`before ${i} got ${textOf(request)}`)
      const sent = { ...request, messages: [...request.messages, M.human(`b${i}`)] }
      return s.before === "now" ? sent : Effect.sync(() => sent)
    }
    const after = (response: ModelResponse, request: ModelRequest, sent: ModelRequest, next: MW.ModelNext) => {
      if (s.after === "none") return response
      trace.push(`after ${i}: ${M.text(response.message)} for ${textOf(request)} sent ${textOf(sent)}`)
      const answer = (r: ModelResponse) => ({ message: M.ai(`${M.text(r.message)}+a${i}`) })
      if (s.again) return Effect.map(next(sent), answer)
      return s.after === "now" ? answer(response) : Effect.sync(() => answer(response))
    }
    const wrapper: MW.Wrappers["model"] = (request, next) =>
      Effect.flatMap(MW.lift(before(request)), (sent) =>
        Effect.flatMap(next(sent), (response) => MW.lift(after(response, request, sent, next))))
    return MW.make(
      fused && s.hooked
        ? { modelHooks: { ...(s.before !== "none" ? { before } : {}), ...(s.after !== "none" ? { after } : {}) } }
        : { model: wrapper }
    )
  })
  const model: ModelService["Type"] = {
    generate: (request) =>
      Effect.sync(() => {
        trace.push(`model got ${textOf(request)}`)
        return { message: M.ai(`[${textOf(request)}]`) }
      })
  }
  return MW.stack(middlewares, MW.base(model, { definitions: [], call: () => Effect.die("no tools") }))
}

const call = (stack: Layer.Layer<MW.Ports>, resolved: boolean) =>
  Effect.gen(function*() {
    const model = yield* ModelService
    const tools = yield* ToolService
    const generate = resolved ? (yield* resolve(model, tools)).generate : model.generate
    const request: ModelRequest = { systemPrompt: undefined, messages: [M.human("u")], tools: [], settings: {} }
    // (nothing here reads a run's services)
    return M.text((yield* (generate(request) as Effect.Effect<ModelResponse, ModelError>)).message)
  }).pipe(Effect.provide(stack), Effect.scoped)

describe("Model hooks, fused", () => {
  it.effect.prop(
    "a stack mixing hooks and wrappers calls and answers as the same stack of wrappers",
    [FC.array(shape, { maxLength: 8 }), FC.boolean()],
    ([shapes, resolved]) =>
      Effect.gen(function*() {
        const expected: Array<string> = []
        const got: Array<string> = []
        const want = yield* call(build(shapes, false, expected), resolved)
        const have = yield* call(build(shapes, true, got), resolved)
        assert.strictEqual(have, want)
        assert.deepStrictEqual(got, expected)
      })
  )

  it.effect("runs its hooks when the call runs, every time it runs (a retried call sends its warnings again)", () =>
    Effect.gen(function*() {
      let befores = 0
      let fail = true
      const once = new ModelError({ reason: "server", errorType: "InternalServerError", message: "once" })
      const model: ModelService["Type"] = {
        generate: () =>
          Effect.suspend(() =>
            fail
              ? (fail = false, Effect.fail(once))
              : Effect.succeed({ message: M.ai("ok") })
          )
      }
      const stack = MW.stack(
        [MW.make({ modelHooks: { before: (request) => (befores++, request), after: (r) => r } })],
        MW.base(model, { definitions: [], call: () => Effect.die("no tools") })
      )
      const exit = yield* Effect.gen(function*() {
        const port = yield* ModelService
        const made = port.generate({ systemPrompt: undefined, messages: [], tools: [], settings: {} }) as Effect.Effect<
          ModelResponse,
          ModelError
        >
        assert.strictEqual(befores, 0)
        const first = yield* Effect.exit(made)
        assert.isTrue(Exit.isFailure(first))
        return yield* Effect.exit(made)
      }).pipe(Effect.provide(stack))
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(befores, 2)
    }))
})
