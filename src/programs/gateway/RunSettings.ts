/**
 * A run request read into what the run manager starts: its input as messages, and its settings (the config's
 * `configurable` and the allowed keys of `context` and the config's `context`, the agent its assistant names, the
 * recursion limit within the configured maximum). Both `POST .../runs` and a LangGraph cron's payload (when the cron is
 * saved and at each tick) go through `prepare`, so a cron refuses what a run refuses, with the same words.
 */
import * as Either from "effect/Either"
import type { Message } from "../../state/Message.js"
import * as SkillSecrets from "../../services/SkillSecrets.js"
import * as Factory from "../Factory.js"
import * as InputBounds from "./InputBounds.js"
import * as Protocol from "./Protocol.js"
import { isRecord } from "../../state/Json.js"
import { echoed } from "../../state/Chars.js"

/** The fields of a run request (`RunCreate`, a cron's `Payload`) that make the run's messages and settings. */
export interface Fields {
  readonly assistant_id?: string | null | undefined
  readonly input?: unknown
  readonly config?: {
    readonly recursion_limit?: number | null | undefined
    readonly configurable?: Readonly<Record<string, unknown>> | null | undefined
    readonly context?: Readonly<Record<string, unknown>> | null | undefined
    readonly metadata?: Readonly<Record<string, unknown>> | null | undefined
  } | null | undefined
  readonly context?: Readonly<Record<string, unknown>> | null | undefined
  readonly interrupt_before?: unknown
  readonly interrupt_after?: unknown
}

/** What the run manager starts. */
export interface Prepared {
  readonly messages: ReadonlyArray<Message>
  readonly settings: Record<string, unknown>
  /** The thread's title the input sets (`input.title`), if any. */
  readonly title?: string | undefined
}

/** Limits of `prepare`: the configuration's recursion limits, the models runs may name (none: any), whether
 * the caller holds an admin token, and the bounds on the input's size (none: `InputBounds.DEFAULTS`). */
export interface Limits {
  readonly recursionLimit: number
  readonly maxRecursionLimit: number
  readonly models?: ReadonlySet<string> | undefined
  readonly admin: boolean
  readonly bounds?: InputBounds.Bounds | undefined
}

/**
 * Why a request cannot be run, and the HTTP problem it is (`unprocessable`: 422, `bad_request`: 400,
 * `too_large`: 413).
 */
export interface Refusal {
  readonly reason: "unprocessable" | "bad_request" | "too_large"
  readonly message: string
}

const refuse = (reason: Refusal["reason"], message: string): Either.Either<never, Refusal> =>
  Either.left({ reason, message })

/** The messages and settings of a request's run, or why it cannot run (the field named). */
export const prepare = (
  request: Fields & { readonly command?: unknown },
  limits: Limits
): Either.Either<Prepared, Refusal> => {
  const bounds = limits.bounds ?? InputBounds.DEFAULTS
  // (first: a message of megabytes is refused before it is decoded)
  const tooLarge = InputBounds.runMessagesProblem(request, bounds)
  if (tooLarge !== undefined) return refuse("too_large", tooLarge)
  for (const key of ["interrupt_before", "interrupt_after"] as const) {
    const value = request[key]
    if (value != null && !(Array.isArray(value) && value.length === 0)) {
      return refuse("unprocessable", `${key} is not supported: Antler's agent has no graph nodes to stop at.`)
    }
  }
  const messages = Protocol.inputMessages(request.input)
  if (Either.isLeft(messages)) return refuse("unprocessable", messages.left)
  const title = Protocol.inputTitle(request.input)
  if (Either.isLeft(title)) return refuse("unprocessable", title.left)
  const extra = Protocol.runExtraProblem(request)
  if (extra !== undefined) return refuse("unprocessable", extra)
  const input = InputBounds.runInputProblem(request, bounds)
  if (input !== undefined) return refuse("too_large", input)
  // (`config.context` over `context`, as DeerFlow's `build_run_config` merges the request's context into it)
  const settings: Record<string, unknown> = Factory.mergeRuntime(
    request.config?.configurable,
    { ...Protocol.allowedContext(request.context), ...Protocol.allowedContext(request.config?.context) }
  )
  delete settings.non_interactive
  const agentName = Protocol.agentNameOf(request.assistant_id)
  if (agentName !== undefined && settings.agent_name === undefined) settings.agent_name = agentName
  settings.recursion_limit = Protocol.recursionLimit(
    request.config?.recursion_limit,
    limits.recursionLimit,
    limits.maxRecursionLimit
  )
  const known = limits.models
  for (const key of ["model_name", "model"]) {
    const name = settings[key]
    if (typeof name === "string" && known !== undefined && known.size > 0 && !known.has(name)) {
      return refuse("bad_request", `Unknown model "${echoed(name)}". Configured models: ${[...known].join(", ")}.`)
    }
  }
  // the bootstrap agent without an agent name writes the default agent's SOUL.md, which every user's default
  // agent reads: only an admin's run may (see Auth.ts); DeerFlow's clients always name the agent
  if (settings.is_bootstrap === true && settings.agent_name == null && !limits.admin) {
    return refuse(
      "bad_request",
      "context.is_bootstrap without context.agent_name would change the default agent's SOUL.md, which every " +
        "user's agent reads, and only an admin token may do that. Give context.agent_name (the agent to create, " +
        "one of your own)."
    )
  }
  const titled = title.right !== undefined ? { title: title.right } : {}
  return Either.right({ messages: messages.right, settings, ...titled })
}

/** What names a run in its `kwargs` (see `kwargsOf`; its run and thread ids are added as it is answered). */
export interface RunIds {
  readonly assistantId: string
  readonly checkpointId?: string | undefined
  /** The run's metadata (also in its Run object's `metadata`). */
  readonly metadata: Readonly<Record<string, unknown>>
  /** Whether its thread goes with it (a stateless run without `on_completion: keep`). */
  readonly temporary: boolean
}

/**
 * The context keys that carry a request's secrets (DeerFlow's `REDACTED_CONTEXT_KEYS`): `secrets`, DeerFlow's
 * request-scoped secrets (name to value), and the run-context keys its middlewares keep them under.
 */
const SECRET_CONTEXT_KEYS: ReadonlySet<string> = new Set([
  "secrets",
  "__active_skill_secrets",
  "__slash_skill_secret_source",
  "__skill_secrets_binding_audit",
  "__slash_skill_activation_run",
  "__skill_tool_policy_decision"
])

/**
 * A `context` (the request's, or its config's) without the keys that carry secrets: they are never kept or
 * answered with a run (DeerFlow's `redact_config_secrets`); the run gets `secrets` apart (see `requestSecrets`).
 */
export const withoutSecrets = (context: Readonly<Record<string, unknown>>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(context).filter(([key]) => !SECRET_CONTEXT_KEYS.has(key)))

/**
 * Run fields (a cron's payload) as they may be kept: `context` and `config.context` without the keys that carry
 * secrets (see `withoutSecrets`).
 */
export const keptFields = (fields: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...fields }
  if (isRecord(out.context)) out.context = withoutSecrets(out.context)
  if (isRecord(out.config) && isRecord(out.config.context)) {
    out.config = { ...out.config, context: withoutSecrets(out.config.context) }
  }
  return out
}

/**
 * A request's secrets for skills (DeerFlow's `context.secrets`, name to value): `config.context.secrets` when the
 * config's context has them, else `context.secrets`, decoded (`SkillSecrets.decodeRequest`: names, sizes); a
 * refusal (422) names the field. `unsealed`: the gateway is a runner of a cluster without `gateway.cluster.secret`,
 * whose runs travel between processes and wait in PostgreSQL with nothing to seal secrets with (`SealedSecrets`):
 * secrets are refused there rather than stored or sent on in plain text.
 */
export const requestSecrets = (
  request: Fields,
  unsealed: boolean
): Either.Either<SkillSecrets.RequestSecrets | undefined, Refusal> => {
  const fromConfig = isRecord(request.config?.context) && Object.hasOwn(request.config.context, "secrets")
  const where = fromConfig ? "config.context.secrets" : "context.secrets"
  const raw = fromConfig ? request.config!.context!.secrets : request.context?.secrets
  const decoded = SkillSecrets.decodeRequest(raw, where)
  if (Either.isLeft(decoded)) return Either.left({ reason: "unprocessable", message: decoded.left })
  if (decoded.right !== undefined && unsealed) {
    return Either.left({
      reason: "unprocessable",
      message: `${where} is not accepted by a gateway running as a cluster (gateway.cluster) without ` +
        "gateway.cluster.secret: a run's request travels between its runners and waits in the database, where " +
        "secrets are kept only sealed with the runners' shared secret."
    })
  }
  return Either.right(decoded.right)
}

/**
 * A run's `metadata`, and its config's, may not hold `auth_token` (DeerFlow's `validate_run_metadata_secrets`): a
 * request credential there would be stored and answered with the run. The refusal, or undefined.
 */
export const metadataRefusal = (metadata: unknown, configMetadata?: unknown): Refusal | undefined =>
  [metadata, configMetadata].some((value) => isRecord(value) && Object.hasOwn(value, "auth_token"))
    ? {
      reason: "unprocessable",
      message: "Run metadata key 'auth_token' is not allowed: a credential there would be stored and answered with " +
        "the run."
    }
    : undefined

/**
 * The run options Antler does not carry out, refused rather than dropped (a client asking for a webhook would wait
 * for a call that never comes, one asking for `after_seconds` get its run at once), as DeerFlow's gateway refuses
 * them (`unsupported_run_option`). The refusal of the first one given, or undefined.
 */
export const optionRefusal = (
  request: { readonly webhook?: unknown; readonly after_seconds?: unknown }
): Refusal | undefined => {
  const option = (["webhook", "after_seconds"] as const).find((name) => request[name] != null)
  return option === undefined ? undefined : {
    reason: "unprocessable",
    message: `Run option '${option}' is not supported: Antler's gateway ${
      option === "webhook" ? "calls no webhook when a run ends" : "starts a run when it is asked, not later"
    }.`
  }
}

/**
 * What a run was asked with, as LangGraph's Run object shows it (`kwargs`, the shape of `@langchain/langgraph-api`'s
 * `runs().put`): the input and command, the config with `configurable` naming the graph and assistant (and the
 * checkpoint it starts from; `Protocol.runObject` adds the run and its thread) and `metadata` the run's, the
 * context, the stream modes and the options. Fields not given are left out, as LangGraph's JSON leaves them. Request
 * headers and the caller's identity, which LangGraph adds to `configurable`, are not: the object is stored and answered
 * as it is.
 */
export const kwargsOf = (
  request: Fields & {
    readonly command?: unknown
    readonly stream_mode?: Parameters<typeof Protocol.modesOf>[0]
    readonly webhook?: string | null | undefined
    readonly stream_subgraphs?: boolean | null | undefined
    readonly stream_resumable?: boolean | null | undefined
  },
  ids: RunIds
): Record<string, unknown> => {
  const config = request.config ?? {}
  const defined = (entries: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(entries).filter(([, value]) => value != null))
  return defined({
    input: request.input,
    command: request.command,
    config: {
      ...config,
      ...(config.context != null ? { context: withoutSecrets(config.context) } : {}),
      configurable: {
        ...config.configurable,
        ...(ids.checkpointId !== undefined ? { checkpoint_id: ids.checkpointId } : {}),
        graph_id: Protocol.LEAD_AGENT,
        assistant_id: ids.assistantId
      },
      metadata: ids.metadata
    },
    context: withoutSecrets(request.context ?? {}),
    stream_mode: Protocol.modesOf(request.stream_mode),
    interrupt_before: request.interrupt_before,
    interrupt_after: request.interrupt_after,
    webhook: request.webhook,
    temporary: ids.temporary,
    subgraphs: request.stream_subgraphs ?? false,
    resumable: request.stream_resumable ?? false
  })
}
