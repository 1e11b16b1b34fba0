/**
 * Middleware as layers. A middleware reads the inner ModelService, ToolService and AgentHooks and provides
 * wrapped ones; ports it does not wrap pass through unchanged. The lead agent is a fold of a list over base
 * implementations: the first entry is the outermost wrapper, so `before` work runs in list order and
 * `after` work in reverse.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { AgentHooks, type RunLoop } from "../services/AgentHooks.js"
import type { ModelError, ModelRequest, ModelResponse } from "../services/ModelService.js"
import { ModelService } from "../services/ModelService.js"
import * as Tool from "../services/Tool.js"
import type { Interrupt, ToolError, ToolResult } from "../services/ToolService.js"
import { ToolService } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"

/** The three ports every middleware receives and provides. */
export type Ports = ModelService | ToolService | AgentHooks

/** A middleware: a layer from the inner ports (and `R`) to the wrapped ports. */
export type Middleware<R = never, E = never> = Layer.Layer<Ports, E, Ports | R>

/** The inner model call. */
export type ModelNext = (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError>

/** The inner tool call. */
export type ToolNext = (call: ToolCall) => Effect.Effect<ToolResult, ToolError | Interrupt>

/** What a middleware wraps. Every field is optional; absent ones pass the inner port through. */
export interface Wrappers {
  /** Wraps each model call (DeerFlow's `wrap_model_call`; work after `next` is `after_model`). */
  readonly model?: (request: ModelRequest, next: ModelNext) => Effect.Effect<ModelResponse, ModelError>
  /** Wraps each tool call (DeerFlow's `wrap_tool_call`). */
  readonly tool?: (call: ToolCall, next: ToolNext) => Effect.Effect<ToolResult, ToolError | Interrupt>
  /** Wraps the whole run (DeerFlow's `before_agent` / `after_agent`). */
  readonly run?: (run: RunLoop) => RunLoop
  /** Tools this middleware contributes (`ask_clarification`, `write_todos`...); they sit inside its `tool` wrap. */
  readonly tools?: ReadonlyArray<Tool.Tool>
}

/**
 * Makes a middleware layer from wrappers, built once per run (so per-run state lives in the closure).
 * The effect may use a scope for per-run resources.
 */
export const make = <E = never, R = never>(
  wrappers: Wrappers | Effect.Effect<Wrappers, E, R>
): Middleware<Exclude<R, Scope.Scope>, E> => {
  const build: Builder = (inner) =>
    Effect.isEffect(wrappers)
      ? Effect.map(wrappers as Effect.Effect<Wrappers, any, any>, (w) => wrapPorts(inner, w))
      : Effect.succeed(wrapPorts(inner, wrappers))
  const layer = Layer.scopedContext(
    Effect.flatMap(Effect.context<Ports>(), (context) => build(Context.pick(ModelService, ToolService, AgentHooks)(context)))
  ) as Middleware<Exclude<R, Scope.Scope>, E>
  builders.set(layer, build)
  return layer
}

/**
 * How a middleware made by `make` wraps given inner ports. `stack` uses it to fold a whole chain in one effect
 * instead of one `Layer.provide` per entry: a layer build forks fibers and keeps a memo map, which made a
 * 20-entry chain cost milliseconds per run; the fold costs microseconds. The result is the same layer.
 */
type Builder = (inner: Context.Context<Ports>) => Effect.Effect<Context.Context<Ports>, any, any>
const builders = new WeakMap<object, Builder>()

const wrapPorts = (inner: Context.Context<Ports>, w: Wrappers): Context.Context<Ports> => {
  if (w.model === undefined && w.tool === undefined && w.run === undefined && w.tools === undefined) return inner
  return Context.make(ModelService, wrapModel(Context.get(inner, ModelService), w)).pipe(
    Context.add(ToolService, wrapTools(Context.get(inner, ToolService), w)),
    Context.add(AgentHooks, wrapHooks(Context.get(inner, AgentHooks), w))
  )
}

const wrapModel = (inner: ModelService["Type"], w: Wrappers): ModelService["Type"] => {
  const wrap = w.model
  if (wrap === undefined) return inner
  const next = inner.generate
  return { generate: (request) => wrap(request, next) }
}

const wrapTools = (inner: ToolService["Type"], w: Wrappers): ToolService["Type"] => {
  let service = inner
  if (w.tools !== undefined && w.tools.length > 0) {
    const own = new Map(w.tools.map((tool) => [tool.name, tool]))
    const below = inner.call
    service = {
      definitions: [...inner.definitions.filter((d) => !own.has(d.name)), ...w.tools.map(Tool.definition)],
      call: (call) => {
        const tool = own.get(call.name)
        return tool === undefined ? below(call) : Tool.invoke(tool, call)
      }
    }
  }
  const wrap = w.tool
  if (wrap === undefined) return service
  const next = service.call
  return { definitions: service.definitions, call: (call) => wrap(call, next) }
}

const wrapHooks = (inner: AgentHooks["Type"], w: Wrappers): AgentHooks["Type"] => {
  const wrap = w.run
  if (wrap === undefined) return inner
  return { around: (run) => wrap(inner.around(run)) }
}

/** Hooks that run the loop as is. */
export const noHooks: AgentHooks["Type"] = { around: (run) => run }

/** Layers whose ports can be built by a plain effect (no layer machinery): bases and stacks made here. */
const direct = new WeakMap<object, Effect.Effect<Context.Context<Ports>, any, any>>()

const portsOf = (model: ModelService["Type"], tools: ToolService["Type"], hooks: AgentHooks["Type"]) =>
  Context.make(ModelService, model).pipe(Context.add(ToolService, tools), Context.add(AgentHooks, hooks))

/** The base of a stack: the real model and tools, with no run hooks. */
export const base = (
  model: ModelService["Type"],
  tools: ToolService["Type"],
  hooks: AgentHooks["Type"] = noHooks
): Layer.Layer<Ports> => {
  const ports = portsOf(model, tools, hooks)
  const layer = Layer.succeedContext(ports)
  direct.set(layer, Effect.succeed(ports))
  return layer
}

/** A base whose ports are made per run by an effect (e.g. tools that read the run's context). */
export const baseFrom = <E, R>(
  make: Effect.Effect<{
    readonly model: ModelService["Type"]
    readonly tools: ToolService["Type"]
    readonly hooks?: AgentHooks["Type"] | undefined
  }, E, R>
): Layer.Layer<Ports, E, Exclude<R, Scope.Scope>> => {
  const build = Effect.map(make, (p) => portsOf(p.model, p.tools, p.hooks ?? noHooks))
  const layer = Layer.scopedContext(build) as Layer.Layer<Ports, E, Exclude<R, Scope.Scope>>
  direct.set(layer, build)
  return layer
}

/**
 * Builds a layer of ports in the current scope: directly for bases and stacks made by this module (a few
 * microseconds), through `Layer.build` for any other layer.
 */
export const buildPorts = <E, R>(layer: Layer.Layer<Ports, E, R>): Effect.Effect<Context.Context<Ports>, E, R | Scope.Scope> =>
  (direct.get(layer) as Effect.Effect<Context.Context<Ports>, E, R | Scope.Scope> | undefined) ?? Layer.build(layer)

/**
 * Folds a list of middlewares over a base: `stack([a, b, c], base)` is `a(b(c(base)))`, so `a` is the
 * outermost wrapper. Each entry must be a fresh layer value (layers are memoised by reference).
 */
export const stack = <R, E, RB, EB>(
  middlewares: ReadonlyArray<Middleware<R, E>>,
  baseLayer: Layer.Layer<Ports, EB, RB>
): Layer.Layer<Ports, E | EB, R | RB> => {
  const fast = middlewares.map((middleware) => builders.get(middleware))
  if (fast.some((build) => build === undefined)) {
    // a middleware written as a plain layer: fold with Layer.provide
    return middlewares.reduceRight<Layer.Layer<Ports, E | EB, R | RB>>(
      (inner, middleware) => Layer.provide(middleware, inner) as Layer.Layer<Ports, E | EB, R | RB>,
      baseLayer
    )
  }
  const fold = (inner: Context.Context<Ports>) => {
    let effect: Effect.Effect<Context.Context<Ports>, any, any> = Effect.succeed(inner)
    for (let i = fast.length - 1; i >= 0; i--) effect = Effect.flatMap(effect, fast[i]!)
    return effect
  }
  const whole = Effect.flatMap(buildPorts(baseLayer), fold)
  const layer = Layer.scopedContext(whole) as Layer.Layer<Ports, E | EB, R | RB>
  direct.set(layer, whole)
  return layer
}
