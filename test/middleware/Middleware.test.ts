import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FC from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as Run from "../../src/programs/Run.js"
import { AgentHooks, type RunLoop } from "../../src/services/AgentHooks.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ToolService } from "../../src/services/ToolService.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const echo = Tool.make({
  name: "echo",
  description: "Echoes its text.",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

/** A middleware that records each of its hooks into `trace`. */
const tracer = (name: string, trace: Array<string>) =>
  MW.make({
    run: (loop) =>
      Effect.sync(() => trace.push(`${name}:before_agent`)).pipe(
        Effect.zipRight(loop),
        Effect.ensuring(Effect.sync(() => trace.push(`${name}:after_agent`)))
      ),
    model: (request, next) =>
      Effect.sync(() => trace.push(`${name}:before_model`)).pipe(
        Effect.zipRight(next(request)),
        Effect.tap(() => Effect.sync(() => trace.push(`${name}:after_model`)))
      ),
    tool: (call, next) =>
      Effect.sync(() => trace.push(`${name}:before_tool`)).pipe(
        Effect.zipRight(next(call)),
        Effect.tap(() => Effect.sync(() => trace.push(`${name}:after_tool`)))
      )
  })

const script = [{ toolCalls: [{ name: "echo", args: { text: "hi" } }] }, "done"]

describe("Middleware.stack", () => {
  it.effect("the first entry is the outermost wrapper; after work runs in reverse order", () =>
    Effect.gen(function*() {
      const trace: Array<string> = []
      const outcome = yield* H.run({
        script,
        tools: [echo],
        middlewares: () => [tracer("a", trace), tracer("b", trace), tracer("c", trace)]
      })
      assert.strictEqual(outcome.end.status, "success")
      const phase = (p: string) => trace.filter((t) => t.endsWith(`:${p}`)).map((t) => t.split(":")[0]).join("")
      assert.strictEqual(phase("before_agent"), "abc")
      assert.strictEqual(phase("after_agent"), "cba")
      // two model calls: each runs a→b→c on the way in and c→b→a on the way out
      assert.strictEqual(phase("before_model"), "abcabc")
      assert.strictEqual(phase("after_model"), "cbacba")
      assert.strictEqual(phase("before_tool"), "abc")
      assert.strictEqual(phase("after_tool"), "cba")
      // and the phases interleave as in DeerFlow's graph
      assert.deepStrictEqual(trace.slice(0, 7), [
        "a:before_agent",
        "b:before_agent",
        "c:before_agent",
        "a:before_model",
        "b:before_model",
        "c:before_model",
        "c:after_model"
      ])
      assert.deepStrictEqual(trace.slice(-3), ["c:after_agent", "b:after_agent", "a:after_agent"])
    }).pipe(H.withStore))

  it.effect("a middleware written as a plain layer stacks in the same order as ones made by make", () =>
    Effect.gen(function*() {
      const trace: Array<string> = []
      // no Middleware.make: reads the inner ports and provides wrapped ones by hand
      const plain = Layer.effectContext(Effect.gen(function*() {
        const model = yield* ModelService
        const tools = yield* ToolService
        const hooks = yield* AgentHooks
        return Context.make(ModelService, {
          generate: (request) =>
            Effect.sync(() => trace.push("p:before_model")).pipe(Effect.zipRight(model.generate(request)))
        }).pipe(Context.add(ToolService, tools), Context.add(AgentHooks, hooks))
      }))
      const outcome = yield* H.run({
        script,
        tools: [echo],
        middlewares: () => [tracer("a", trace), plain as MW.Middleware, tracer("c", trace)]
      })
      assert.strictEqual(outcome.end.status, "success")
      const models = trace.filter((t) => t.endsWith(":before_model")).map((t) => t.split(":")[0]).join("")
      assert.strictEqual(models, "apcapc")
    }).pipe(H.withStore))

  it.effect("a middleware that wraps only the model passes tools and hooks through unchanged", () =>
    Effect.gen(function*() {
      const seen: Array<number> = []
      const outcome = yield* H.run({
        script,
        tools: [echo],
        middlewares: () => [
          MW.make({ model: (request, next) => Effect.suspend(() => (seen.push(request.messages.length), next(request))) })
        ]
      })
      assert.deepStrictEqual(seen, [1, 3])
      const result = outcome.state.messages.find((m) => m.type === "tool")
      assert.strictEqual(result && M.text(result), "echo: hi")
    }).pipe(H.withStore))

  it.effect("a middleware can contribute a tool: the model sees it and calls reach it", () =>
    Effect.gen(function*() {
      const shout = Tool.make({
        name: "shout",
        description: "Shouts.",
        parameters: Schema.Struct({ text: Schema.String }),
        handler: ({ text }) => Effect.succeed(text.toUpperCase())
      })
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "shout", args: { text: "hey" } }] }, "ok"],
        tools: [echo],
        middlewares: () => [MW.make({ tools: [shout] })]
      })
      assert.deepStrictEqual(outcome.requests[0]!.tools.map((t) => t.name), ["echo", "shout"])
      assert.strictEqual(M.text(outcome.state.messages.find((m) => m.type === "tool")!), "HEY")
    }).pipe(H.withStore))

  it.effect("an agent built once: each run has its own per-run state, and its scope closes when that run ends", () =>
    Effect.gen(function*() {
      const trace: Array<string> = []
      let runs = 0
      const counting = MW.make(Effect.gen(function*() {
        const run = ++runs
        let calls = 0
        yield* Effect.addFinalizer(() => Effect.sync(() => trace.push(`run ${run}: closed after ${calls} calls`)))
        return {
          model: (request, next) => Effect.suspend(() => (calls++, next(request))),
          tool: (call, next) => Effect.suspend(() => (trace.push(`run ${run}: ${call.name}`), next(call)))
        }
      }))
      const ports = yield* Layer.build(MW.stack(
        [counting],
        MW.base(ScriptedModel.make([...script, ...script]), Toolkit.make([echo]))
      ))
      const first = yield* Run.execute({ threadId: "once", input: [M.human("one")] }, ports)
      const second = yield* Run.execute({ threadId: "once", input: [M.human("two")] }, ports)
      assert.strictEqual(first.status, "success")
      assert.strictEqual(second.status, "success")
      assert.deepStrictEqual(trace, [
        "run 1: echo",
        "run 1: closed after 2 calls",
        "run 2: echo",
        "run 2: closed after 2 calls"
      ])
    }).pipe(Effect.scoped, H.withStore))

  // Two ways a run is started: under the app's own services (as an app runs its agent), or under a context without
  // them (the per-run effects get them from the build). Both must look the same from inside.
  for (const caller of ["without the app's services", "under the app's services"] as const) {
    const title = "per-run effects share the run's scope: inner finalizers first, after every hook; " +
      `app services come from the build (run ${caller})`
    it.effect(title, () =>
      Effect.gen(function*() {
        const trace: Array<string> = []
        // a service the agent was built with, which the run's own context may not have
        class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}
        const perRun = (name: string) =>
          MW.make(Effect.gen(function*() {
            const greeting = yield* Greeting
            yield* Effect.addFinalizer(() => Effect.sync(() => trace.push(`${name}: finalized`)))
            return {
              run: (loop) => Effect.ensuring(loop, Effect.sync(() => trace.push(`${name}: ${greeting}, after_agent`)))
            }
          }))
        const ports = yield* Layer.build(MW.stack(
          [perRun("outer"), perRun("inner")],
          MW.base(ScriptedModel.make(["done"]), Toolkit.make([echo]))
        )).pipe(Effect.provideService(Greeting, "hello"))
        const execute = Run.execute({ threadId: "scoped", input: [M.human("hi")] }, ports)
        const end = yield* (caller === "under the app's services"
          ? Effect.provideService(execute, Greeting, "hello")
          : execute)
        assert.strictEqual(end.status, "success")
        assert.deepStrictEqual(trace, [
          "inner: hello, after_agent",
          "outer: hello, after_agent",
          "inner: finalized",
          "outer: finalized"
        ])
      }).pipe(Effect.scoped, H.withStore))
  }

  it.effect("a per-run effect sees the build's services; the run sees its own again, however the set-up ends", () =>
    Effect.gen(function*() {
      class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}
      const seen: Array<string> = []
      const record = (where: string) => Effect.flatMap(Greeting, (g) => Effect.sync(() => seen.push(`${where}: ${g}`)))
      // (the run's code reads the caller's Greeting: not a service a run declares)
      const inRun = (where: string) => record(where) as unknown as Effect.Effect<void>
      // (hooks called without `Run.execute`: the outermost per-run middleware makes the run's frame)
      const around = (hooks: AgentHooks["Type"], run: RunLoop) =>
        hooks.around(run) as unknown as Effect.Effect<unknown, unknown, Greeting>
      const started = yield* Deferred.make<void>()
      const setUp = (how: "ok" | "fail" | "hang") =>
        MW.make(Effect.gen(function*() {
          yield* record(`set-up ${how}`)
          if (how === "fail") return yield* Effect.fail("no set-up")
          if (how === "hang") yield* Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
          return { run: (loop) => Effect.zipRight(inRun("run wrapper"), loop) }
        }))
      // an outer per-run middleware, whose run wrapper ends after the inner one's set-up
      const outer = MW.make(Effect.succeed({
        run: (loop: RunLoop) => Effect.ensuring(loop, inRun("outer run wrapper, at the end"))
      }))
      const hooksOf = (how: "ok" | "fail" | "hang") =>
        Effect.map(
          Layer.build(MW.stack([outer, setUp(how)], MW.base(ScriptedModel.make(["done"]), Toolkit.make([echo])))).pipe(
            Effect.provideService(Greeting, "app")
          ),
          (ports) => Context.get(ports, AgentHooks)
        )
      const loop = Effect.as(inRun("loop"), { status: "success" } as never) as RunLoop
      const ok = yield* hooksOf("ok")
      yield* around(ok, loop).pipe(Effect.zipRight(record("after")), Effect.provideService(Greeting, "caller"))
      const fail = yield* hooksOf("fail")
      const failed = yield* around(fail, loop).pipe(
        Effect.exit,
        Effect.tap(() => record("after a failed set-up")),
        Effect.provideService(Greeting, "caller")
      )
      assert.isTrue(Exit.isFailure(failed) && Cause.isDie(failed.cause))
      const hang = yield* hooksOf("hang")
      const fiber = yield* around(hang, loop).pipe(
        Effect.ensuring(record("after an interrupted set-up")),
        Effect.provideService(Greeting, "caller"),
        Effect.fork
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(seen, [
        "set-up ok: app",
        "run wrapper: caller",
        "loop: caller",
        "outer run wrapper, at the end: caller",
        "after: caller",
        "set-up fail: app",
        "outer run wrapper, at the end: caller",
        "after a failed set-up: caller",
        "set-up hang: app",
        "outer run wrapper, at the end: caller",
        "after an interrupted set-up: caller"
      ])
    }).pipe(Effect.scoped))

  it.effect.prop(
    "an identity middleware changes nothing the model or the user sees",
    [FC.array(FC.constantFrom("echo", "text"), { minLength: 1, maxLength: 5 }), FC.nat(3)],
    ([turns, layers]) =>
      Effect.gen(function*() {
        const scripted = [
          ...turns.map((t, i) => (t === "echo" ? { toolCalls: [{ name: "echo", args: { text: `t${i}` } }] } : `text ${i}`)),
          "final"
        ]
        // a text turn ends the run, so only the prefix up to the first text turn is played
        const plain = yield* H.run({ script: scripted, tools: [echo], threadId: "plain" })
        const wrapped = yield* H.run({
          script: scripted,
          tools: [echo],
          threadId: "wrapped",
          middlewares: () => Array.from({ length: layers }, () => MW.make({}))
        })
        const shape = (o: H.Outcome) => ({
          end: o.end,
          requests: o.requests.map((r) => r.messages.map((m) => [m.type, M.text(m)])),
          state: o.state.messages.map((m) => [m.type, M.text(m), M.toolCalls(m).map((c) => c.name)])
        })
        assert.deepStrictEqual(shape(wrapped), shape(plain))
      }).pipe(H.withStore),
    { fastCheck: { numRuns: 40 } }
  )
})
