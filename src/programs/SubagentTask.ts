/**
 * A subagent task's life (SPEC §8.2): the agent of its type run over the parent's sandbox and directories, with its
 * own messages (kept in memory, not in the thread), in one of the app's pool's slots, within its timeout; its
 * progress told to the parent run's events (`task_started`, `task_running` for each new step message, then
 * `task_completed` / `task_failed` / `task_cancelled` / `task_timed_out`, each with `task_id`, the call id, and a
 * `timestamp`), and its outcome returned. Interrupting the parent's tool call cancels the subagent.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as MemoryThreadStore from "../layers/MemoryThreadStore.js"
import type { AppConfig, ModelConfig } from "../services/AppConfig.js"
import * as Authz from "../services/Authorization.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent } from "../services/RunEvents.js"
import { RunEvents } from "../services/RunEvents.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { TaskRequest } from "../services/SubagentRunner.js"
import { TaskEvent } from "../services/SubagentRunner.js"
import { ThreadStore } from "../services/ThreadStore.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Outcome } from "../state/SubagentStatus.js"
import type { StateUpdate } from "../state/ThreadState.js"
import * as Run from "./Run.js"
import type * as SubagentAgents from "./SubagentAgents.js"
import { usableOf } from "./SubagentAgents.js"
import { outcomeOf } from "./SubagentOutcome.js"
import type { SubagentConfig } from "./SubagentRegistry.js"
import { BASH, BASH_DISABLED_MESSAGE, effectiveSkills } from "./SubagentRegistry.js"
import * as TaskUsage from "./TaskUsage.js"

/** How long past its timeout a task may wait for a slot and run before it ends `polling_timed_out`. */
const POLLING_GRACE_SECONDS = 60

/**
 * The error of a task whose subagent outlived its timeout and the grace after it (DeerFlow's task tool's text: the
 * minutes are the configured timeout's, whole, as its `timeout_seconds // 60`).
 */
export const pollingTimedOut = (timeoutSeconds: number, started: boolean): string =>
  `Task polling timed out after ${Math.floor(timeoutSeconds / 60)} minutes. This may indicate the background task ` +
  `is stuck. Status: ${started ? "running" : "pending"}`

/** What a runner's tasks share: the app's configuration, its types, its pool, its models and its agents. */
export interface Tasks {
  readonly config: AppConfig
  readonly configs: ReadonlyMap<string, SubagentConfig>
  /** Whether the `bash` subagent is offered (a `bash` task is refused with DeerFlow's sentence when not). */
  readonly bash: boolean
  /** The app's pool: at most its permits' subagents run at once. */
  readonly pool: Effect.Semaphore
  /** The models runs may name (for `supports_vision`). */
  readonly models: ReadonlyArray<ModelConfig>
  /** The run's role's provider, for a type's own model; undefined: every role may use every model. */
  readonly authorization: Authz.Authorization | undefined
  readonly agents: SubagentAgents.Agents
}

/** The principal of the parent run (its role: `extra.user_role`; none: `default_role`). */
const runPrincipal = (authorization: Authz.Authorization, parent: RunContext["Type"]) => {
  const role = parent.options.extra?.user_role
  return Authz.principalOf(
    { userId: parent.userId, role: typeof role === "string" ? role : null },
    authorization.defaultRole
  )
}

/** Runs one task to its outcome (never failing: a failure is an outcome), telling its progress to the parent run. */
export const run = (
  tasks: Tasks,
  request: TaskRequest
): Effect.Effect<Outcome, never, RunContext | RunState | RunEvents> =>
  Effect.gen(function*() {
    const { agents, authorization, bash, configs, models, pool } = tasks
    const parent = yield* RunContext
    const parentState = yield* RunState
    // the skills whose request secrets the parent had bound for this call (its SkillActivation's)
    const delegated = Option.getOrUndefined(yield* Effect.serviceOption(SkillSecrets.DelegatedSkills))?.skills
    const events = yield* RunEvents
    const emit = (name: string, data: Record<string, unknown>) =>
      Effect.flatMap(Clock.currentTimeMillis, (ms) =>
        events.emit({
          type: "custom",
          name,
          data: { task_id: request.toolCallId, ...data, timestamp: new Date(ms).toISOString() }
        }))

    const config = configs.get(request.subagentType)
    if (config === undefined) {
      const error = request.subagentType === BASH && !bash
        ? BASH_DISABLED_MESSAGE
        : `Unknown subagent type '${request.subagentType}'. Available: ${[...configs.keys()].join(", ")}`
      yield* emit(TaskEvent.failed, { description: request.description, error })
      return { status: "failed", error } satisfies Outcome
    }
    const inherited = parent.options.modelName ?? models[0]?.name
    const wanted = config.model === "inherit" ? inherited : config.model
    // (a type's own model the run's role may not use: the run's, which its role may; as the lead agent's)
    const modelName = wanted === inherited || wanted === undefined || authorization === undefined ||
        (yield* Authz.allows(authorization, runPrincipal(authorization, parent), "model", "use", wanted))
      ? wanted
      : inherited
    const vision = models.find((m) => m.name === modelName)?.supports_vision === true
    const info = { maxTurns: config.maxTurns, modelName }
    const common = { description: request.description, subagent_type: config.name, model_name: modelName ?? null }

    // Messages of the subagent's run, by id in first-seen order (a message re-written keeps its place).
    const seen = new Map<string, Message>()
    const spent = TaskUsage.spent()
    const step = (event: RunEvent): Effect.Effect<void> => {
      spent.see(event)
      // (what its skills bind, names only, audited in the parent's run as the parent's own binding is)
      if (event.type === "custom" && event.name === "skill_secrets") {
        return events.emit({ ...event, data: { ...(event.data as object), task_id: request.toolCallId } })
      }
      if (event.type !== "message" || event.message.type === "human" || event.message.type === "system") {
        return Effect.void
      }
      const message = event.message
      const fresh = !seen.has(message.id)
      seen.set(message.id, message)
      if (!fresh) return Effect.void
      return emit(TaskEvent.running, {
        ...common,
        message,
        message_index: seen.size,
        total_messages: seen.size,
        usage: spent.usage() ?? null
      })
    }

    const execute = Effect.gen(function*() {
      const skills = effectiveSkills(request.skills, config.skills)
      // (the role matters only with authorization: one agent of a type for every role without it)
      const role = tasks.config.authorization.enabled ? parent.options.extra?.user_role : undefined
      const agent = yield* agents.agentFor({
        config,
        toolGroups: request.toolGroups,
        skills,
        vision,
        role: typeof role === "string" ? role : undefined,
        secrets: parent.options.secrets
      })
      if (Either.isLeft(agent)) {
        return { status: "failed", error: `The subagent could not be built: ${agent.left}`, modelName } as Outcome
      }
      const current = yield* parentState.get
      // (its own store, in memory: no lease of it to fence its checkpoints by; the parent's run's lease, which the
      // subagent's run is settled by, is checked before each of them, as the parent's)
      const own = MemoryThreadStore.make()
      const store: ThreadStore["Type"] = {
        ...own,
        append: (threadId, runId, updates) => own.append(threadId, runId, updates),
        appendMeasured: (threadId, runId, updates, unownedOf) => own.appendMeasured(threadId, runId, updates, unownedOf)
      }
      const seed: StateUpdate = {
        ...(current.sandbox !== null ? { sandbox: current.sandbox } : {}),
        ...(current.thread_data !== null ? { thread_data: current.thread_data } : {})
      }
      if (Object.keys(seed).length > 0) yield* Effect.ignore(store.append(parent.threadId, parent.runId, [seed]))
      let end: RunEndEvent | undefined
      const input: Run.RunInput = {
        threadId: parent.threadId,
        runId: parent.runId,
        userId: parent.userId,
        input: [M.human(request.prompt)],
        systemPrompt: agent.right.prompt(usableOf(yield* agents.enabledSkills, skills)),
        unknownTool: agent.right.unknown,
        options: {
          modelName,
          recursionLimit: config.maxTurns,
          thinkingEnabled: false,
          nonInteractive: true,
          // (its run's request secrets: the same user's, the same run's; masked in its tool results as there;
          // with the skills whose secrets its parent had bound, which bind for its commands too)
          ...(parent.options.secrets === undefined ? {} : { secrets: parent.options.secrets }),
          ...(delegated === undefined ? {} : { delegatedSkills: delegated }),
          extra: { ...parent.options.extra, is_subagent: true, subagent_type: config.name }
        }
      }
      const finished = yield* Run.stream(input, agent.right.ports).pipe(
        Stream.runForEach((event) => {
          if (event.type === "run_end") end = event
          return step(event)
        }),
        Effect.provideService(ThreadStore, store),
        Effect.timeoutOption(Duration.seconds(config.timeoutSeconds))
      )
      if (Option.isNone(finished)) {
        return {
          status: "timed_out",
          error: `Execution timed out after ${config.timeoutSeconds} seconds`,
          modelName,
          usage: spent.usage()
        } as Outcome
      }
      const ended = end ?? { type: "run_end", status: "cancelled", stop_reason: "cancelled" }
      return { ...outcomeOf(ended, [...seen.values()], info), usage: spent.usage() }
    })

    yield* emit(TaskEvent.started, common)
    const record = TaskUsage.recorder(parentState, tasks.config.run_events.track_token_usage)
    let started = false
    const bound = config.timeoutSeconds + POLLING_GRACE_SECONDS
    const outcome: Outcome = yield* pool.withPermits(1)(Effect.suspend(() => {
      started = true
      return execute
    })).pipe(
      Effect.timeoutTo({
        duration: Duration.seconds(bound),
        onSuccess: (o): Outcome => o,
        onTimeout: (): Outcome => ({
          status: "polling_timed_out",
          error: pollingTimedOut(config.timeoutSeconds, started),
          modelName,
          usage: spent.usage()
        })
      }),
      // (what the subagent spent is the run's as the task ends, cancelled with its run too: TaskUsage)
      Effect.flatMap((o) => Effect.map(record(spent.records()), (usageRecorded) => ({ ...o, usageRecorded }))),
      Effect.onInterrupt(() => {
        const usage = spent.usage() ?? null
        const cancelled = emit(TaskEvent.cancelled, { ...common, error: "Task cancelled by user.", usage })
        return Effect.zipRight(cancelled, record(spent.records()))
      })
    )
    const usage = outcome.usage ?? null
    switch (outcome.status) {
      case "completed":
        yield* emit(TaskEvent.completed, {
          ...common,
          result: outcome.result ?? "",
          stop_reason: outcome.stopReason ?? null,
          usage
        })
        break
      case "timed_out":
      case "polling_timed_out":
        yield* emit(TaskEvent.timedOut, { ...common, error: outcome.error ?? "", usage })
        break
      case "cancelled":
        yield* emit(TaskEvent.cancelled, { ...common, error: outcome.error ?? "", usage })
        break
      case "failed":
        yield* emit(TaskEvent.failed, {
          ...common,
          error: outcome.error ?? "",
          stop_reason: outcome.stopReason ?? null,
          usage
        })
    }
    return outcome
  })
