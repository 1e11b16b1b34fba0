/**
 * The assistants endpoints (declared in `api/Assistants.ts`): the lead agent, and each custom agent the user
 * has (`{home}/users/{user}/agents/`) or every user shares (`{home}/agents/`), an agent being a directory with
 * its `config.yaml`; another user's agents are agents that do not exist. Each assistant has one version (1) and
 * no subgraphs; assistants are made, changed and deleted as agents (`/api/agents`), so LangGraph's create,
 * update and delete are refused saying so, but for a create of an assistant the user has (`if_exists:
 * do_nothing`, as SDK clients do at start-up), which answers it.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as CustomAgents from "../../CustomAgents.js"
import * as AssistantsApi from "../api/Assistants.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { fail, notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import { matchesFilter } from "../JsonEquality.js"
import * as Protocol from "../Protocol.js"
import { json, selectFields } from "./Http.js"

const assistant = (id: string): typeof AssistantsApi.AssistantObject.Type => ({
  assistant_id: id,
  graph_id: Protocol.LEAD_AGENT,
  name: id,
  description: id === Protocol.LEAD_AGENT ? "DeerFlow's lead agent" : `Custom agent ${id}`,
  config: {},
  context: id === Protocol.LEAD_AGENT ? {} : { agent_name: id },
  metadata: {},
  version: 1,
  created_at: new Date(0).toISOString(),
  updated_at: new Date(0).toISOString()
})

const version = (id: string): typeof AssistantsApi.AssistantVersion.Type => {
  const { updated_at: _, ...rest } = assistant(id)
  return rest
}

/** Where an assistant is changed: the lead agent in `config.yaml`, a custom agent through `/api/agents`. */
const changedWhere = (id: string, verb: "change" | "delete") => {
  const name = Protocol.agentNameOf(id)
  if (name === undefined) {
    return verb === "delete"
      ? `${Protocol.LEAD_AGENT} is DeerFlow's lead agent, which cannot be deleted.`
      : `${Protocol.LEAD_AGENT} is DeerFlow's lead agent, configured in config.yaml; it cannot be changed here.`
  }
  return `Assistant ${id} is the DeerFlow agent ${name}: ${verb} it with ` +
    `${verb === "delete" ? "DELETE" : "PUT"} /api/agents/${name}.`
}

const GRAPH: typeof AssistantsApi.AssistantGraph.Type = {
  nodes: [{ id: "__start__" }, { id: "model" }, { id: "tools" }, { id: "__end__" }],
  edges: [
    { source: "__start__", target: "model" },
    { source: "model", target: "tools", conditional: true },
    { source: "tools", target: "model" },
    { source: "model", target: "__end__", conditional: true }
  ]
}

const SCHEMAS: typeof AssistantsApi.AssistantSchemas.Type = {
  graph_id: Protocol.LEAD_AGENT,
  input_schema: {},
  output_schema: {},
  state_schema: {},
  config_schema: {}
}

/** The assistants endpoints of `api` (the LangGraph API under one of its prefixes). */
export const layer = (api: LangGraphApi) =>
  HttpApiBuilder.group(api, "assistants", (handlers) =>
    Effect.gen(function*() {
      const app = yield* AppConfigService

      const agentNames = (userId: string): ReadonlyArray<string> => {
        const dirs = [Path.join(app.home, "users", userId, "agents"), Path.join(app.home, "agents")]
        const names = new Set<string>()
        for (const dir of dirs) {
          try {
            for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
              // an agent is a directory with its config.yaml (as `antler agents` and the factory read it)
              if (
                entry.isDirectory() && CustomAgents.isAgentName(entry.name) &&
                Fs.existsSync(Path.join(dir, entry.name, CustomAgents.CONFIG_FILE))
              ) names.add(entry.name.toLowerCase())
            }
          } catch {
            // no agents directory
          }
        }
        return [...names].sort()
      }

      /** The user's assistant `id` (named as a run names its agent: lower-cased, hyphenated), or 404. */
      const known = (id: string) =>
        Effect.gen(function*() {
          const { user: userId } = yield* CurrentIdentity
          const name = Protocol.agentNameOf(id)
          if (name !== undefined && !agentNames(userId).includes(name)) return yield* notFound(`Assistant ${id}`)
        })

      /** The user's assistants the filters of a search or a count keep (a name in any case, as LangGraph's). */
      const matching = (userId: string, request: typeof AssistantsApi.AssistantCount.Type) =>
        [Protocol.LEAD_AGENT, ...agentNames(userId)].map(assistant)
          .filter((a) => request.name == null || a.name.toLowerCase().includes(request.name.toLowerCase()))
          .filter((a) => request.graph_id == null || a.graph_id === request.graph_id)
          .filter((a) => matchesFilter(a.metadata, request.metadata))

      return handlers
        .handleRaw("searchAssistants", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(AssistantsApi.AssistantSearch)
            const found = matching(userId, request)
            // (the lead agent first, then the agents by name, unless a field is asked for; equal ones keep that)
            const key = request.sort_by
            const all = key == null ? found : found.sort((a, b) => {
              const order = a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0
              return request.sort_order === "asc" ? order : -order
            })
            const offset = request.offset ?? 0
            const page = all.slice(offset, offset + (request.limit ?? 10))
            return json(AssistantsApi.AssistantList, page.map((a) => selectFields(a, request.select)))
          }))
        .handleRaw("countAssistants", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(AssistantsApi.AssistantCount)
            return json(Schema.Int, matching(userId, request).length)
          }))
        // LangGraph's create answers the existing assistant of that id with `if_exists: do_nothing` (409 with
        // `raise`, its default); any other assistant is an agent to make with `/api/agents`
        .handleRaw("createAssistant", () =>
          Effect.gen(function*() {
            const request = yield* Body.json(AssistantsApi.AssistantCreate)
            const id = request.assistant_id
            const exists = id != null && (yield* Effect.isSuccess(known(id)))
            if (id == null || !exists) {
              return yield* fail(
                "unprocessable",
                `Assistants are DeerFlow agents: make one with POST /api/agents (its name is the assistant id); ` +
                  `${Protocol.LEAD_AGENT} is the lead agent${
                    id == null ? "" : `, and you have no assistant ${JSON.stringify(id)}`
                  }.`
              )
            }
            if ((request.if_exists ?? "raise") === "raise") {
              return yield* fail(
                "conflict",
                `Assistant ${id} already exists (send if_exists: "do_nothing" to be answered with it).`
              )
            }
            return json(AssistantsApi.AssistantObject, assistant(id))
          }))
        .handleRaw("patchAssistant", ({ path }) =>
          Effect.gen(function*() {
            yield* known(path.assistant_id)
            yield* Body.json(AssistantsApi.AssistantPatch)
            return yield* fail("unprocessable", changedWhere(path.assistant_id, "change"))
          }))
        .handleRaw("deleteAssistant", ({ path }) =>
          Effect.zipRight(known(path.assistant_id), fail("unprocessable", changedWhere(path.assistant_id, "delete"))))
        .handleRaw("getAssistantSubgraphs", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantSubgraphs, {})))
        .handleRaw("getAssistantSubgraphsOf", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantSubgraphs, {})))
        .handleRaw("getAssistantVersions", ({ path }) =>
          Effect.gen(function*() {
            yield* known(path.assistant_id)
            const request = yield* Body.json(AssistantsApi.AssistantVersionsRequest)
            const offset = request.offset ?? 0
            const versions = [version(path.assistant_id)].filter((v) => matchesFilter(v.metadata, request.metadata))
            return json(AssistantsApi.AssistantVersions, versions.slice(offset, offset + (request.limit ?? 10)))
          }))
        .handleRaw("setLatestAssistantVersion", ({ path }) =>
          Effect.gen(function*() {
            yield* known(path.assistant_id)
            const request = yield* Body.json(AssistantsApi.AssistantLatest)
            if (request.version !== 1) {
              return yield* notFound(`Version ${request.version} of assistant ${path.assistant_id} (it has version 1)`)
            }
            return json(AssistantsApi.AssistantObject, assistant(path.assistant_id))
          }))
        .handleRaw("getAssistant", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantObject, assistant(path.assistant_id))))
        .handleRaw("getAssistantGraph", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantGraph, GRAPH)))
        .handleRaw("getAssistantSchemas", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantSchemas, SCHEMAS)))
    }))
