/**
 * The gateway's HTTP API as declared: the LangGraph Platform subset the LangGraph SDK and DeerFlow's frontend use
 * (`LangGraphApi`: assistants, threads, runs, crons, store, health), served under each of `LANGGRAPH_PREFIXES`, and
 * DeerFlow's own endpoints (`DeerFlowApi`: files, models, skills) under `/api`. `SERVED` is what the server mounts;
 * `GatewayApi` is the whole as documented at `/openapi.json`, each LangGraph path listed once with the prefixes
 * it is served under (OpenAPI's `servers`).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Arr from "effect/Array"
import * as Agents from "./Agents.js"
import * as Accounts from "./Accounts.js"
import * as Assistants from "./Assistants.js"
import * as Branches from "./Branches.js"
import * as Catalog from "./Catalog.js"
import * as Compact from "./Compact.js"
import * as Crons from "./Crons.js"
import * as CustomSkills from "./CustomSkills.js"
import * as Extensions from "./Extensions.js"
import * as Features from "./Features.js"
import * as Feedback from "./Feedback.js"
import * as FileEdits from "./FileEdits.js"
import * as Files from "./Files.js"
import * as Health from "./Health.js"
import * as McpTasks from "./McpTasks.js"
import * as Memory from "./Memory.js"
import { refusal } from "./Problem.js"
import * as RunMessages from "./RunMessages.js"
import * as Runs from "./Runs.js"
import * as ScheduledTasks from "./ScheduledTasks.js"
import * as Store from "./Store.js"
import * as Suggestions from "./Suggestions.js"
import * as Threads from "./Threads.js"
import * as ThreadStream from "./ThreadStream.js"
import * as Turns from "./Turns.js"

/** Where the LangGraph API is served: the SDK's root, DeerFlow's `/api` and its frontend's `/api/langgraph`. */
export const LANGGRAPH_PREFIXES: Arr.NonEmptyReadonlyArray<string> = ["", "/api", "/api/langgraph"]

/** Where DeerFlow's own endpoints are served. */
export const DEERFLOW_PREFIX = "/api"

const Failed = refusal(500, "The server failed to handle the request (see its log)")

/** The LangGraph API, at the root. */
export const LangGraphApi = HttpApi.make("langgraph")
  .add(Assistants.group)
  .add(Threads.group)
  .add(ThreadStream.group)
  .add(Runs.group)
  .add(Crons.group)
  .add(Store.group)
  .add(Health.group)
  .addError(Failed)
export type LangGraphApi = typeof LangGraphApi

/** DeerFlow's endpoints, under `/api`. */
export const DeerFlowApi = HttpApi.make("deerflow")
  .add(Files.group)
  .add(Catalog.models)
  .add(Catalog.skills)
  .add(ScheduledTasks.group)
  .add(Turns.group)
  .add(RunMessages.group)
  .add(Feedback.group)
  .add(Compact.group)
  .add(Branches.group)
  .add(Memory.group)
  .add(Agents.group)
  .add(Extensions.mcp)
  .add(Extensions.skillStates)
  .add(CustomSkills.group)
  .add(McpTasks.group)
  .add(Accounts.group)
  .add(Features.group)
  .add(Suggestions.group)
  .add(FileEdits.group)
  .addError(Failed)
  .prefix(DEERFLOW_PREFIX)
export type DeerFlowApi = typeof DeerFlowApi

/** The APIs the server mounts: the LangGraph API once per prefix, DeerFlow's endpoints. */
export const SERVED = {
  langgraph: Arr.map(LANGGRAPH_PREFIXES, (prefix) =>
    prefix === "" ? LangGraphApi : LangGraphApi.prefix(prefix as `/${string}`)),
  deerflow: DeerFlowApi
}

type Json = Record<string, any>

const SCHEMAS = "#/components/schemas/"
const DECODE_ERROR = `${SCHEMAS}HttpApiDecodeError`
const PROBLEM = `${SCHEMAS}Problem`

/** Every object of a JSON value, itself included. */
const objectsOf = (value: unknown, into: Array<Json> = []): Array<Json> => {
  if (Array.isArray(value)) for (const item of value) objectsOf(item, into)
  else if (typeof value === "object" && value !== null) {
    into.push(value)
    for (const item of Object.values(value)) objectsOf(item, into)
  }
  return into
}

/** The `$ref`s a JSON value holds. */
const refsOf = (value: unknown, into: Set<string>): Set<string> => {
  if (Array.isArray(value)) for (const item of value) refsOf(item, into)
  else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === "$ref" && typeof item === "string") into.add(item)
      else refsOf(item, into)
    }
  }
  return into
}

/**
 * What the document says that the declarations do not: the prefixes each LangGraph path is served under; that
 * every refusal is a problem (`application/problem+json`, see `Problem.respondError`), described by what the
 * endpoint declares, HttpApi's own decoding error (which every HttpApi declares) never sent; the artifact
 * route's wildcard as the path parameter `{*}`; any value as `{}` (the JSON Schema of `Schema.Unknown` gives
 * each its `$id`, the same one, which a validator reading the document takes for one schema defined twice).
 */
const document = (spec: Json): Json => {
  const schemas: Json = spec.components.schemas
  const servers = LANGGRAPH_PREFIXES.map((prefix) => ({ url: prefix === "" ? "/" : prefix }))
  const paths: Json = {}
  for (const [path, item] of Object.entries(spec.paths as Json)) {
    if (!path.startsWith(`${DEERFLOW_PREFIX}/`)) item.servers = servers
    for (const operation of Object.values(item as Json)) {
      const responses: Json | undefined = operation?.responses
      if (responses === undefined) continue
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) < 400) continue
        const declared = (Object.values(response.content ?? {}) as Array<Json>)
          .flatMap((media) => media.schema.anyOf ?? [media.schema])
          .filter((schema: Json) => schema.$ref !== DECODE_ERROR)
        if (declared.length === 0) {
          delete responses[status]
          continue
        }
        const { description: _description, ...problem } = declared[0]
        schemas.Problem ??= { ...problem, description: "A refusal (RFC 9457 problem details)" }
        const descriptions = [...new Set(declared.map((schema: Json) => schema.description as string))]
        responses[status] = {
          description: descriptions.join("; "),
          content: { "application/problem+json": { schema: { $ref: PROBLEM } } }
        }
      }
    }
    paths[path.replace(/\/\*$/, "/{*}")] = item
  }
  spec.paths = paths
  for (const schema of objectsOf(spec)) {
    if (schema.$id === "/schemas/unknown") {
      delete schema.$id
      delete schema.title
    }
  }
  // the schemas nothing refers to any more (the decoding error's)
  const reachable = new Set<string>()
  for (let next = refsOf(paths, new Set()); next.size > 0;) {
    const found = new Set<string>()
    for (const ref of next) {
      if (reachable.has(ref)) continue
      reachable.add(ref)
      refsOf(schemas[ref.slice(SCHEMAS.length)], found)
    }
    next = found
  }
  for (const name of Object.keys(schemas)) if (!reachable.has(`${SCHEMAS}${name}`)) delete schemas[name]
  return spec
}

/** The whole API, as documented. */
export const GatewayApi = HttpApi.make("antler")
  .addHttpApi(LangGraphApi)
  .addHttpApi(DeerFlowApi)
  .annotate(OpenApi.Title, "Antler gateway")
  .annotate(OpenApi.Version, "1")
  .annotate(
    OpenApi.Description,
    "DeerFlow's lead agent behind the LangGraph Platform API (the subset the LangGraph SDK and DeerFlow's " +
      "frontend use) and DeerFlow's own endpoints. Every refusal is an RFC 9457 problem " +
      "(application/problem+json). With gateway.auth.tokens configured, every endpoint but /ok and /info needs " +
      "a token (Authorization: Bearer, or X-Api-Key)."
  )
  .annotate(OpenApi.Transform, document)
