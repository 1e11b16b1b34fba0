/**
 * SkillToolPolicy (SPEC §5.16, lead chain slot #17): while a skill is active, its `allowed-tools` is enforced.
 * A skill is active when it was slash-activated for this run (that one alone counts), else when the thread
 * loaded it earlier (`skill_context`, the SKILL.md reads DurableContext keeps). The tools allowed are the union
 * of the `allowed-tools` of the active skills that declare one, plus the framework tools that never go away
 * (`read_file`, `describe_skill`, `review_skill_package`, `tool_search`); no restriction when none declares
 * one. Active skills that cannot be found (removed, disabled, not for this agent) or read fail closed to the
 * framework tools.
 *
 * The model is offered only the allowed tools; a call to another one is refused with a result the model can
 * read (which skill restricts it, and what it allows), without running. `tool_search` stays, but the schemas it
 * returns and the tools it promotes are cut to the allowed ones.
 */
import * as Effect from "effect/Effect"
import type { ModelRequest } from "../services/ModelService.js"
import { RunState } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import type { Policy, Registry } from "../services/Skills.js"
import { FRAMEWORK_TOOLS, policyOf } from "../services/Skills.js"
import * as Tool from "../services/Tool.js"
import type { ToolResult } from "../services/ToolService.js"
import type { Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import { ACTIVATION_KEY, PATH_KEY, targetIndex } from "./SkillActivation.js"
import * as Chain from "./Chain.js"
import type { ThreadState } from "../state/ThreadState.js"
import { atOnce, withState } from "./internal/StateRead.js"

/**
 * The SKILL.md paths a request makes active: its slash activation (right before the latest real user message,
 * where SkillActivation puts it; only the messages after that one are scanned), else the thread's loaded
 * skills.
 */
export const activePaths = (
  messages: ReadonlyArray<Message>,
  loaded: ReadonlyArray<{ readonly path: string }>,
  memo?: Memo
): ReadonlyArray<string> => {
  const user = targetIndex(messages, memo?.user)
  const last = memo?.activation.get(messages)
  let from = Math.max(0, user - 1)
  let path: string | undefined
  // the messages the last call looked at for this user message need no second look
  if (last !== undefined && last.value.user === user) {
    path = last.value.path
    from = Math.max(from, last.input.length)
  }
  for (let i = from; path === undefined && i < messages.length; i++) {
    const kwargs = messages[i]!.additional_kwargs
    if (kwargs?.[ACTIVATION_KEY] === true && typeof kwargs[PATH_KEY] === "string") path = kwargs[PATH_KEY]
  }
  memo?.activation.set(messages, { user, path })
  return path !== undefined ? [path] : loaded.map((entry) => entry.path)
}

/** What `activePaths` remembers per thread (see `Incremental`). */
export interface Memo {
  readonly user: Incremental.Memo<number>
  readonly activation: Incremental.Memo<{ readonly user: number; readonly path: string | undefined }>
}

/** A fresh memo for `activePaths`. */
export const makeMemo = (): Memo => ({ user: Incremental.makeMemo(), activation: Incremental.makeMemo() })

/** The refusal of a tool the policy does not allow. */
export const refusalText = (name: string, policy: Extract<Policy, { _tag: "Restricted" }>): string => {
  const one = policy.skills.length === 1
  return `Error: Tool '${name}' is not allowed by the active skill policy. The active skill${one ? "" : "s"} ` +
    `${policy.skills.join(", ")} allow${one ? "s" : ""} only: ${[...policy.allowed].sort().join(", ")}. ` +
    "Use one of those tools, or answer without this one."
}

/** The tools the active skills allow (beyond the framework's) that are not among the run's tools. */
export const unknownTools = (
  policy: Extract<Policy, { _tag: "Restricted" }>,
  tools: ReadonlyArray<{ readonly name: string }>
): ReadonlyArray<string> => {
  const offered = new Set(tools.map((tool) => tool.name))
  return [...policy.allowed].filter((name) => !offered.has(name) && !FRAMEWORK_TOOLS.includes(name)).sort()
}

/** The warning about them: the skill's list names tools this agent does not have, so the model gets fewer. */
export const unknownToolsText = (policy: Extract<Policy, { _tag: "Restricted" }>, unknown: ReadonlyArray<string>) => {
  const one = policy.skills.length === 1
  return `The allowed-tools of the active skill${one ? "" : "s"} ${policy.skills.join(", ")} name${one ? "s" : ""} ` +
    `tool${unknown.length === 1 ? "" : "s"} this agent does not have: ${unknown.join(", ")}. ` +
    "The model is offered only the allowed tools it has."
}

/** The deferred-tool search, which stays available under an active skill but finds only what it allows. */
const TOOL_SEARCH = "tool_search"

/** What `tool_search` says when the active skills allow none of the tools it found. */
export const NO_ALLOWED_TOOLS = "No tools found matching the active skill policy."

/** What a `tool_search` result that cannot be checked becomes: nothing unchecked reaches the model. */
export const UNCHECKED_SEARCH =
  "Error: tool_search returned a result that could not be validated against the active skill policy."

/**
 * A `tool_search` result under a restricting policy: its schemas and its promotion cut to the allowed tools
 * (DeerFlow's `_filter_tool_search_result`), so the search cannot show or promote a tool the skill denies.
 */
export const filterSearch = (
  policy: Extract<Policy, { _tag: "Restricted" }>,
  call: ToolCall,
  result: ToolResult
): ToolResult => {
  const promoted = result.update?.promoted
  const found = promoted?.names
  if (promoted === undefined || promoted === null || found === undefined) {
    return Tool.errorResult(call, UNCHECKED_SEARCH)
  }
  const names = found.filter((name) => policy.allowed.has(name))
  let content = M.text(result.message)
  if (found.length > 0) {
    let schemas: unknown
    try {
      schemas = JSON.parse(content)
    } catch {
      schemas = undefined
    }
    if (!Array.isArray(schemas)) return Tool.errorResult(call, UNCHECKED_SEARCH)
    const kept = schemas.filter((schema) =>
      typeof schema === "object" && schema !== null && names.includes((schema as { name?: unknown }).name as string)
    )
    content = kept.length > 0 ? JSON.stringify(kept, null, 2) : NO_ALLOWED_TOOLS
  }
  return {
    message: { ...result.message, content },
    update: { ...result.update, promoted: { ...promoted, names } }
  }
}

/** The policy when the active skills cannot be read: the framework tools only. */
const failedClosed = (paths: ReadonlyArray<string>): Policy => ({
  _tag: "Restricted",
  allowed: new Set(FRAMEWORK_TOOLS),
  skills: [...paths]
})

/** Options of `layer`. */
export interface Options {
  readonly registry: Registry
  /** The skills this agent may use (a custom agent's list); all when undefined. */
  readonly allowlist?: ReadonlyArray<string> | undefined
}

/** The SkillToolPolicy middleware. Requires `RunState` (the thread's loaded skills). */
export const layer = (options: Options): Middleware => {
  const memo = makeMemo()
  return MW.make(Effect.gen(function*() {
    const state = yield* RunState
    // The catalog is read for each model call while a skill is active (never otherwise), so a skill disabled,
    // removed or given other allowed-tools during a run decides its next step, as in DeerFlow.
    // The decision of the last model call serves the tool calls that answer it.
    let decision: Policy | undefined

    const unrestricted: Policy = { _tag: "Unrestricted" }
    // (no effect when no skill is active: the usual case)
    const decideNow = (current: ThreadState, messages: ReadonlyArray<Message>): Policy | Effect.Effect<Policy> => {
      const paths = activePaths(messages, current.skill_context, memo)
      if (paths.length === 0) return unrestricted
      return options.registry.catalog.pipe(
        Effect.map((catalog) => policyOf(paths, catalog, options.allowlist)),
        // skills that cannot be read cannot be authorised: fail closed to the framework tools, as DeerFlow does
        Effect.catchAllDefect((defect) =>
          Effect.as(
            Effect.logWarning("The skills could not be read for the active skill policy; only the framework " +
              `tools stay: ${String(defect)}`),
            failedClosed(paths)
          )
        )
      )
    }
    const decide = (messages: ReadonlyArray<Message>) =>
      withState(state, (current) => {
        const policy = decideNow(current, messages)
        return Effect.isEffect(policy) ? policy : Effect.succeed(policy)
      })
    const restrict = (policy: Policy, request: ModelRequest): MW.Now<ModelRequest> => {
      decision = policy
      if (policy._tag === "Unrestricted") return request
      return Effect.as(
        reportUnknown(policy, request),
        { ...request, tools: request.tools.filter((t) => policy.allowed.has(t.name)) }
      )
    }
    const enforce = (policy: Policy, call: ToolCall, next: MW.ToolNext) =>
      policy._tag !== "Restricted"
        ? next(call)
        : !policy.allowed.has(call.name)
        ? Effect.succeed(Tool.errorResult(call, refusalText(call.name, policy)))
        : call.name === TOOL_SEARCH
        ? Effect.map(next(call), (result) => filterSearch(policy, call, result))
        : next(call)

    // Tools an active skill allows that this run does not have, each reported once per run.
    const reported = new Set<string>()
    const reportUnknown = (policy: Extract<Policy, { _tag: "Restricted" }>, request: ModelRequest) => {
      const unknown = unknownTools(policy, request.tools).filter((name) => !reported.has(name))
      if (unknown.length === 0) return Effect.void
      for (const name of unknown) reported.add(name)
      const message = unknownToolsText(policy, unknown)
      return Effect.zipRight(
        Effect.logWarning(message),
        emitCustom("skill_policy", { message, unknown_tools: unknown })
      )
    }

    return {
      modelHooks: {
        before: (request) =>
          request.internal !== undefined ? request : atOnce(state, (current) => {
            const policy = decideNow(current, request.messages)
            return Effect.isEffect(policy)
              ? Effect.flatMap(policy, (p) => MW.lift(restrict(p, request)))
              : restrict(policy, request)
          })
      },
      tool: (call, next) =>
        decision !== undefined
          ? enforce(decision, call, next)
          : Effect.flatMap(withState(state, (s) => decide(s.messages)), (policy) => enforce(policy, call, next))
    } satisfies MW.Wrappers
  }), { name: "SkillToolPolicy" })
}

/** Its chain entry: inside SkillActivation, whose skill decides which tools are offered. */
export const entry = (options: Options) =>
  Chain.entry("SkillToolPolicy", () => layer(options), [
    { inside: "SkillActivation", reason: "the skill activated for the run decides the policy" },
    { inside: "ToolErrorHandling", reason: "its refusals still get tool metadata" }
  ])
