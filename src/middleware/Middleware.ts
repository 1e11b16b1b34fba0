/**
 * Middleware as layers. A middleware is a `Layer` that reads the inner ModelService, ToolService and AgentHooks
 * and provides wrapped ones; ports it does not wrap pass through unchanged. The lead agent is a fold of a list
 * over base implementations with `Layer.provide`: the first entry is the outermost wrapper, so `before` work
 * runs in list order and `after` work in reverse.
 *
 * A stack is built once per agent, not per run. A middleware that needs per-run state (counters, the run's
 * context, a sandbox to release) gives `make` an effect instead of plain wrappers: the effect runs at the start
 * of every run, inside the run (so it may read `RunContext`, `RunState` and `RunEvents`), and the wrappers it
 * returns serve that run's calls. They are kept in the run's frame (`RunFrame`, a run service), set there by the
 * middleware's own `AgentHooks.around`: no registry, no per-run layer build.
 *
 * How run frames work and how a run's ports are resolved once: see `internal/RunFrame.ts` and
 * `internal/README.md` (what the machinery guarantees).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { AgentHooks, RunLoop } from "../services/AgentHooks.js"
import type { ModelError, ModelRequest, ModelResponse } from "../services/ModelService.js"
import { ModelService } from "../services/ModelService.js"
import type { RunServices } from "../services/RunContext.js"
import type * as Tool from "../services/Tool.js"
import type { Interrupt, ToolError, ToolResult, ToolService } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"
import * as Hooks from "./internal/ModelHooks.js"
import * as Internal from "./internal/RunFrame.js"

/** The three ports every middleware receives and provides. */
export type Ports = ModelService | ToolService | AgentHooks

/** A middleware: a layer from the inner ports (and `R`) to the wrapped ports. */
export type Middleware<R = never, E = never> = Layer.Layer<Ports, E, Ports | R>

/** The inner model call. */
export type ModelNext = (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, RunServices>

/** The inner tool call. */
export type ToolNext = (call: ToolCall) => Effect.Effect<ToolResult, ToolError | Interrupt, RunServices>

/** A value, or an effect making it: a hook's common path returns the value itself. */
export type Now<A> = Hooks.Now<A>

/** A hook's answer as an effect. */
export const lift: <A>(value: Now<A>) => Effect.Effect<A, ModelError, RunServices> = Hooks.lift

/**
 * A model call's work as two functions instead of a wrapper (DeerFlow's `before_model` / `after_model`):
 * `before` gives the request to pass on (the same object when nothing changes), `after` the response to pass out
 * (`request` is what this middleware received, `sent` what it passed on; `next` is the inner call, for a call of
 * its own: a summary, a title, an answer asked again). Either may return an effect where it
 * needs one. They run where the wrapper `(request, next) => flatMap(next(before(request)), after)` would, and cost
 * less: adjacent hooked middlewares are fused into one call of the inner port (`internal/ModelHooks.ts`).
 */
export interface ModelHooks {
  readonly before?: ((request: ModelRequest, next: ModelNext) => Now<ModelRequest>) | undefined
  readonly after?:
    | ((response: ModelResponse, request: ModelRequest, sent: ModelRequest, next: ModelNext) => Now<ModelResponse>)
    | undefined
}

/** What a middleware wraps. Every field is optional; absent ones pass the inner port through. */
export interface Wrappers {
  /** Wraps each model call (DeerFlow's `wrap_model_call`; work after `next` is `after_model`). */
  readonly model?: (request: ModelRequest, next: ModelNext) => Effect.Effect<ModelResponse, ModelError, RunServices>
  /** Each model call's work as hooks instead (used when `model` is absent; see `ModelHooks`). */
  readonly modelHooks?: ModelHooks | undefined
  /** Wraps each tool call (DeerFlow's `wrap_tool_call`). */
  readonly tool?: (call: ToolCall, next: ToolNext) => Effect.Effect<ToolResult, ToolError | Interrupt, RunServices>
  /** Wraps the whole run (DeerFlow's `before_agent` / `after_agent`). */
  readonly run?: (run: RunLoop) => RunLoop
}

/** A middleware without per-run state: its wrappers, and the tools it contributes. */
export interface Spec extends Wrappers {
  /**
   * Tools this middleware contributes (`ask_clarification`, `write_todos`...). They sit inside its `tool` wrap
   * and are fixed for the agent; a tool reads what differs per run from the run's services when called.
   */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
}

/** Options of a middleware with per-run state. */
export interface PerRunOptions {
  /** Tools this middleware contributes (fixed for the agent, like `Spec.tools`). */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
  /** Names the middleware in the error raised when its wrappers are used outside a run. */
  readonly name?: string | undefined
}

/**
 * Makes a middleware layer.
 *
 * - `make(spec)`: fixed wrappers (and contributed tools), with no per-run state.
 * - `make(effect, options)`: `effect` runs at the start of every run, inside the run, and returns that run's
 *   wrappers; state it creates lives for the run. It may use a `Scope`: the run's, shared by its per-run
 *   effects and closed when the run ends (finalizers of inner middlewares first). It may use any service of the
 *   app, which the layer requires when it is built. It fails the run if it fails.
 */
export const make = <E = never, R = never>(
  source: Spec | Effect.Effect<Wrappers, E, R>,
  options: PerRunOptions = {}
): Middleware<Exclude<R, RunServices | Scope.Scope>> =>
  Effect.isEffect(source) ? Internal.perRunLayer(source, options) : Internal.staticLayer(source)

/** Hooks that run the loop as is. */
export const noHooks: AgentHooks["Type"] = { around: (run) => run }

/** The base of a stack: the real model and tools, with no run hooks. */
export const base = (
  model: ModelService["Type"],
  tools: ToolService["Type"],
  hooks: AgentHooks["Type"] = noHooks
): Layer.Layer<Ports> => Layer.succeedContext(Internal.portsOf(model, tools, hooks))

/** A base over the app's `ModelService` and these tools. */
export const baseOverModel = (tools: ToolService["Type"]): Layer.Layer<Ports, never, ModelService> =>
  Layer.effectContext(Effect.map(ModelService, (model) => Internal.portsOf(model, tools, noHooks)))

/**
 * Folds a list of middlewares over a base with `Layer.provide`: `stack([a, b, c], base)` is `a(b(c(base)))`, so
 * `a` is the outermost wrapper. Each entry must be a fresh layer value (layers are memoised by reference).
 */
export const stack = <R, E, RB, EB>(
  middlewares: ReadonlyArray<Middleware<R, E>>,
  baseLayer: Layer.Layer<Ports, EB, RB>
): Layer.Layer<Ports, E | EB, Exclude<R, Ports> | RB> =>
  middlewares.reduceRight<Layer.Layer<Ports, E | EB, Exclude<R, Ports> | RB>>(
    (inner, middleware) => Layer.provide(middleware, inner) as Layer.Layer<Ports, E | EB, Exclude<R, Ports> | RB>,
    baseLayer
  )
