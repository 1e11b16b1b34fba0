/**
 * The application's wiring, in one place: which configuration, thread store, model and tools a process
 * uses, and how one turn runs through the lead agent. The CLI, the demo (and later the gateway) use this
 * module instead of assembling layers themselves.
 *
 * App-level services (built once per process): `AppConfigService`, `ThreadStore` (SQLite under
 * `ANTLER_HOME`), the model clients. Per run: the base layer (model + tools, no hooks) under
 * `LeadAgent.stack`.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as AllowlistGuardrail from "../layers/AllowlistGuardrail.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as OpenAiModel from "../layers/OpenAiModel.js"
import * as SandboxTools from "../layers/SandboxTools.js"
import * as SqliteThreadStore from "../layers/SqliteThreadStore.js"
import * as Toolkit from "../layers/Toolkit.js"
import type { Ports } from "../middleware/Middleware.js"
import * as Clarification from "../middleware/Clarification.js"
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import * as MW from "../middleware/Middleware.js"
import type { AppConfig } from "../services/AppConfig.js"
import { AppConfigService, baseUrlProblem, ModelConfig } from "../services/AppConfig.js"
import * as Guardrail from "../services/Guardrail.js"
import { ModelService } from "../services/ModelService.js"
import type { RunContext, StoreError } from "../services/RunContext.js"
import type { RunEvent } from "../services/RunEvents.js"
import type * as Tool from "../services/Tool.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import { ThreadStore } from "../services/ThreadStore.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as LeadAgent from "./LeadAgent.js"
import * as Run from "./Run.js"
import * as SystemPrompt from "./SystemPrompt.js"
import type * as Upload from "./Upload.js"

// ---------------------------------------------------------------------------------------------------------
// Model selection

/** What the command line says about the model. */
export interface ModelFlags {
  /** A configured model name, or a raw model id when no configured model has that name. */
  readonly model?: string | undefined
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | undefined
}

/** What the environment says (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`). */
export interface OpenAiEnv {
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | undefined
  readonly model?: string | undefined
}

/** The model a run uses, and every model the process may route to (the chosen one first). */
export interface ModelChoice {
  /** The name requests carry in `settings.modelName`. */
  readonly name: string
  /** The provider's model id. */
  readonly model: string
  /** The server, when not OpenAI's default. */
  readonly baseUrl: string | undefined
  readonly from: "config" | "flags" | "env"
  readonly models: ReadonlyArray<ModelConfig>
}

/** No usable model: nothing configured, a name that matches nothing, or a server address that is not a URL. */
export class ModelChoiceError extends Schema.TaggedError<ModelChoiceError>()("ModelChoiceError", {
  reason: Schema.Literal("none", "unknown_name", "invalid_base_url"),
  message: Schema.String
}) {}

/** The model id used for an ad-hoc endpoint when neither `--model` nor `OPENAI_MODEL` names one. */
export const DEFAULT_MODEL_ID = "gpt-4o-mini"

const adHoc = (name: string, baseUrl: string | undefined, apiKey: string | undefined): ModelConfig =>
  Schema.decodeUnknownSync(ModelConfig)({
    name,
    model: name,
    ...(baseUrl !== undefined ? { base_url: baseUrl } : {}),
    ...(apiKey !== undefined ? { api_key: apiKey } : {})
  })

const nonEmpty = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value.trim())

/**
 * Chooses the model (pure). In order: `--model NAME` naming a configured model (with `--base-url` /
 * `--api-key` overriding its connection); `--base-url` / `--api-key` (and `--model` as the raw model id)
 * as an ad-hoc model; `--model ID` alone when nothing is configured; the first configured model;
 * `OPENAI_*` from the environment. Otherwise a readable error saying how to configure one. A `--base-url` or
 * `OPENAI_BASE_URL` that is not an http(s) URL is an error naming where it came from.
 */
export const chooseModel = (
  configured: ReadonlyArray<ModelConfig>,
  flags: ModelFlags,
  env: OpenAiEnv
): Either.Either<ModelChoice, ModelChoiceError> => {
  const name = nonEmpty(flags.model)
  const baseUrl = nonEmpty(flags.baseUrl)
  const apiKey = nonEmpty(flags.apiKey)
  for (const [where, value] of [["--base-url", baseUrl], ["OPENAI_BASE_URL", env.baseUrl]] as const) {
    const problem = value === undefined ? undefined : baseUrlProblem(value)
    if (problem !== undefined) {
      return Either.left(new ModelChoiceError({ reason: "invalid_base_url", message: `${where}: ${problem}` }))
    }
  }
  const choose = (entry: ModelConfig, from: ModelChoice["from"]): ModelChoice => ({
    name: entry.name,
    model: entry.model,
    baseUrl: entry.base_url ?? entry.api_base ?? env.baseUrl,
    from,
    models: [entry, ...configured.filter((m) => m.name !== entry.name)]
  })
  const match = name === undefined ? undefined : configured.find((m) => m.name === name)
  if (match !== undefined) {
    if (baseUrl === undefined && apiKey === undefined) return Either.right(choose(match, "config"))
    const { api_base: _, ...rest } = match
    const entry: ModelConfig = {
      ...rest,
      ...(baseUrl !== undefined ? { base_url: baseUrl } : {}),
      ...(apiKey !== undefined ? { api_key: Redacted.make(apiKey) } : {})
    }
    return Either.right(choose(entry, "flags"))
  }
  if (baseUrl !== undefined || apiKey !== undefined) {
    const entry = adHoc(name ?? env.model ?? DEFAULT_MODEL_ID, baseUrl ?? env.baseUrl, apiKey ?? env.apiKey)
    return Either.right(choose(entry, "flags"))
  }
  if (name !== undefined) {
    if (configured.length > 0) {
      return Either.left(
        new ModelChoiceError({
          reason: "unknown_name",
          message: `No configured model is named "${name}". ` +
            `Configured models: ${configured.map((m) => m.name).join(", ")}. ` +
            `To use a model id directly, also pass --base-url (and --api-key).`
        })
      )
    }
    return Either.right(choose(adHoc(name, env.baseUrl, env.apiKey), "flags"))
  }
  if (configured.length > 0) return Either.right(choose(configured[0]!, "config"))
  if (env.apiKey !== undefined || env.baseUrl !== undefined || env.model !== undefined) {
    return Either.right(choose(adHoc(env.model ?? DEFAULT_MODEL_ID, env.baseUrl, env.apiKey), "env"))
  }
  return Either.left(
    new ModelChoiceError({
      reason: "none",
      message: [
        "No model is configured. Any one of these works:",
        "  - add a model to config.yaml:  models: [{ name: main, model: gpt-4o-mini, api_key: $OPENAI_API_KEY }]",
        "  - pass an endpoint:            antler run --base-url http://localhost:11434/v1 --model llama3.2 \"...\"",
        "  - set the environment:         OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL)",
        "Or try the offline demo:         antler demo"
      ].join("\n")
    })
  )
}

/** `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL` from the environment (empty counts as unset). */
export const openAiEnv: Effect.Effect<OpenAiEnv> = Effect.gen(function*() {
  const read = (name: string) =>
    Config.option(Config.string(name)).pipe(
      Effect.map((value) => nonEmpty(Option.getOrUndefined(value))),
      Effect.orElseSucceed(() => undefined)
    )
  return {
    baseUrl: yield* read("OPENAI_BASE_URL"),
    apiKey: yield* read("OPENAI_API_KEY"),
    model: yield* read("OPENAI_MODEL")
  }
})

/** The ModelService for a choice: one OpenAI client per model, built once, routing by `settings.modelName`. */
export const modelService = (choice: ModelChoice) => OpenAiModel.fromConfig(choice.models)

// ---------------------------------------------------------------------------------------------------------
// App-level layers

/** Where the thread store of a data directory lives. */
export const storeLocation = (home: string): string => Path.join(home, SqliteThreadStore.FILENAME)

/** The thread store of a data directory (SQLite, `{home}/antler.sqlite`). */
export const storeLayer = (home: string): Layer.Layer<ThreadStore, StoreError> => SqliteThreadStore.layerFromHome(home)

/** The app-level services a run needs besides the model. */
export type Services = AppConfigService | ThreadStore | SandboxProvider

/**
 * App-level services over a loaded configuration, built once per process: the configuration, the thread
 * store under its data directory, and the local sandbox provider (threads' files under the same directory).
 */
export const layer = (app: AppConfigService["Type"]): Layer.Layer<Services, StoreError> => {
  const config = Layer.succeed(AppConfigService, app)
  return Layer.mergeAll(config, storeLayer(app.home), LocalSandbox.layer().pipe(Layer.provide(config)))
}

// ---------------------------------------------------------------------------------------------------------
// The lead agent's per-process parts

/**
 * What the lead agent shares across the runs of a process: the circuit breaker, the guardrail provider and
 * the static system prompt (which lists the skills found at start-up).
 */
export interface Agent {
  readonly breaker: LLMErrorHandling.CircuitBreaker
  readonly guardrail: Guardrail.Service | undefined
  readonly systemPrompt: string
}

/** The guardrail provider of a configuration: none when guardrails are off; a config error when unusable. */
export const guardrailOf = (
  config: AppConfig
): Either.Either<Guardrail.Service | undefined, Guardrail.GuardrailConfigError> => {
  if (!config.guardrails.enabled) return Either.right(undefined)
  return Either.flatMap(AllowlistGuardrail.fromConfig(config.guardrails), (guardrail) =>
    guardrail === undefined
      ? Either.left(
        new Guardrail.GuardrailConfigError({
          reason: "unknown_provider",
          use: "",
          message: "guardrails.enabled is true but no guardrails.provider is set (e.g. use: allowlist)"
        })
      )
      : Either.right(guardrail))
}

/** Builds the per-process parts of the lead agent from the loaded configuration. */
export const agent = (app: AppConfigService["Type"]): Effect.Effect<Agent, Guardrail.GuardrailConfigError> =>
  Effect.flatMap(guardrailOf(app.config), (guardrail) =>
    Effect.sync(() => {
      const container = app.config.skills.container_path
      return {
        breaker: LLMErrorHandling.makeCircuitBreaker(app.config.circuit_breaker),
        guardrail,
        systemPrompt: SystemPrompt.make({
          clarification: true,
          skills: SystemPrompt.loadSkills(LocalSandbox.skillsDirectory(app), container),
          skillsContainer: container
        })
      }
    }))

// ---------------------------------------------------------------------------------------------------------
// Runs

/** What the base tools are built for. */
export interface ToolOptions {
  /** Whether the model accepts images (`view_image` is offered only then). */
  readonly vision?: boolean | undefined
  /** Tools added after the sandbox tools (a program's own tools). */
  readonly extraTools?: ReadonlyArray<Tool.Tool> | undefined
}

/**
 * The base of a run's stack: the model, the sandbox tools (plus `extraTools`), no run hooks. Fresh per run:
 * the tools read the run's context to find the thread's sandbox.
 */
export const baseLayer = (
  model: ModelService["Type"],
  options: ToolOptions = {}
): Layer.Layer<Ports, never, SandboxProvider | RunContext | AppConfigService> =>
  MW.baseFrom(Effect.map(SandboxTools.tools({ vision: options.vision === true }), (tools) => ({
    model,
    tools: Toolkit.make([...tools, ...(options.extraTools ?? [])])
  })))

/** One turn of a thread. */
export interface TurnInput extends ToolOptions {
  readonly threadId: string
  readonly runId: string
  /** What the user says. When the thread waits for a clarification, this is the answer to it. */
  readonly prompt: string
  /** The model entry the run uses (`settings.modelName` is its name). */
  readonly model?: ModelConfig | undefined
  /** Default: the agent's system prompt. */
  readonly systemPrompt?: string | undefined
  /** Files uploaded with this message (`additional_kwargs.files`, read by the Uploads middleware). */
  readonly files?: ReadonlyArray<Upload.MessageFile> | undefined
}

/**
 * The human message of a turn: an answer to the thread's pending clarification question when there is one
 * (marked so the model and the UI know what it answers), else a plain human message.
 */
export const inputMessage = (threadId: string, prompt: string): Effect.Effect<Message, StoreError, ThreadStore> =>
  Effect.map(Effect.flatMap(ThreadStore, (store) => store.load(threadId)), (loaded) => {
    const pending = Option.isSome(loaded) ? Clarification.pending(loaded.value.state.messages) : undefined
    return pending !== undefined ? Clarification.answer(pending, prompt) : M.human(prompt)
  })

/**
 * Runs one turn through the lead agent as a stream of events ending with `run_end`. A failure to read the
 * thread before the run is reported the way the run reports failures: as a `run_end` with status `error`.
 */
export const turn = (
  input: TurnInput,
  model: ModelService["Type"],
  parts: Agent
): Stream.Stream<RunEvent, never, Services> =>
  Stream.unwrap(Effect.gen(function*() {
    const app = yield* AppConfigService
    const message = yield* Effect.either(Effect.map(inputMessage(input.threadId, input.prompt), (m) =>
      input.files === undefined || input.files.length === 0
        ? m
        : { ...m, additional_kwargs: { ...m.additional_kwargs, files: input.files } }))
    if (Either.isLeft(message)) {
      return Stream.make<Array<RunEvent>>(
        { type: "run_start", thread_id: input.threadId, run_id: input.runId },
        {
          type: "run_end",
          status: "error",
          stop_reason: "error",
          error: { name: message.left._tag, message: message.left.message }
        }
      )
    }
    const options: LeadAgent.Options = {
      config: app.config,
      modelConfig: input.model,
      interactive: true,
      guardrail: parts.guardrail,
      breaker: parts.breaker
    }
    const vision = input.vision ?? input.model?.supports_vision === true
    return Run.stream(
      {
        threadId: input.threadId,
        runId: input.runId,
        input: [message.right],
        systemPrompt: input.systemPrompt ?? parts.systemPrompt,
        options: { modelName: input.model?.name, recursionLimit: app.config.recursion_limit }
      },
      () => LeadAgent.stack(options, baseLayer(model, { ...input, vision }))
    )
  }))
