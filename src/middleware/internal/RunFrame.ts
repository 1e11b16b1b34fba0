/**
 * The machinery behind `Middleware.make`: run frames, and the resolution of a run's ports. Read
 * `./README.md` first (what it guarantees); `Middleware.ts` is the public face.
 *
 * - Run frames. A middleware layer is built once per agent, but a per-run middleware's wrappers belong to one
 *   run. They are kept in the run's frame (`RunFrame`, a run service: a map from each middleware to its
 *   wrappers, and the run's scope), set by the middleware's own `AgentHooks.around` and read off the calling
 *   fiber's context by its ports.
 * - Resolution. The ports a middleware provides carry, under a symbol, how to resolve them for one run: the run
 *   loop asks once (`resolve`) and gets plain functions that call each wrapper directly, skipping the layers
 *   that do not wrap that port.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { AgentHooks, type RunLoop } from "../../services/AgentHooks.js"
import type { ModelRequest } from "../../services/ModelService.js"
import { ModelService } from "../../services/ModelService.js"
import { RunContext, RunState } from "../../services/RunContext.js"
import type { RunServices } from "../../services/RunContext.js"
import { RunEvents } from "../../services/RunEvents.js"
import * as Tool from "../../services/Tool.js"
import { ToolService } from "../../services/ToolService.js"
import type { ToolCall } from "../../state/Message.js"
import * as ModelHooks from "./ModelHooks.js"

type Ports = ModelService | ToolService | AgentHooks

/** The inner model call (`Middleware.ModelNext`). */
type ModelNext = ModelService["Type"]["generate"]

/** The inner tool call (`Middleware.ToolNext`). */
type ToolNext = ToolService["Type"]["call"]

/** What the machinery calls of a middleware's wrappers: the shape of `Middleware.Wrappers`. */
export interface Wrap {
  readonly model?: ((request: ModelRequest, next: ModelNext) => ReturnType<ModelNext>) | undefined
  readonly modelHooks?: ModelHooks.Hooks | undefined
  readonly tool?: ((call: ToolCall, next: ToolNext) => ReturnType<ToolNext>) | undefined
  readonly run?: ((run: RunLoop) => RunLoop) | undefined
}

export const portsOf = (model: ModelService["Type"], tools: ToolService["Type"], hooks: AgentHooks["Type"]) =>
  Context.make(ModelService, model).pipe(Context.add(ToolService, tools), Context.add(AgentHooks, hooks))

// ---------------------------------------------------------------------------------------------------------
// Run frames

/**
 * What a run's per-run middlewares keep for the run: each one's wrappers (set for the run by its own
 * `AgentHooks.around`), and the run's scope, which their per-run effects share and which closes when the run
 * ends (`closeRunFrame`). `Run.execute` provides it with the run's services; when a run's hooks are called
 * without one, the outermost per-run middleware provides and closes it.
 */
export class RunFrame extends Context.Tag("antler/Middleware/RunFrame")<RunFrame, Frame>() {}

/** The frame of one run (see `RunFrame`). */
export interface Frame {
  readonly wrappers: Map<object, Wrap>
  /** The run's scope: its per-run effects' finalizers. */
  readonly scope: Scope.CloseableScope
}

/** A fresh frame for one run, over the run's scope. */
export const makeRunFrame = (scope: Scope.CloseableScope): Frame => ({ wrappers: new Map(), scope })

/**
 * Ends a run's frame: its scope closes (finalizers of the per-run effects run, the last added first: inner
 * middlewares before outer ones) and the wrappers are forgotten, so a fiber that outlives the run finds none.
 */
export const closeRunFrame = (frame: Frame, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.suspend(() => {
    frame.wrappers.clear()
    return Scope.close(frame.scope, exit)
  })

// (read straight off the context's map: `Context.getOption` allocates an Option, and a run looks once per
// per-run middleware and call)
const frameOf = (context: Context.Context<never>): Frame | undefined => context.unsafeMap.get(RunFrame.key)

// ---------------------------------------------------------------------------------------------------------
// Resolving a run's ports
//
// A port a middleware provides is shared by every run of the agent, so each call of a per-run middleware reads
// that run's wrappers off the fiber. A run's loop makes many calls through the same wrappers: the ports made
// here also say how to resolve them for one run (`forRun`, read once inside the run), giving plain functions
// that call each wrapper directly and skip the layers that do not wrap that port. A port made elsewhere (the
// base model and tools, a hand-written layer) resolves to itself.

const forRun: unique symbol = Symbol.for("antler/Middleware/forRun")

type RunFiber = Fiber.RuntimeFiber<unknown, unknown>

type Resolvable<A> = A & { readonly [forRun]?: (fiber: RunFiber) => A[keyof A] }

const modelPort = (generate: ModelNext, resolve: (fiber: RunFiber) => ModelNext): ModelService["Type"] =>
  ({ generate, [forRun]: resolve }) as Resolvable<{ generate: ModelNext }>

const toolPort = (
  definitions: ToolService["Type"]["definitions"],
  call: ToolNext,
  resolve: (fiber: RunFiber) => ToolNext
): ToolService["Type"] => ({ definitions, call, [forRun]: resolve }) as ToolService["Type"]

const resolveModel = (model: ModelService["Type"], fiber: RunFiber): ModelNext => {
  const resolve = (model as Resolvable<{ generate: ModelNext }>)[forRun]
  return resolve === undefined ? model.generate : resolve(fiber)
}

const resolveTool = (tools: ToolService["Type"], fiber: RunFiber): ToolNext => {
  const resolve = (tools as Resolvable<{ call: ToolNext }>)[forRun]
  return resolve === undefined ? tools.call : resolve(fiber)
}

/** A run's model and tool calls, resolved through its middlewares' wrappers. */
export interface Resolved {
  readonly generate: ModelNext
  readonly call: ToolNext
}

/**
 * The model and tool calls of the current run through these ports, resolved once: the same wrappers as calling
 * the ports themselves would use, read now. Use inside `AgentHooks.around` (where the run's wrappers exist), in
 * the run's fiber; the functions serve that run only.
 */
export const resolve = (model: ModelService["Type"], tools: ToolService["Type"]): Effect.Effect<Resolved> =>
  Effect.withFiberRuntime((fiber) =>
    Effect.succeed({
      generate: resolveModel(model, fiber as RunFiber),
      call: resolveTool(tools, fiber as RunFiber)
    })
  )

// ---------------------------------------------------------------------------------------------------------
// The two kinds of middleware layer

/**
 * A middleware's model work over an inner call: its wrapper, else its hooks (fused with hooked layers below,
 * see `ModelHooks`), else nothing.
 */
const modelWrapper = (w: Wrap): ((inner: ModelNext) => ModelNext) | undefined => {
  const { model: wrap, modelHooks: hooks } = w
  if (wrap !== undefined) return (inner) => (request) => wrap(request, inner)
  return hooks === undefined ? undefined : (inner) => ModelHooks.over(hooks, inner)
}

/** The inner tool port with these tools answered here (each by its name) and added to the definitions. */
const withTools = (inner: ToolService["Type"], tools: ReadonlyArray<Tool.Tool> | undefined): ToolService["Type"] => {
  if (tools === undefined || tools.length === 0) return inner
  const own = new Map(tools.map((tool) => [tool.name, tool]))
  const over = (below: ToolNext): ToolNext => (call) => {
    const tool = own.get(call.name)
    return tool === undefined ? below(call) : Tool.invoke(tool, call)
  }
  return toolPort(
    [...inner.definitions.filter((d) => !own.has(d.name)), ...tools.map(Tool.definition)],
    over(inner.call),
    (fiber) => over(resolveTool(inner, fiber))
  )
}

/** The ports of a middleware with fixed wrappers (and contributed tools), over the inner ports. */
export const staticLayer = (spec: Wrap & { readonly tools?: ReadonlyArray<Tool.Tool> | undefined }): Layer.Layer<
  Ports,
  never,
  Ports
> =>
  Layer.effectContext(Effect.map(Effect.context<Ports>(), (inner) => {
    const model = Context.get(inner, ModelService)
    const hooks = Context.get(inner, AgentHooks)
    const tools = withTools(Context.get(inner, ToolService), spec.tools)
    const { run: wrapRun, tool: wrapTool } = spec
    const wrapModel = modelWrapper(spec)
    const next = model.generate
    const below = tools.call
    return portsOf(
      wrapModel === undefined ? model : modelPort(wrapModel(next), (fiber) => wrapModel(resolveModel(model, fiber))),
      wrapTool === undefined ? tools : toolPort(tools.definitions, (call) => wrapTool(call, below), (fiber) => {
        const inner = resolveTool(tools, fiber)
        return (call) => wrapTool(call, inner)
      }),
      wrapRun === undefined ? hooks : { around: (run) => wrapRun(hooks.around(run)) }
    )
  }))

/**
 * What a per-run effect sees of where its layer was built: the app's services. The run's services and its
 * scope are the run's own, never taken from there (the layer's scope lives as long as the agent), and the
 * ports are not services of the run (wrappers get the inner port as `next`).
 */
const appServices = <R>(context: Context.Context<R>) =>
  Context.omit(
    RunContext,
    RunState,
    RunEvents,
    RunFrame,
    Scope.Scope,
    ModelService,
    ToolService,
    AgentHooks,
    // (the building of layers' own: not a service of the app)
    Layer.CurrentMemoMap
  )(context)

/** Wrappers used outside a run: the middleware's per-run state does not exist there. */
class OutsideRun extends Error {
  constructor(name: string) {
    super(`The middleware ${name} was called outside a run (its wrappers exist only inside AgentHooks.around)`)
  }
}

/**
 * The ports of a middleware whose wrappers are made per run by `perRun` (see `Middleware.make`), over the
 * inner ports and the app's services `R`.
 */
export const perRunLayer = <E, R>(
  perRun: Effect.Effect<Wrap, E, R>,
  options: { readonly tools?: ReadonlyArray<Tool.Tool> | undefined; readonly name?: string | undefined }
): Layer.Layer<Ports, never, Ports | Exclude<R, RunServices | Scope.Scope>> =>
  Layer.scopedContext(Effect.gen(function*() {
    const context = yield* Effect.context<Ports | Exclude<R, RunServices | Scope.Scope>>()
    const app = appServices(context)
    const inner = Context.pick(ModelService, ToolService, AgentHooks)(context)
    const model = Context.get(inner, ModelService)
    const hooks = Context.get(inner, AgentHooks)
    const tools = withTools(Context.get(inner, ToolService), options.tools)
    // this middleware's entry in a run's frame
    const key = {}
    const wrappersOf = (fiber: RunFiber): Wrap | undefined => frameOf(fiber.currentContext)?.wrappers.get(key)
    const outside = Effect.die(new OutsideRun(options.name ?? "(unnamed)"))
    const next = model.generate
    const below = tools.call
    const around = (run: RunLoop): RunLoop =>
      Effect.withFiberRuntime((fiber) => {
        const context = fiber.currentContext
        const frame = frameOf(context)
        if (frame === undefined) {
          return Effect.flatMap(Scope.make(), (scope) => {
            const own = makeRunFrame(scope)
            return Effect.onExit(Effect.provideService(around(run), RunFrame, own), (exit) => closeRunFrame(own, exit))
          })
        }
        // The entry stands for the rest of the run (the frame forgets it when the run ends). Entered again
        // within one run (the same agent's hooks nested), the outer entry is back when the inner one ends.
        const previous = frame.wrappers.get(key)
        const entered = Effect.flatMap(start(context, frame), (w) => {
          frame.wrappers.set(key, w)
          const loop = hooks.around(run)
          return w.run === undefined ? loop : w.run(loop)
        })
        return previous === undefined
          ? entered
          : Effect.ensuring(entered, Effect.sync(() => frame.wrappers.set(key, previous)))
      })
    // The per-run effect sees the app's services and the run's scope. When the run's context already holds
    // both (the same services: an app runs its agent under its own services, and `Run.execute` gives the run
    // its scope), it runs in that context as is. Otherwise the fiber's context is the run's with those added
    // while it runs, and the run's again when it ends, however it ends (what `Effect.provide` does, in one
    // uninterruptible region instead of its acquire/use/release). The first way copies no context and sets no
    // fiber ref: 19 per-run middlewares each did both, on every run.
    const appEntries = [...app.unsafeMap]
    const holdsApp = (context: Context.Context<never>, frame: Frame): boolean => {
      const services = context.unsafeMap
      if (services.get(Scope.Scope.key) !== frame.scope) return false
      for (const [key, service] of appEntries) if (services.get(key) !== service) return false
      return true
    }
    const provided = (context: Context.Context<never>, frame: Frame): Effect.Effect<Wrap> =>
      Effect.uninterruptibleMask((restore) => {
        const back = FiberRef.set(FiberRef.currentContext, context)
        return Effect.zipRight(
          FiberRef.set(FiberRef.currentContext, Context.add(Context.merge(context, app), Scope.Scope, frame.scope)),
          Effect.matchCauseEffect(restore(perRun as Effect.Effect<Wrap, E>), {
            onFailure: (cause) => Effect.zipRight(back, Effect.orDie(Effect.failCause(cause))),
            onSuccess: (w) => Effect.as(back, w)
          })
        )
      })
    const start = (context: Context.Context<never>, frame: Frame): Effect.Effect<Wrap> =>
      holdsApp(context, frame) ? Effect.orDie(perRun as Effect.Effect<Wrap, E>) : provided(context, frame)
    // Every call of every run goes through here: the run's wrappers are read straight off the fiber (one
    // instruction, not a FiberRef.get and a flatMap).
    const generate: ModelNext = (request) =>
      Effect.withFiberRuntime((fiber) => {
        const w = wrappersOf(fiber as RunFiber)
        if (w === undefined) return outside
        if (w.model !== undefined) return w.model(request, next)
        return w.modelHooks === undefined ? next(request) : ModelHooks.over(w.modelHooks, next)(request)
      })
    const call: ToolNext = (call) =>
      Effect.withFiberRuntime((fiber) => {
        const w = wrappersOf(fiber as RunFiber)
        return w === undefined ? outside : w.tool === undefined ? below(call) : w.tool(call, below)
      })
    return portsOf(
      modelPort(generate, (fiber) => {
        const w = wrappersOf(fiber)
        if (w === undefined) return generate
        const inner = resolveModel(model, fiber)
        const wrap = modelWrapper(w)
        return wrap === undefined ? inner : wrap(inner)
      }),
      toolPort(tools.definitions, call, (fiber) => {
        const w = wrappersOf(fiber)
        if (w === undefined) return call
        const inner = resolveTool(tools, fiber)
        const wrap = w.tool
        return wrap === undefined ? inner : (call) => wrap(call, inner)
      }),
      { around }
    )
  }))
