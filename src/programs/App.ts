/**
 * The application's wiring for the CLI, the gateway and the demo: which model a process talks to (from config,
 * flags or the environment), and the app-level services over a loaded configuration — `AppConfigService`,
 * `ThreadStore` (SQLite under `ANTLER_HOME`, or PostgreSQL at `database.url`), the local `SandboxProvider` —
 * under `LeadAgent.layer`. Built once per process; an Effect app composes the same public layers itself.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ConfigError } from "../layers/ConfigFile.js"
import * as ConfigReload from "../layers/ConfigReload.js"
import * as ExtensionsFile from "../layers/ExtensionsFile.js"
import * as FileMemory from "../layers/FileMemory.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as McpClient from "../layers/McpClient.js"
import * as OpenAiModel from "../layers/OpenAiModel.js"
import * as SqliteThreadStore from "../layers/SqliteThreadStore.js"
import { AppConfigService, baseUrlProblem, ModelConfig } from "../services/AppConfig.js"
import type { LiveConfig } from "../services/LiveConfig.js"
import type { Mcp } from "../services/Mcp.js"
import type { McpTasks } from "../services/McpTasks.js"
import type { Memory } from "../services/Memory.js"
import { ModelService } from "../services/ModelService.js"
import { StoreError } from "../services/RunContext.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import { threadPaths } from "../services/Sandbox.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as Redact from "../state/Redact.js"
import * as ConfiguredMiddlewares from "./ConfiguredMiddlewares.js"
import * as Factory from "./Factory.js"
import * as ThreadFile from "./ThreadFile.js"
import * as ToolAssembly from "./ToolAssembly.js"

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
 * `OPENAI_BASE_URL` that is not an http(s) URL is an error naming where it came from. `antler`: how the commands
 * the error suggests are typed where the user is (`npx antler` in the clone; see `CliCommand.invocation`).
 */
export const chooseModel = (
  configured: ReadonlyArray<ModelConfig>,
  flags: ModelFlags,
  env: OpenAiEnv,
  antler = "antler"
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
        `  - pass an endpoint:            ${antler} run --base-url http://localhost:11434/v1 --model llama3.2 "..."`,
        "  - set the environment:         OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL)",
        `Or try the offline demo:         ${antler} demo`
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

/**
 * The secrets of a process: every configured model's key and base-URL credentials, and the environment's;
 * what the CLI prints and the store keeps is redacted with them.
 */
export const redactor = (
  models: ReadonlyArray<ModelConfig>,
  env: OpenAiEnv = {},
  extra: ReadonlyArray<string | Redacted.Redacted<string> | undefined> = []
): Redact.Redactor =>
  Redact.make([
    env.apiKey,
    ...Redact.urlSecrets(env.baseUrl),
    ...models.flatMap((m) => [
      m.api_key,
      ...Redact.urlSecrets(m.base_url),
      ...Redact.urlSecrets(m.api_base),
      ...Object.values(m.default_headers ?? {}),
      // (a key a provider takes in the request body)
      ...Redact.namedSecrets([
        m.model_kwargs,
        m.extra_body,
        m.when_thinking_enabled,
        m.when_thinking_disabled,
        m.thinking
      ])
    ]),
    ...extra
  ])

/** The ModelService for a choice: one OpenAI client per model, built once, routing by `settings.modelName`. */
export const modelService = (choice: ModelChoice) => OpenAiModel.fromConfig(choice.models)

/** How building the model clients can fail. */
export type ModelBuildError = Effect.Effect.Error<ReturnType<typeof modelService>>

// ---------------------------------------------------------------------------------------------------------
// App-level layers

/** Where the thread store of a data directory lives. */
export const storeLocation = (home: string): string => Path.join(home, SqliteThreadStore.FILENAME)

/** The thread store of a data directory (SQLite, `{home}/antler.sqlite`), keeping no secret of `redact`. */
export const storeLayer = (home: string, redact?: Redact.Redactor): Layer.Layer<ThreadStore, StoreError> =>
  SqliteThreadStore.layerFromHome(home, { redact })

/**
 * The thread store a configuration chooses: PostgreSQL at `database.url` (several processes share its threads),
 * else SQLite under the data directory.
 */
export const configuredStoreLayer = (
  app: AppConfigService["Type"],
  redact?: Redact.Redactor
): Layer.Layer<ThreadStore, StoreError> => {
  const url = app.config.database.url ?? app.config.database.postgres_url ?? undefined
  if (url === undefined) return storeLayer(app.home, redact)
  // @effect/sql-pg is an optional peer: loaded only when PostgreSQL is configured
  return Layer.unwrapEffect(Effect.map(
    Effect.tryPromise({
      try: () => import("../layers/PgThreadStore.js"),
      catch: (cause) =>
        new StoreError({
          operation: "open",
          message: "database.url names a PostgreSQL database, but @effect/sql-pg cannot be loaded " +
            `(npm install @effect/sql-pg@^0.53): ${cause instanceof Error ? cause.message : String(cause)}`,
          cause
        })
    }),
    (PgThreadStore) => PgThreadStore.layer({ url, redact })
  ))
}

/**
 * Removes a directory tree. Directories a sandboxed command left without permissions (overlayfs work
 * directories) are opened up first, as their owner may.
 */
export const removeTree = (dir: string): void => {
  try {
    Fs.rmSync(dir, { recursive: true, force: true })
    return
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code !== "EACCES" && code !== "EPERM" && code !== "ENOTEMPTY") throw error
  }
  const open = (path: string): void => {
    try {
      Fs.chmodSync(path, 0o700)
    } catch {
      // not ours: rmSync below says so
    }
    for (const entry of Fs.readdirSync(path, { withFileTypes: true })) {
      if (entry.isDirectory()) open(Path.join(path, entry.name))
    }
  }
  open(dir)
  Fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * Copies the files of one of a user's threads (its `user-data`: workspace, uploads, outputs) to another thread of
 * theirs, without symbolic links (one may point anywhere on the host) nor the files `skip` names. What came of
 * it: `not_found` (the thread has no files), `copied`, or `failed` (what was copied stays).
 */
export const copyThreadFiles = (
  home: string,
  userId: string,
  from: string,
  to: string,
  skip: (name: string) => boolean
): Effect.Effect<"not_found" | "copied" | "failed"> =>
  // (asynchronous: a thread's files may be large, and a gateway serves every other user meanwhile)
  Effect.promise(async () => {
    const source = threadPaths(home, userId, from).root
    try {
      await Fs.promises.access(source)
    } catch {
      return "not_found" as const
    }
    try {
      // (file by file, each opened where the walk found it: a run of the thread may be going on, and its bash
      // swapping a file for a link to another user's files was followed by a copy that opened the path again)
      await ThreadFile.copyTree(await Fs.promises.realpath(source), threadPaths(home, userId, to).root, skip)
      return "copied" as const
    } catch {
      return "failed" as const
    }
  })

/** The directory of a thread's files (`{home}/users/{user}/threads/{thread}`). */
export const threadDirectory = (home: string, threadId: string, userId = "default"): string =>
  Path.dirname(threadPaths(home, userId, threadId).root)

/**
 * Deletes a thread: from the store (refused while one of its runs is in progress) and its files under the
 * data directory (workspace, uploads, outputs). `true` when there was something to delete.
 */
export const deleteThread = (
  home: string,
  threadId: string,
  userId = "default"
): Effect.Effect<boolean, StoreError, ThreadStore> =>
  Effect.gen(function*() {
    const stored = yield* Effect.flatMap(ThreadStore, (store) => store.delete(threadId))
    const dir = threadDirectory(home, threadId, userId)
    const files = Fs.existsSync(dir)
    yield* Effect.try({
      try: () => removeTree(dir),
      catch: (cause) =>
        new StoreError({
          operation: "delete",
          message: `Cannot remove the files of thread "${threadId}" (${dir}): ${
            cause instanceof Error ? cause.message : String(cause)
          }`,
          cause
        })
    })
    return stored || files
  })

/** The app-level services a run needs besides the model. */
export type Services = AppConfigService | ThreadStore | SandboxProvider

/**
 * App-level services over a loaded configuration, built once per process: the configuration, the thread
 * store under its data directory, and the local sandbox provider (threads' files under the same directory).
 * `redact`: the secrets the store must never write (see `redactor`).
 */
export const layer = (
  app: AppConfigService["Type"],
  redact?: Redact.Redactor,
  store?: Layer.Layer<ThreadStore, StoreError>
): Layer.Layer<Services, StoreError> => {
  const config = Layer.succeed(AppConfigService, app)
  return Layer.mergeAll(
    config,
    store ?? configuredStoreLayer(app, redact),
    LocalSandbox.layer().pipe(Layer.provide(config))
  )
}

/**
 * `layer`, with the sandbox reading the roots of `mcp`'s enabled filesystem servers (as they are at each operation:
 * a server switched off in the gateway's MCP settings takes its roots away).
 */
export const layerWithMcp = (
  app: AppConfigService["Type"],
  mcp: Layer.Layer<Mcp, ConfigError, FileSystem.FileSystem>,
  redact?: Redact.Redactor,
  store?: Layer.Layer<ThreadStore, StoreError>
): Layer.Layer<Services, StoreError | ConfigError, FileSystem.FileSystem> => {
  const config = Layer.succeed(AppConfigService, app)
  return Layer.mergeAll(
    config,
    store ?? configuredStoreLayer(app, redact),
    LocalSandbox.layer().pipe(Layer.provide(Layer.merge(config, mcp)))
  )
}

// ---------------------------------------------------------------------------------------------------------
// The agent

/**
 * The lead agent factory of a process over a loaded configuration and a model choice: the app's services
 * (store, sandbox, configuration), the model clients, long-term memory (one update queue for the process), and
 * `Factory.layer` over them, choosing among the
 * choice's models (the chosen one is the default). `redact`: the secrets the store, memory files and agents'
 * files must never hold (see `redactor`). `store`: another thread store than the configured one (an embedder's,
 * or the in-memory one). `reload`: take edits of `app`'s configuration file for the runs that start after them
 * (`LiveConfig`, see `ConfigReload`); without it, the configuration of the start is the only one. `tasks`: the
 * gateway's MCP task runtime over the app's MCP service (its agents get the task tools; see `services/McpTasks`).
 * `mcpOptions.freezeTaskServers`: the task-enabled MCP servers' settings stay as they started (`antler serve`).
 */
export const factoryLayer = (
  app: AppConfigService["Type"],
  choice: ModelChoice,
  options: Factory.Options = {},
  redact?: Redact.Redactor,
  store?: Layer.Layer<ThreadStore, StoreError>,
  reload?: ConfigReload.Watch,
  tasks?: Layer.Layer<McpTasks, StoreError, Mcp>,
  mcpOptions: { readonly freezeTaskServers?: boolean | undefined } = {}
): Layer.Layer<
  Factory.AgentFactory | ConfiguredMiddlewares.ConfiguredMiddlewares | Memory | Services | Mcp | LiveConfig,
  StoreError | ModelBuildError | ConfigError | ConfiguredMiddlewares.ConfiguredMiddlewareError,
  FileSystem.FileSystem
> => {
  // one MCP service for the app: the agents' MCP tools and the sandbox's filesystem roots come from it
  const mcp = mcpLayer(app, redact, mcpOptions)
  const services = layerWithMcp(app, mcp, redact, store)
  const model = Layer.effect(ModelService, modelService(choice))
  // one memory queue for the app, shared by every agent the factory builds
  const memory = FileMemory.layer({ redact }).pipe(Layer.provide(model), Layer.provide(services))
  const live = ConfigReload.layer({ app, models: choice.models, ...reload }).pipe(Layer.provide(model))
  // (the configured middlewares are the factory's and also the app's: an agent's per-run middlewares see the app's
  // services where the run already holds them, without a copy of the run's context per middleware: RunFrame.ts)
  const factory = Factory.layer({ models: choice.models, redact, ...options }).pipe(
    Layer.provide(model),
    Layer.provideMerge(ConfiguredMiddlewares.layer(app))
  )
  // (the factory, with the task runtime when there is one: both read by the gateway's handlers)
  return (tasks === undefined ? factory : factory.pipe(Layer.provideMerge(tasks))).pipe(
    Layer.provideMerge(live),
    Layer.provideMerge(mcp),
    Layer.provideMerge(memory),
    Layer.provideMerge(services)
  )
}

/**
 * The secrets of the MCP servers in the `extensions_config.json` beside `app`'s configuration (see
 * `McpClient.secrets`).
 */
export const mcpSecrets = (
  app: AppConfigService["Type"]
): Effect.Effect<ReadonlyArray<string>, never, FileSystem.FileSystem> =>
  ExtensionsFile.find(app.source, app.home).pipe(
    Effect.flatMap(({ config }) => McpClient.secrets(config.mcpServers)),
    Effect.orElseSucceed(() => [])
  )

/**
 * The secrets of the app's tools that a command's redactor hides besides the models' keys: the tools' own keys
 * (`ToolAssembly.secrets`) and the MCP servers' env and header values.
 */
export const toolSecrets = (
  app: AppConfigService["Type"]
): Effect.Effect<ReadonlyArray<string>, never, FileSystem.FileSystem> =>
  Effect.map(mcpSecrets(app), (mcp) => [...configSecrets(app.config), ...mcp])

/**
 * The secrets of `config.yaml` besides the models': the tools' keys (`ToolAssembly.secrets`) and the values under
 * secret-named keys of the guards' module configuration (`guardrails.provider.config`, each
 * `safety_finish_reason.detectors` entry's `config`: a policy service's key), which a failing provider's words may
 * hold; the guard puts them in the refused call's result, which the model reads and the user is shown.
 */
export const configSecrets = (config: AppConfigService["Type"]["config"]): ReadonlyArray<string> => [
  ...ToolAssembly.secrets(config),
  ...Redact.namedSecrets([
    config.guardrails.provider?.config,
    ...(config.safety_finish_reason.detectors ?? []).map((entry) => entry.config)
  ])
]

/**
 * The app's MCP connections, from the `extensions_config.json` found beside its `config.yaml` (see
 * `ExtensionsFile`): servers start when an agent first asks for their tools and stop with the layer.
 */
export const mcpLayer = (
  app: AppConfigService["Type"],
  redact?: Redact.Redactor,
  options: { readonly freezeTaskServers?: boolean | undefined } = {}
): Layer.Layer<Mcp, ConfigError, FileSystem.FileSystem> =>
  ExtensionsFile.layer({
    // (a growing redactor learns the secrets of servers a hand edit of the file adds)
    learnSecrets: redact !== undefined && "learn" in redact ? (redact as Redact.Growing).learn : undefined,
    // (hidden in a failed start's or listing's error before its cut: another server's env value, a model's key)
    redact,
    freezeTaskServers: options.freezeTaskServers
  }).pipe(Layer.provide(Layer.succeed(AppConfigService, app)))
