/**
 * Subagents (SPEC §8): the registry of subagent types and the app's `SubagentRunner`.
 *
 * - Types: the built-in `general-purpose` and `bash` (offered only when bash can run), and custom ones from
 *   `subagents.custom_agents`, with per-agent overrides from `subagents.agents` (timeout, turns, model, skills,
 *   token budget); built-ins also take the global `subagents.timeout_seconds` and `subagents.max_turns`.
 * - A task runs the subagent chain (`Chains.subagentChain`) over the app's model, and the parent's thread:
 *   the same sandbox and directories, its own messages (kept in memory, not in the thread), its own system
 *   prompt (its type's, then the lead's skills section for the enabled skills its type's `skills` and the parent's
 *   allowlist leave it, as they are at the task: `SubagentPrompt`), the run's request secrets (the skills whose
 *   secrets the parent had bound for the call bind them for it too: `SkillSecrets.DelegatedSkills`), its tools (the
 *   parent's, limited by the type's allowlist and denylist and the parent's tool groups),
 *   its model (`inherit` = the parent run's), thinking off, `max_turns` as its recursion limit, its own
 *   timeout. Each type's chain is built once, on first use.
 * - At most `poolSize` (3) subagents run at once in the app; others wait for a slot. A task that has not
 *   finished `timeout + 60` seconds after it was submitted (it waited too long for a slot) ends
 *   `polling_timed_out`.
 * - Progress goes to the parent run's events: `task_started`, `task_running` (each new step message), then
 *   `task_completed` / `task_failed` / `task_cancelled` / `task_timed_out`, each with `task_id` (the call id)
 *   and a `timestamp`. Interrupting the parent's tool call (the parent run is cancelled) cancels the subagent.
 *
 * The types are `SubagentRegistry`'s, the agents `SubagentAgents`', a task's life `SubagentTask`'s and its outcome
 * `SubagentOutcome`'s; this module puts them together as the runner.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as UserModule from "../internal/UserModule.js"
import * as ConfiguredAuthorization from "../layers/ConfiguredAuthorization.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import type * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import type { ModelConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type { ModelService } from "../services/ModelService.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import type { SubagentType } from "../services/SubagentRunner.js"
import { SubagentRunner } from "../services/SubagentRunner.js"
import type * as Tool from "../services/Tool.js"
import * as SubagentAgents from "./SubagentAgents.js"
import { registry } from "./SubagentRegistry.js"
import * as SubagentTask from "./SubagentTask.js"

// The registry (`SubagentRegistry`), outcomes (`SubagentOutcome`) and a task's texts (`SubagentTask`), as the
// public `Subagents` namespace has them.
export * from "./SubagentRegistry.js"
export { outcomeOf, usageOf } from "./SubagentOutcome.js"
export { pollingTimedOut } from "./SubagentTask.js"

/** Options of the runner. */
export interface Options {
  /** How many subagents may run at once in the app (default 3, DeerFlow's pool). */
  readonly poolSize?: number | undefined
  /**
   * The pool itself, shared with the app's other runners (one per configuration `antler serve` took, each built
   * over its own); wins over `poolSize`.
   */
  readonly pool?: Effect.Semaphore | undefined
  /** The app's own tools, offered to subagents too (limited like the sandbox tools). */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
  /** Whether the `bash` subagent is offered; default: when bash can run in the sandbox. */
  readonly bash?: boolean | undefined
  /** The models runs may name (for `supports_vision`); default: the configuration's. */
  readonly models?: ReadonlyArray<ModelConfig> | undefined
  /** A circuit breaker shared with the app's other agents; by default each subagent type has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
}

/** The runner over the app's services; the subagent chains it builds live as long as its scope. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const pool = options.pool ?? (yield* Effect.makeSemaphore(Math.max(1, options.poolSize ?? 3)))
    const bash = options.bash ?? (yield* LocalSandbox.bashMode(app)).mode !== "disabled"
    const configs = registry(app.config, { bash })
    // (the run's role's provider, for a type's own model; one that cannot be loaded builds no agent: SubagentAgents)
    const authorization = yield* Effect.orElseSucceed(
      ConfiguredAuthorization.fromConfig(app.config.authorization, UserModule.baseDirOf(app.source)),
      () => undefined
    )
    const agents = yield* SubagentAgents.make({ bash, tools: options.tools, breaker: options.breaker })
    const tasks: SubagentTask.Tasks = {
      config: app.config,
      configs,
      bash,
      pool,
      models: options.models ?? app.config.models,
      authorization,
      agents
    }
    const types: ReadonlyArray<SubagentType> = [...configs.values()].map((c) => ({
      name: c.name,
      description: c.description
    }))
    return SubagentRunner.of({ types, run: (request) => SubagentTask.run(tasks, request) })
  })

/** The app's subagent runner (one pool per app), over the app's model, sandbox and configuration. */
export const layer = (
  options: Options = {}
): Layer.Layer<SubagentRunner, never, ModelService | SandboxProvider | AppConfigService> =>
  Layer.scoped(SubagentRunner, make(options))

