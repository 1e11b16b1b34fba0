/**
 * The custom agents endpoints (declared in `api/Agents.ts`) over `CustomAgents`: each request reads and writes
 * its own user's agents only (`{home}/users/{user}/agents/`); another user's agent is an agent that does not
 * exist (404). Agents of the old shared layout (`{home}/agents/`) are listed and read, never changed or deleted
 * (409, as DeerFlow answers). What is written is redacted (no secret of the server reaches an agent's files) and
 * bounded (`CustomAgents.save`: the settings decode and fit in 1 MiB, the SOUL in `MAX_SOUL_BYTES`). A model
 * not configured is refused, as DeerFlow refuses it. Runs pick up a changed agent at their start.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as Live from "./Live.js"
import type * as Redact from "../../../state/Redact.js"
import * as CustomAgents from "../../CustomAgents.js"
import * as AgentsApi from "../api/Agents.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, notFound, serverFault } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import { json, queryList, type QueryValue } from "./Http.js"
import { echoed } from "../../../state/Chars.js"

/** The keys of `config.yaml` these endpoints manage (the others are kept as they are). */
const MANAGED = [
  "description",
  "model",
  "tool_groups",
  "skills",
  "model_settings",
  "thinking_enabled",
  "reasoning_effort"
] as const

/** An agent as DeerFlow answers it. */
export const agentObject = (agent: CustomAgents.CustomAgent): typeof AgentsApi.Agent.Type => ({
  name: agent.name,
  description: agent.config.description,
  model: agent.config.model ?? null,
  tool_groups: agent.config.tool_groups ?? null,
  skills: agent.config.skills ?? null,
  model_settings: agent.config.model_settings ?? null,
  thinking_enabled: agent.config.thinking_enabled ?? null,
  reasoning_effort: agent.config.reasoning_effort ?? null,
  soul: agent.soul ?? ""
})

/**
 * `model_settings` of an update over the agent's (DeerFlow's merge): a sub-field given replaces the agent's, a
 * null one clears it, one left out is kept (`{temperature}` keeps `max_tokens`).
 */
const mergedSettings = (current: unknown, update: unknown): Record<string, unknown> => {
  const merged: Record<string, unknown> = typeof current === "object" && current !== null && !Array.isArray(current)
    ? { ...current }
    : {}
  for (const [key, value] of Object.entries(update as Record<string, unknown>)) {
    if (value === null) delete merged[key]
    else if (value !== undefined) merged[key] = value
  }
  return merged
}

/** The name as stored (lower case, as DeerFlow stores it), or 422 naming what is wrong with it. */
const checkedName = (name: string) => {
  const problem = CustomAgents.nameProblem(name)
  return problem === undefined
    ? Effect.succeed(name.toLowerCase())
    : Effect.fail(fail("unprocessable", `Invalid agent name ${JSON.stringify(name)}: ${problem}.`))
}

/** The custom agents endpoints of `api` (DeerFlow's, under `/api`); `redact`: what no agent's file may hold. */
export const layer = (api: DeerFlowApi, redact: Redact.Redactor) =>
  HttpApiBuilder.group(api, "agents", (handlers) =>
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const fs = yield* FileSystem.FileSystem
      const home = app.home
      // (`config.yaml` as it is now: its models, and whether these endpoints are on)
      const now = yield* Live.config
      /** What every endpoint answers when `agents_api.enabled` is false (DeerFlow's 403 and its wording). */
      const enabled = Effect.flatMap(now, ({ config }) =>
        config.agents_api.enabled ? Effect.void : Effect.fail(fail(
          "forbidden",
          "Custom-agent management API is disabled. Set agents_api.enabled=true in config.yaml to expose the " +
            "custom agents (their settings and SOUL.md) over HTTP."
        )))

      const provided = <A, E>(effect: Effect.Effect<A, E, FileSystem.FileSystem>) =>
        Effect.provideService(effect, FileSystem.FileSystem, fs)

      const agentFailed = (error: CustomAgents.AgentError) => {
        switch (error.reason) {
          case "not_found":
            return Effect.fail(notFound(`Agent '${error.name}'`))
          case "invalid_name":
            return Effect.fail(fail("unprocessable", error.message))
          case "invalid_config":
            // (the file named from the data directory: a client is not told where the server keeps it)
            return Effect.fail(fail("unprocessable", CustomAgents.messageFromHome(error, home)))
          case "too_many":
            return Effect.fail(fail("conflict", `${error.message}.`))
          case "legacy":
            return Effect.fail(fail(
              "conflict",
              `Agent '${error.name}' is in the old shared layout, which no user's request changes; ` +
                "move it into a user's agents directory to change it."
            ))
          case "io":
            return serverFault(
              `The agent ${error.name} could not be read or written`,
              `agents endpoint: ${error.message}`
            )
        }
      }

      const legacy = (name: string) =>
        agentFailed(new CustomAgents.AgentError({ reason: "legacy", name, message: "" }))

      /** Whether a folder holds an agent (its config.yaml). */
      const hasConfig = (dir: string) =>
        Effect.orElseSucceed(fs.exists(Path.join(dir, CustomAgents.CONFIG_FILE)), () => false)

      const load = (userId: string, name: string) =>
        Effect.catchAll(provided(CustomAgents.load(home, userId, name)), agentFailed)

      const modelProblem = (model: string | null | undefined) =>
        Effect.map(now, ({ config }) =>
          model == null || model === "" || config.models.some((m) => m.name === model)
            ? undefined
            : fail(
              "unprocessable",
              `Unknown model '${echoed(model)}'. Use a model name defined under \`models:\` in config.yaml.`
            ))

      /** The settings of a request, redacted: the fields it sets over `base`, without the nulls. */
      const settingsOf = (
        base: Readonly<Record<string, unknown>>,
        request: Partial<Record<(typeof MANAGED)[number], unknown>>
      ) => {
        const next: Record<string, unknown> = { ...base }
        for (const key of MANAGED) {
          if (!(key in request)) continue
          const value = request[key]
          if (value === null || value === undefined) delete next[key]
          else if (key === "model_settings") next[key] = mergedSettings(base[key], value)
          else next[key] = redact.value(value)
        }
        if (next.model_settings !== undefined && Object.keys(next.model_settings as object).length === 0) {
          delete next.model_settings
        }
        if (typeof next.description === "string") next.description = (next.description as string).trim()
        return next
      }

      const soulOf = (soul: string | null | undefined) => soul == null ? undefined : redact.text(soul)

      return handlers
        .handleRaw("listAgents", () =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const { agents, problems } = yield* provided(CustomAgents.list(home, user))
            for (const problem of problems) yield* Effect.logWarning(`agent not listed: ${problem.message}`)
            return json(AgentsApi.AgentList, { agents: agents.map(agentObject) })
          }))
        .handleRaw("checkAgentName", ({ urlParams }) =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const given = queryList(urlParams.name as QueryValue)[0]
            if (given === undefined) {
              return yield* fail("unprocessable", "name: the query needs the name to check (?name=).")
            }
            const name = yield* checkedName(given)
            const where = yield* provided(CustomAgents.agentDir(home, user, name))
            const taken = yield* hasConfig(where.dir)
            return json(AgentsApi.NameCheck, { available: !taken, name })
          }))
        .handleRaw("createAgent", () =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(AgentsApi.AgentCreate)
            const name = yield* checkedName(request.name)
            const unknownModel = yield* modelProblem(request.model)
            if (unknownModel !== undefined) return yield* unknownModel
            const where = yield* provided(CustomAgents.agentDir(home, user, name))
            if (yield* hasConfig(where.dir)) {
              return yield* fail("conflict", `Agent '${name}' already exists.`)
            }
            yield* Effect.catchAll(
              provided(CustomAgents.save(home, user, name, {
                config: settingsOf({ name }, request),
                soul: soulOf(request.soul) ?? ""
              })),
              agentFailed
            )
            return json(AgentsApi.Agent, agentObject(yield* load(user, name)), 201)
          }))
        .handleRaw("getAgent", ({ path }) =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const name = yield* checkedName(path.agent_name)
            return json(AgentsApi.Agent, agentObject(yield* load(user, name)))
          }))
        .handleRaw("updateAgent", ({ path }) =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const name = yield* checkedName(path.agent_name)
            const request = yield* Body.json(AgentsApi.AgentUpdate)
            const agent = yield* load(user, name)
            if (agent.legacy) return yield* legacy(name)
            if ("model" in request) {
              const unknownModel = yield* modelProblem(request.model)
              if (unknownModel !== undefined) return yield* unknownModel
            }
            const soul = soulOf(request.soul)
            const changed = MANAGED.some((key) => key in request)
            if (changed || soul !== undefined) {
              yield* Effect.catchAll(
                provided(CustomAgents.save(home, user, name, {
                  config: changed ? settingsOf(agent.raw, request) : agent.raw,
                  soul
                })),
                agentFailed
              )
            }
            return json(AgentsApi.Agent, agentObject(yield* load(user, name)))
          }))
        .handleRaw("deleteAgent", ({ path }) =>
          Effect.gen(function*() {
            yield* enabled
            const { user } = yield* CurrentIdentity
            const exists = (file: string) => Effect.orElseSucceed(fs.exists(file), () => false)
            const kept = (name: string) =>
              fail(
                "conflict",
                `The directory of '${name}' holds memory data but is not a custom agent (no config.yaml); it was kept.`
              )
            // a reserved name (`lead-agent`: the default agent's memory may be kept under it) is no custom agent to
            // delete: its directory is kept (409), as DeerFlow answers one without config.yaml, else there is none
            const reserved = path.agent_name.toLowerCase()
            if (CustomAgents.RESERVED_NAMES.has(reserved)) {
              const dir = Path.join(CustomAgents.agentsDir(home, user), reserved)
              return yield* (yield* exists(dir)) ? kept(reserved) : notFound(`Agent '${reserved}'`)
            }
            const name = yield* checkedName(path.agent_name)
            // (an agent's directory of another case, made before names were kept in lower case, is this agent)
            const where = yield* provided(CustomAgents.agentDir(home, user, name))
            const own = where.dir
            if (where.legacy) return yield* legacy(name)
            if (!(yield* exists(Path.join(own, CustomAgents.CONFIG_FILE)))) {
              return yield* (yield* exists(own)) ? kept(name) : notFound(`Agent '${name}'`)
            }
            // moved out of the agents directory first: no reader sees half an agent
            const gone = Path.join(CustomAgents.agentsDir(home, user), `.${name}.deleted-${Crypto.randomUUID()}`)
            yield* Effect.uninterruptible(
              Effect.zipRight(fs.rename(own, gone), fs.remove(gone, { recursive: true, force: true }))
            ).pipe(Effect.catchAll((cause) =>
              serverFault(
                `The agent ${name} could not be deleted`,
                `agents endpoint: cannot delete the agent ${name}`,
                cause
              )
            ))
            return HttpServerResponse.empty({ status: 204 })
          }))
    }))
