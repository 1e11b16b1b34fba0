/**
 * The endpoints over `extensions_config.json` (declared in `api/Extensions.ts`): its MCP servers and its skills'
 * states (a thread's MCP background tasks are `McpTasks.ts`'s).
 *
 * The file is every user's, so only an admin token or the open loopback gateway (the local user's) reads or
 * writes it (403 otherwise, DeerFlow's answer to a non-admin). Reading masks what may be secret, as DeerFlow
 * does: env and header values, URL passwords and secret-like query parameters, and every key named like a
 * secret (`token`, `api_key`, `password`...) are `"***"`; a `"***"` sent back keeps the stored value (a new key
 * given `"***"` is refused). A server whose launch changes (command, args, env), or that `PATCH` switches on, is
 * screened as DeerFlow screens API-managed servers (`McpLaunch`): a bare executable name among the allowed
 * launchers (`npx`, `uvx`, and those of `$DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST`), no argument that evaluates
 * code, no variable that injects it. What
 * is written decodes as the app reads it, fits in `MAX_CONFIG_BYTES`, keeps the file's other keys, and is
 * written whole (a temporary file renamed over it), one writer at a time. The MCP servers are then replaced in
 * the running app (`Mcp.Service.replace`): the next run's agent has the new servers' tools, no restart. The
 * MCP cache reset starts the file's servers again, as the file is now. How a server is shown is `McpShown`.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { MAX_CONFIG_BYTES } from "../../../layers/ConfigFile.js"
import * as ExtensionsFile from "../../../layers/ExtensionsFile.js"
import * as McpVariables from "../../../layers/mcp/Variables.js"
import * as SkillsDirectory from "../../../layers/SkillsDirectory.js"
import * as TextFile from "../../../layers/TextFile.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import { McpServerConfig, transportOf } from "../../../services/Extensions.js"
import { Mcp } from "../../../services/Mcp.js"
import { SandboxProvider, USER_DATA } from "../../../services/Sandbox.js"
import * as Json from "../../../state/Json.js"
import * as Redact from "../../../state/Redact.js"
import * as SkillArchive from "../../SkillArchive.js"
import * as ExtensionsApi from "../api/Extensions.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { describeParseError, fail, GatewayError, notFound, problemWithDetail, serverFault } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as Access from "./Access.js"
import { skillObject } from "./Catalog.js"
import { json } from "./Http.js"
import * as Live from "./Live.js"
import { LAUNCHERS, launchProblem } from "./McpLaunch.js"
import { isRecord, type Raw, restoreOAuthSecrets, shownServer, unmask } from "./McpShown.js"

/**
 * The fields of a server the settings page is given (DeerFlow's `McpServerConfigResponse`): one it leaves out of
 * a `PUT` takes its default; any other key the file has (`routing`, `tools`, `cwd`, a key of its own) is kept.
 */
const SHOWN_FIELDS: ReadonlySet<string> = new Set([
  "enabled", "type", "transport", "command", "args", "env", "url", "headers", "oauth", "description",
  "tool_name_prefix", "tool_call_timeout", "session_init_timeout", "task_toolsets"
])

/** What starts a server (as the app reads it): changed, it is screened again. */
const launchOf = (raw: unknown): string | undefined => {
  const decoded = Schema.decodeUnknownEither(McpServerConfig)(raw)
  if (Either.isLeft(decoded)) return undefined
  const server = decoded.right
  return JSON.stringify([transportOf(server), server.command, server.args, server.env, server.cwd])
}

/** Options of `layer`. */
export interface Options {
  /**
   * Whether the gateway is open: no tokens and no accounts (the loopback gateway, whose local user may change the
   * file). With accounts, anyone may register one: only an admin account may.
   */
  readonly open: boolean
  /** Told the secrets of the servers written (env and header values...), before they start. */
  readonly learnSecrets?: ((secrets: ReadonlyArray<string>) => void) | undefined
  /** The secrets the gateway hides (the servers' among them): none is in a server's status. */
  readonly redact?: Redact.Redactor | undefined
}

/** The extensions endpoints of `api` (DeerFlow's, under `/api`): MCP servers and skill states. */
export const layer = (api: DeerFlowApi, options: Options) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const app = yield* AppConfigService
    const current = yield* Live.config
    const fs = yield* FileSystem.FileSystem
    const mcp = yield* Effect.serviceOption(Mcp)
    // one writer of the file at a time (its MCP servers and its skill states are read, changed and written whole)
    const lock = yield* Effect.makeSemaphore(1)

    const adminOnly = (what: string) =>
      Effect.flatMap(CurrentIdentity, (identity) =>
        identity.admin || options.open
          ? Effect.void
          : Effect.fail(fail("forbidden", `Admin privileges required to manage ${what}.`)))

    const fileFailed = (what: string) => (cause: unknown) =>
      serverFault(`extensions_config.json ${what}`, `extensions endpoint: ${what}`, cause)

    const mcpFile = Effect.map(
      Effect.provideService(ExtensionsFile.resolvePath(app.source, app.home), FileSystem.FileSystem, fs),
      (found) => found ?? SkillsDirectory.extensionsConfigPath(app)
    )

    /** The file's JSON object ({} when there is none). */
    const readRaw = (file: string): Effect.Effect<Raw, GatewayError> =>
      Effect.suspend(() => {
        const read = TextFile.read(file, MAX_CONFIG_BYTES)
        if (Either.isLeft(read)) {
          return read.left.reason === "missing" ? Effect.succeed({}) : fileFailed("could not be read")(read.left)
        }
        try {
          const raw = Json.parse(read.right)
          return isRecord(raw) ? Effect.succeed(raw) : fileFailed("is not a JSON object")(undefined)
        } catch (cause) {
          return fileFailed("is not valid JSON")(cause)
        }
      })

    const writeRaw = (file: string, raw: Raw) =>
      Effect.gen(function*() {
        const text = `${JSON.stringify(raw, null, 2)}\n`
        if (Buffer.byteLength(text, "utf8") > MAX_CONFIG_BYTES) {
          return yield* fail(
            "unprocessable",
            `The configuration would be larger than ${TextFile.formatBytes(MAX_CONFIG_BYTES)}, the most Antler reads.`
          )
        }
        yield* ExtensionsFile.write(file, text).pipe(
          Effect.provideService(FileSystem.FileSystem, fs),
          Effect.catchAll(fileFailed("could not be written"))
        )
      })

    const serversOf = (raw: Raw): Raw => isRecord(raw.mcpServers) ? raw.mcpServers : {}

    const shownConfig = (raw: Raw) =>
      json(ExtensionsApi.McpConfig, {
        mcp_servers: Object.fromEntries(
          Object.entries(serversOf(raw)).filter(([, server]) => isRecord(server)).map((
            [name, server]
          ) => [name, shownServer(server as Raw)])
        )
      })

    /** The servers decoded as the app reads them, or 422 naming the server and the field. */
    const decodeServers = (servers: Raw) =>
      Effect.gen(function*() {
        const decoded: Record<string, McpServerConfig> = {}
        for (const [name, server] of Object.entries(servers)) {
          const result = Schema.decodeUnknownEither(McpServerConfig, { errors: "all" })(server)
          if (Either.isLeft(result)) {
            return yield* fail("unprocessable", `mcp_servers.${name}: ${describeParseError(result.left)}`)
          }
          decoded[name] = result.right
        }
        return decoded
      })

    const allowedLaunchers = Effect.map(
      Effect.orElseSucceed(Config.option(Config.string("DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST")), () => Option.none()),
      (extra) =>
        new Set([
          ...LAUNCHERS,
          ...Option.match(extra, {
            onNone: () => [],
            onSome: (list) => list.split(",").map((s) => s.trim()).filter((s) => s !== "")
          })
        ])
    )

    /** Refuses servers that change a task-enabled server's settings while the gateway runs (`TaskSnapshot`). */
    const unfrozen = (servers: Readonly<Record<string, McpServerConfig>>) => {
      const refused = Option.isSome(mcp) ? mcp.value.refusal?.(servers) : undefined
      return refused === undefined ? Effect.void : Effect.fail(fail("conflict", refused))
    }

    /** Writes the new servers and hands them to the running app. */
    const apply = (file: string, raw: Raw, servers: Raw) =>
      Effect.gen(function*() {
        const decoded = yield* decodeServers(servers)
        yield* unfrozen(decoded)
        const next = { ...raw, mcpServers: servers }
        yield* writeRaw(file, next)
        // (what the new servers say may hold their secrets: every redaction of the gateway hides them from now on)
        if (options.learnSecrets !== undefined) options.learnSecrets(yield* McpVariables.secrets(decoded))
        if (Option.isSome(mcp) && mcp.value.replace !== undefined) yield* mcp.value.replace(decoded)
        return next
      })

    /** The file's servers started again, as it is now (edited by hand since, or not): DeerFlow's cache reset. */
    const restart = Effect.gen(function*() {
      const decoded = yield* decodeServers(serversOf(yield* readRaw(yield* mcpFile)))
      yield* unfrozen(decoded)
      if (options.learnSecrets !== undefined) options.learnSecrets(yield* McpVariables.secrets(decoded))
      if (Option.isSome(mcp) && mcp.value.replace !== undefined) yield* mcp.value.replace(decoded)
    })

    const mcpGroup = HttpApiBuilder.group(api, "mcpConfig", (handlers) =>
      handlers
        .handleRaw("getMcpConfig", () =>
          Effect.gen(function*() {
            yield* adminOnly("MCP configuration")
            return shownConfig(yield* readRaw(yield* mcpFile))
          }))
        .handleRaw("putMcpConfig", () =>
          Effect.gen(function*() {
            yield* adminOnly("MCP configuration")
            const request = yield* Body.json(ExtensionsApi.McpConfig)
            const names = Object.keys(request.mcp_servers)
            if (names.length > ExtensionsApi.MAX_SERVERS) {
              return yield* fail("unprocessable", `mcp_servers: at most ${ExtensionsApi.MAX_SERVERS} servers.`)
            }
            const badName = names.find((name) => !ExtensionsApi.SERVER_NAME.test(name))
            if (badName !== undefined) {
              return yield* fail(
                "unprocessable",
                `mcp_servers: ${JSON.stringify(badName)} is not a server name (1-64 letters, digits, '_' or '-').`
              )
            }
            const allowed = yield* allowedLaunchers
            return yield* lock.withPermits(1)(Effect.gen(function*() {
              const file = yield* mcpFile
              const raw = yield* readRaw(file)
              const stored = serversOf(raw)
              const servers: Raw = {}
              for (const [name, incoming] of Object.entries(request.mcp_servers)) {
                const existing = isRecord(stored[name]) ? stored[name] as Raw : undefined
                const withSecrets = isRecord(incoming) && isRecord(incoming.oauth)
                  ? { ...incoming, oauth: restoreOAuthSecrets(incoming.oauth, existing?.oauth) }
                  : incoming
                const restored = unmask(withSecrets, existing, `mcp_servers.${name}`)
                if (Either.isLeft(restored)) return yield* restored.left
                const server = { ...(restored.right as Raw) }
                // (a command or URL shown unset, null, is none)
                for (const key of ["command", "url"]) if (server[key] === null) delete server[key]
                // DeerFlow shows `type`; a file that says `transport` keeps saying it
                if (existing !== undefined && "transport" in existing && !("transport" in server)) {
                  server.transport = server.type ?? existing.transport
                  delete server.type
                }
                // what the settings page does not show (routing, tools, `cwd`, keys of the file's own) is kept
                for (const key of Object.keys(existing ?? {})) {
                  if (!SHOWN_FIELDS.has(key) && !(key in server)) server[key] = existing![key]
                }
                servers[name] = server
              }
              const decoded = yield* decodeServers(servers)
              for (const [name, server] of Object.entries(decoded)) {
                const before = launchOf(stored[name])
                if (before !== undefined && launchOf(servers[name]) === before) continue
                const problem = launchProblem(name, server, allowed)
                if (problem !== undefined) return yield* fail("bad_request", problem)
              }
              return shownConfig(yield* apply(file, raw, servers))
            }))
          }))
        .handleRaw("patchMcpConfig", () =>
          Effect.gen(function*() {
            yield* adminOnly("MCP configuration")
            const request = yield* Body.json(ExtensionsApi.McpServerState)
            return yield* lock.withPermits(1)(Effect.gen(function*() {
              const file = yield* mcpFile
              const raw = yield* readRaw(file)
              const stored = serversOf(raw)
              const server = Object.hasOwn(stored, request.server_name) ? stored[request.server_name] : undefined
              if (!isRecord(server)) return yield* notFound(`MCP server '${request.server_name}'`)
              // (switched on, it is screened as a server set through the API is; switched off, never)
              if (request.enabled) {
                const decoded = Schema.decodeUnknownEither(McpServerConfig)(server)
                const problem = Either.isRight(decoded)
                  ? launchProblem(request.server_name, decoded.right, yield* allowedLaunchers)
                  : `MCP server '${request.server_name}' cannot be read: ${describeParseError(decoded.left)}`
                if (problem !== undefined) return yield* fail("bad_request", problem)
              }
              const servers = { ...stored, [request.server_name]: { ...server, enabled: request.enabled } }
              return shownConfig(yield* apply(file, raw, servers))
            }))
          }))
        .handleRaw("getMcpStatus", () =>
          Effect.gen(function*() {
            yield* adminOnly("MCP configuration")
            const servers = Option.isSome(mcp) ? yield* mcp.value.status : []
            const redact = options.redact ?? Redact.none
            return json(ExtensionsApi.McpStatus, {
              mcp_servers: servers.map((server) => ({
                name: server.name,
                type: server.transport,
                enabled: server.enabled,
                state: server.state,
                tools: server.tools,
                starts: server.starts,
                // (a server's refusal or stderr may repeat what it was given: its env and header values, a token)
                problems: server.problems.map((problem) => Redact.url(redact.text(problem)))
              }))
            })
          }))
        .handleRaw("resetMcpCache", () =>
          Effect.gen(function*() {
            yield* adminOnly("MCP configuration")
            yield* lock.withPermits(1)(restart)
            return json(ExtensionsApi.McpCacheReset, {
              success: true,
              message: "MCP tools cache reset. Tools will reload on next use."
            })
          })))

    const skillsGroup = HttpApiBuilder.group(api, "skillStates", (handlers) =>
      Effect.map(Effect.zip(Access.make, SandboxProvider), ([access, sandboxes]) =>
      handlers.handleRaw("installSkill", () =>
        Effect.gen(function*() {
          yield* adminOnly("skills")
          const request = yield* Body.json(ExtensionsApi.SkillInstall)
          const { user } = yield* CurrentIdentity
          const { stored } = yield* access.threadRef(user, request.thread_id)
          const virtual = `/${request.path.replace(/^\/+/, "")}`
          if (!virtual.startsWith(`${USER_DATA}/`)) {
            return yield* fail("not_found", `File not found: a .skill file is a file under ${USER_DATA}.`)
          }
          const sandbox = yield* Effect.mapError(
            sandboxes.acquire(stored, user),
            (error) => fail("internal", error.message)
          )
          const host = yield* Effect.mapError(sandbox.resolve(virtual, "read"), () => notFound(`File ${virtual}`))
          const installed = yield* lock.withPermits(1)(
            SkillArchive.install(
              host,
              SkillsDirectory.location(app).path,
              new Set(SkillsDirectory.catalogOf(app).skills.map((skill) => skill.name)),
              // (`skill_scan` as `config.yaml` is at the request: an edit the gateway took)
              { scan: (yield* current).config.skill_scan.enabled }
            )
          ).pipe(Effect.catchAll((error) => {
            switch (error.reason) {
              case "invalid":
                // what SkillScan blocked: DeerFlow's detail object {message, skill_name, findings}
                return error.findings === undefined
                  ? Effect.fail(fail("bad_request", error.message))
                  : Effect.succeed(problemWithDetail(400, {
                    message: error.message,
                    skill_name: error.skill_name ?? null,
                    findings: error.findings
                  }))
              case "not_found":
                // DeerFlow's 404 `Skill file not found: <path>`, with the path the client gave
                return Effect.fail(fail("not_found", `Skill file not found: ${virtual}`))
              case "exists":
                return Effect.fail(fail("conflict", error.message))
              case "io":
                return Effect.zipRight(
                  Effect.logError(`skill install: ${error.message}`, error.cause),
                  Effect.fail(fail("internal", `${error.message} (see the server's log)`))
                )
              case "missing_package":
                // the server lacks an optional package: its operator is told what to install, as the client is
                return Effect.zipRight(
                  Effect.logError(`skill install: ${error.message}`),
                  Effect.fail(fail("internal", error.message))
                )
            }
          }))
          if (HttpServerResponse.isServerResponse(installed)) return installed
          return json(ExtensionsApi.SkillInstalled, {
            success: true,
            skill_name: installed.name,
            message: `Skill '${installed.name}' installed successfully`
          })
        }))
      .handleRaw("reloadSkills", () =>
        // DeerFlow drops its skill caches; Antler keeps none across runs (an agent is built again when a SKILL.md
        // or a skill state changed), so the next runs read the skills as they are now, as promised
        Effect.as(
          adminOnly("skills"),
          json(ExtensionsApi.SkillReload, {
            success: true,
            scope: "process",
            message: "Skill caches invalidated; subsequent runs in this Gateway process will rescan the latest skills."
          })
        ))
      .handleRaw("putSkill", ({ path }) =>
        Effect.gen(function*() {
          yield* adminOnly("skills")
          const request = yield* Body.json(ExtensionsApi.SkillState)
          const name = path.skill_name
          const found = SkillsDirectory.catalogOf(app).skills.find((skill) => skill.name === name)
          if (found === undefined) return yield* notFound(`Skill '${name}'`)
          yield* lock.withPermits(1)(Effect.gen(function*() {
            // where the skills' states are read (see `SkillsDirectory.readStates`)
            const file = yield* mcpFile
            const raw = yield* readRaw(file)
            const skills = isRecord(raw.skills) ? raw.skills : {}
            const entry = isRecord(skills[name]) ? skills[name] as Raw : {}
            yield* writeRaw(file, { ...raw, skills: { ...skills, [name]: { ...entry, enabled: request.enabled } } })
          }))
          const skill = SkillsDirectory.catalogOf(app).skills.find((s) => s.name === name) ?? found
          return json(ExtensionsApi.SkillObject, skillObject(skill))
        }))))

    return Layer.mergeAll(mcpGroup, skillsGroup)
  }))
