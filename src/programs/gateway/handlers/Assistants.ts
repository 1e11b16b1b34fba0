/**
 * The assistants endpoints (declared in `api/Assistants.ts`): the lead agent, and each custom agent the user
 * has (`{home}/users/{user}/agents/`) or every user shares (`{home}/agents/`), an agent being a directory with
 * its `config.yaml`; another user's agents are agents that do not exist.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as CustomAgents from "../../CustomAgents.js"
import * as AssistantsApi from "../api/Assistants.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
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

      return handlers
        .handleRaw("searchAssistants", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(AssistantsApi.AssistantSearch)
            const all = [Protocol.LEAD_AGENT, ...agentNames(userId)].map(assistant)
              .filter((a) => request.name == null || a.name.includes(request.name))
              .filter((a) => request.graph_id == null || a.graph_id === request.graph_id)
            const offset = request.offset ?? 0
            const page = all.slice(offset, offset + (request.limit ?? 10))
            return json(AssistantsApi.AssistantList, page.map((a) => selectFields(a, request.select)))
          }))
        .handleRaw("getAssistant", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantObject, assistant(path.assistant_id))))
        .handleRaw("getAssistantGraph", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantGraph, GRAPH)))
        .handleRaw("getAssistantSchemas", ({ path }) =>
          Effect.as(known(path.assistant_id), json(AssistantsApi.AssistantSchemas, SCHEMAS)))
    }))
