/**
 * The gateway's HTTP API: the LangGraph Platform subset the LangGraph SDK and DeerFlow's frontend use
 * (assistants, threads, state, history, runs: background, stream, wait, join, cancel; stateless runs; crons; the
 * store), served at `/`, `/api` and `/api/langgraph`, and DeerFlow's own endpoints under `/api` (uploads,
 * artifacts, models, skills), declared with `@effect/platform`'s HttpApi in `api/` (one group per resource, its
 * Schemas the request and answer shapes) and implemented in `handlers/`; its OpenAPI document at `/openapi.json`,
 * browsable at `/docs` (`Docs.ts`). Bodies are read and decoded by `Body.ts`; every failure is a JSON problem response
 * (`{type, title, status, detail}`, `api/Problem.ts`). Every thread, upload and artifact belongs to a user:
 * another user's is "not found" (404), never "forbidden", and a thread id another user has is, for this one,
 * an id nobody has (threads are stored under ids of their user's own, `ThreadIds`). What a user owns, and what no
 * run of a non-admin token may change: see `Auth.ts`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelConfig } from "../../services/AppConfig.js"
import * as Redact from "../../state/Redact.js"
import type * as Authz from "../../services/Authorization.js"
import type { ModelService } from "../../services/ModelService.js"
import * as Admission from "./Admission.js"
import { DeerFlowApi, LangGraphApi, SERVED } from "./api/GatewayApi.js"
import { respondError } from "./api/Problem.js"
import type { Authenticator } from "./Auth.js"
import * as Docs from "./Docs.js"
import * as Agents from "./handlers/Agents.js"
import * as Accounts from "./handlers/Accounts.js"
import * as Assistants from "./handlers/Assistants.js"
import * as Branches from "./handlers/Branches.js"
import * as Catalog from "./handlers/Catalog.js"
import * as Compact from "./handlers/Compact.js"
import * as Crons from "./handlers/Crons.js"
import * as CustomSkills from "./handlers/CustomSkills.js"
import * as Extensions from "./handlers/Extensions.js"
import * as McpTasks from "./handlers/McpTasks.js"
import * as Features from "./handlers/Features.js"
import * as Feedback from "./handlers/Feedback.js"
import * as FileEdits from "./handlers/FileEdits.js"
import * as Files from "./handlers/Files.js"
import * as Health from "./handlers/Health.js"
import * as Memory from "./handlers/Memory.js"
import * as RunMessages from "./handlers/RunMessages.js"
import * as Runs from "./handlers/Runs.js"
import * as ScheduledTasks from "./handlers/ScheduledTasks.js"
import * as Security from "./handlers/Security.js"
import * as Store from "./handlers/Store.js"
import * as Suggestions from "./handlers/Suggestions.js"
import * as Threads from "./handlers/Threads.js"
import * as ThreadStream from "./handlers/ThreadStream.js"
import * as Turns from "./handlers/Turns.js"

export { LANGGRAPH_PREFIXES } from "./api/GatewayApi.js"
export { problem } from "./api/Problem.js"
export { contentTypeOf } from "./handlers/Files.js"

/** What the routes need besides the app's services. */
export interface Options {
  readonly auth: Authenticator
  /** The models runs may choose (names); the first is the default. */
  readonly models: ReadonlyArray<ModelConfig>
  /** The secrets no file written through the settings endpoints may hold (custom agents, extensions). */
  readonly redact?: Redact.Redactor | undefined
  /** Adds secrets to `redact` (those of the MCP servers the settings endpoints configure). */
  readonly learnSecrets?: ((secrets: ReadonlyArray<string>) => void) | undefined
  /** The gateway's accounts, when it has them (`gateway.auth.accounts`). */
  readonly accounts?: Accounts.Options | undefined
  /** The models' client for the gateway's own calls (follow-up questions, polishing a draft, compaction). */
  readonly model: ModelService["Type"]
  /** Role-based permissions (`authorization.enabled`): routes and models per role. */
  readonly authorization?: Authz.Authorization | undefined
  /** How many of `model`'s calls one user makes at once (`gateway.max_active_runs_per_user`); absent: any. */
  readonly maxModelCallsPerUser?: number | undefined
}

/**
 * The handlers of every API the gateway serves (`SERVED`), added to HttpApiBuilder's router. Built through
 * `HttpApiBuilder.api`, which needs every group of an API implemented: an API with a group without its handlers
 * does not compile.
 */
const handlersLayer = (options: Options) => {
  // (the open gateway's local user owns the shared files; an account, which anyone may register, does not)
  const open = !options.auth.required && options.accounts === undefined
  // (one count of the users' open thread streams for every prefix)
  const threadStreams = ThreadStream.openStreams()
  // (the gateway's own model calls, each waiting in the line of the user it is made for)
  const userCalls = Admission.userCalls(options.maxModelCallsPerUser)
  const [first, ...more] = Arr.map(SERVED.langgraph, (api) =>
    Layer.mergeAll(
      Assistants.layer(api),
      Threads.layer(api),
      ThreadStream.layer(api, threadStreams),
      Runs.layer(api, options.models, options.redact ?? Redact.none),
      Crons.layer(api, options.models),
      Store.layer(api),
      Health.layer(api)
    ))
  const langgraph = Layer.mergeAll(first, ...more)
  const deerflow = Layer.mergeAll(
    Files.layer(SERVED.deerflow),
    Catalog.modelsLayer(SERVED.deerflow, options.models, options.authorization),
    Catalog.skillsLayer(SERVED.deerflow),
    ScheduledTasks.layer(SERVED.deerflow),
    Turns.layer(SERVED.deerflow),
    RunMessages.layer(SERVED.deerflow),
    Feedback.layer(SERVED.deerflow),
    Compact.layer(SERVED.deerflow, options.model, options.models, userCalls, options.authorization),
    Branches.layer(SERVED.deerflow),
    Memory.layer(SERVED.deerflow),
    Agents.layer(SERVED.deerflow, options.redact ?? Redact.none),
    Extensions.layer(SERVED.deerflow, { open, learnSecrets: options.learnSecrets, redact: options.redact }),
    McpTasks.layer(SERVED.deerflow),
    CustomSkills.layer(SERVED.deerflow, { open }),
    Accounts.layer(SERVED.deerflow, options.auth, options.accounts),
    Features.layer(SERVED.deerflow),
    Suggestions.layer(SERVED.deerflow, options.model, options.models, userCalls, options.authorization, options.redact),
    FileEdits.layer(SERVED.deerflow)
  )
  return Layer.mergeAll(
    HttpApiBuilder.api(LangGraphApi).pipe(Layer.provide(langgraph)),
    HttpApiBuilder.api(DeerFlowApi).pipe(Layer.provide(deerflow))
  ).pipe(Layer.provide(Security.layer(options.auth, options.accounts?.store, options.authorization)))
}

/** The routes of a gateway over the app's services: the API's and its documentation's, every failure a problem. */
export const router = (options: Options) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Layer.provideMerge(handlersLayer(options), HttpApiBuilder.Router.Live))
    const api = yield* Effect.provide(HttpApiBuilder.Router.router, context)
    return HttpRouter.concat(api, yield* Docs.router).pipe(HttpRouter.catchAllCause(respondError))
  })
