/**
 * Guardrail (SPEC §5.9, lead chain slots 9–10): before each tool call, a policy provider decides whether
 * the call may run. A denial (or, when `fail_closed`, a provider failure) answers the call with an error
 * ToolMessage naming the tool, the reason code and the reason, and the tool does not run. Every denial and
 * every provider failure is audited as a `guardrail` custom event and a log line. A run whose `authz_attributes`
 * are not a mapping has each call fail with DeerFlow's `TypeError`, unasked.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { emitCustom } from "../services/RunEvents.js"
import * as Guardrail from "../services/Guardrail.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext } from "../services/RunContext.js"
import type { ToolResult } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import * as Middleware from "./Middleware.js"
import { failureResult } from "./ToolErrorHandling.js"
import * as Chain from "./Chain.js"

/** Options of the middleware (DeerFlow's `guardrails.fail_closed`, `guardrails.passport`). */
export interface Options {
  /** Deny when the provider fails (default `true`); `false` lets the call run. */
  readonly failClosed?: boolean | undefined
  /** Sent to the provider as `agent_id`. */
  readonly passport?: string | null | undefined
  /** Tools never sent to the provider (the authorization adapter exempts a generated `tool_search`). */
  readonly exempt?: ReadonlyArray<string> | undefined
}

const str = (value: unknown): string | null => (typeof value === "string" ? value : null)

/** The user of a run nobody identified (the CLI's, an open gateway's): not an identity to send. */
const ANONYMOUS_USER = "default"

/**
 * The request for a call, from the call and the run (pure; `extra` carries the caller's identity keys). A run
 * without an identity sends none, as DeerFlow's: `user_id` null rather than the anonymous `default` user, and
 * `authz_attributes` empty.
 */
export const buildRequest = (
  call: ToolCall,
  run: { readonly threadId: string; readonly runId: string; readonly userId: string },
  extra: Readonly<Record<string, unknown>> | undefined,
  passport: string | null,
  timestamp: string
): Guardrail.GuardrailRequest => {
  const attributes = extra?.authz_attributes
  return {
    tool_name: call.name,
    tool_input: call.args,
    agent_id: passport,
    thread_id: run.threadId,
    run_id: run.runId,
    tool_call_id: call.id,
    is_subagent: extra?.is_subagent === true,
    timestamp,
    user_id: str(extra?.user_id) ?? (run.userId === ANONYMOUS_USER ? null : run.userId),
    user_role: str(extra?.user_role),
    oauth_provider: str(extra?.oauth_provider),
    oauth_id: str(extra?.oauth_id),
    channel_user_id: str(extra?.channel_user_id),
    is_internal: extra?.is_internal === true,
    authz_attributes: typeof attributes === "object" && attributes !== null && !Array.isArray(attributes)
      ? { ...attributes as Record<string, unknown> }
      : {}
  }
}

const pythonType = (value: unknown): string =>
  Array.isArray(value)
    ? "list"
    : typeof value === "string"
    ? "str"
    : typeof value === "boolean"
    ? "bool"
    : typeof value === "number"
    ? (Number.isInteger(value) ? "int" : "float")
    : typeof value

/**
 * Why the caller's `authz_attributes` cannot be sent, if they cannot: anything but a mapping (or none). DeerFlow
 * refuses such a call with the same `TypeError` rather than ask the provider without the attributes.
 */
export const invalidAttributes = (extra: Readonly<Record<string, unknown>> | undefined): TypeError | undefined => {
  const attributes = extra?.authz_attributes
  if (attributes === undefined || attributes === null) return undefined
  if (typeof attributes === "object" && !Array.isArray(attributes)) return undefined
  return new TypeError(`authz_attributes must be a Mapping, got ${pythonType(attributes)}`)
}

/** The first reason of a denial, with defaults for a denial that gave none. */
export const firstReason = (decision: Guardrail.GuardrailDecision): Guardrail.GuardrailReason => {
  const reason = decision.reasons[0]
  return {
    code: reason?.code || Guardrail.DENIED,
    message: reason?.message || "blocked by guardrail policy"
  }
}

/** The text the model reads when a call is denied: DeerFlow's `_build_denied_message`, word for word. */
export const deniedText = (toolName: string, decision: Guardrail.GuardrailDecision): string => {
  const { code, message } = firstReason(decision)
  return `Guardrail denied: tool '${toolName}' was blocked (${code}). Reason: ${message}. ` +
    `Choose an alternative approach.`
}

/** The error result for a denied call (the provider's reason masked with `hide`, when given). */
export const deniedResult = (call: ToolCall, decision: Guardrail.GuardrailDecision, hide?: Redactor): ToolResult => {
  const text = deniedText(call.name || "unknown_tool", decision)
  return {
    message: M.tool(hide === undefined ? text : hide.text(text), call.id || "missing_tool_call_id", {
      name: call.name || "unknown_tool",
      status: "error"
    })
  }
}

/**
 * The decision used when the provider fails: a denial under `fail_closed`, else an allow; its reason is DeerFlow's
 * (`guardrail provider error (fail-closed)`). The provider's own error goes to the log only, never to the model.
 */
export const onProviderError = (failClosed: boolean): Guardrail.GuardrailDecision => ({
  allow: !failClosed,
  reasons: [{
    code: Guardrail.EVALUATOR_ERROR,
    message: `guardrail provider error (${failClosed ? "fail-closed" : "fail-open"})`
  }]
})

// (a provider's words masked for the process's secrets and the run's before they are cut: `hide`)
const providerFailed = (failClosed: boolean, error: Guardrail.GuardrailError, hide: Redactor) =>
  Effect.as(
    Effect.logWarning(`guardrail: the provider failed: ${hide.text(error.message).slice(0, 2000)}`).pipe(
      Effect.annotateLogs({ provider: error.provider })
    ),
    [onProviderError(failClosed), true] as const
  )

const audit = (
  provider: string,
  request: Guardrail.GuardrailRequest,
  decision: Guardrail.GuardrailDecision,
  failClosed: boolean,
  providerError: boolean,
  hide: Redactor
) => {
  const action = decision.allow ? "allow_tool_call_after_provider_error" : "deny_tool_call"
  const record = {
    action,
    provider,
    tool_name: request.tool_name,
    tool_call_id: request.tool_call_id,
    thread_id: request.thread_id,
    run_id: request.run_id,
    agent_id: request.agent_id,
    is_subagent: request.is_subagent,
    user_role: request.user_role,
    allow: decision.allow,
    policy_id: decision.policy_id ?? null,
    reason_codes: decision.reasons.flatMap((r) => (r.code ? [r.code] : [])),
    reason_messages: decision.reasons.flatMap((r) => (r.message ? [hide.text(r.message).slice(0, 500)] : [])),
    fail_closed: failClosed,
    provider_error: providerError
  }
  return Effect.zipRight(
    emitCustom("guardrail", record),
    Effect.logWarning(`guardrail: ${action} tool=${request.tool_name}`).pipe(
      Effect.annotateLogs({ reason_codes: record.reason_codes.join(","), provider, thread_id: request.thread_id })
    )
  )
}

const wrappers = (provider: Guardrail.Service, options: Options) =>
  Effect.gen(function*(): Effect.fn.Return<Middleware.Wrappers, never, RunContext> {
    const context = yield* RunContext
    // (what a provider's words are masked with before they are cut: the process's secrets and the run's)
    const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
    const failClosed = options.failClosed ?? true
    const passport = options.passport ?? null
    const exempt = new Set(options.exempt ?? [])
    const run = { threadId: context.threadId, runId: context.runId, userId: context.userId }
    return {
      tool: (call, next) => {
        if (exempt.has(call.name)) return next(call)
        const invalid = invalidAttributes(context.options.extra)
        if (invalid !== undefined) {
          return Effect.as(
            Effect.logWarning(`guardrail: ${invalid.message}; tool=${call.name} refused`),
            failureResult(call, invalid)
          )
        }
        return Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const request = buildRequest(call, run, context.options.extra, passport, new Date(now).toISOString())
          return provider.evaluate(request).pipe(
            Effect.map((decision) => [decision, false] as const),
            Effect.catchTag("GuardrailError", (error) => providerFailed(failClosed, error, hide)),
            // A provider that dies is a failing provider, not a reason to crash the run.
            Effect.catchAllDefect((defect) =>
              providerFailed(
                failClosed,
                new Guardrail.GuardrailError({ provider: provider.name, message: String(defect) }),
                hide
              )
            ),
            Effect.flatMap(([decision, providerError]) => {
              if (decision.allow && !providerError) return next(call)
              const audited = audit(provider.name, request, decision, failClosed, providerError, hide)
              return decision.allow
                ? Effect.zipRight(audited, next(call))
                : Effect.as(audited, deniedResult(call, decision, hide))
            })
          )
        })
      }
    }
  })

/**
 * The guardrail middleware over the app's `GuardrailProvider` (slot 10, the configured provider).
 * Requires `RunContext` and `GuardrailProvider`.
 */
export const layer = (options: Options = {}) =>
  Middleware.make(Effect.flatMap(Guardrail.GuardrailProvider, (provider) => wrappers(provider, options)))

/**
 * The guardrail middleware over a given provider, for a second guardrail in the same chain (slot 9, the
 * authorization adapter, stands outside the configured one). Requires `RunContext`.
 */
export const layerWith = (provider: Guardrail.Service, options: Options = {}) =>
  Middleware.make(wrappers(provider, options))

/** Its chain entry, over the configured provider: before the audit, so a denied tool is never audited as run. */
export const entry = (provider: Guardrail.Service, options: Options = {}) =>
  Chain.entry("Guardrail", () => layerWith(provider, options), [
    { outside: "SandboxAudit", reason: "a denied tool is never audited as if it ran" }
  ])
