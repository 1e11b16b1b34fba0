/**
 * Finding, reading and writing DeerFlow's `extensions_config.json` (its MCP servers), and the app's MCP service
 * over it.
 *
 * The file is `$ANTLER_EXTENSIONS_CONFIG`, else `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`, else `extensions_config.json`
 * (then `mcp_config.json`, DeerFlow's older name) beside the `config.yaml` in use, else in the working
 * directory, else in `$ANTLER_HOME` (where the gateway writes it when no config file is in use). A file named by
 * a variable must exist; none found means no MCP servers. It is read when the app starts, and again when it
 * changed (see `layer`); the gateway's MCP settings, which write it, replace the servers (`McpReloadable`).
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AppConfigService } from "../services/AppConfig.js"
import type { McpServerConfig } from "../services/Extensions.js"
import { ExtensionsConfig } from "../services/Extensions.js"
import type { SessionScope } from "../services/Mcp.js"
import { Mcp } from "../services/Mcp.js"
import { isSafeId, threadPaths, USER_DATA } from "../services/Sandbox.js"
import { ConfigError, MAX_CONFIG_BYTES, readConfigText, schemaIssues } from "./ConfigFile.js"
import type * as McpClient from "./McpClient.js"
import * as McpReloadable from "./McpReloadable.js"
import { writeTextAtomic } from "./memory/AtomicFile.js"
import * as TaskSnapshot from "./mcp/TaskSnapshot.js"
import { secrets as serverSecrets } from "./mcp/Variables.js"
import * as Json from "../state/Json.js"

const NAMES = ["extensions_config.json", "mcp_config.json"]

const variable = (name: string) =>
  Config.option(Config.string(name)).pipe(
    Effect.map((value) => Option.filter(value, (v) => v.trim() !== "")),
    Effect.orElseSucceed(() => Option.none<string>())
  )

/** Where the extensions file is (see the module header), or undefined when there is none. */
export const resolvePath = (
  configSource: string | undefined,
  home?: string
): Effect.Effect<string | undefined, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    for (const name of ["ANTLER_EXTENSIONS_CONFIG", "DEER_FLOW_EXTENSIONS_CONFIG_PATH"]) {
      const value = yield* variable(name)
      if (Option.isSome(value)) return Path.resolve(value.value)
    }
    const dirs = [
      ...(configSource !== undefined ? [Path.dirname(configSource)] : []),
      process.cwd(),
      ...(home !== undefined ? [home] : [])
    ]
    for (const dir of dirs) {
      for (const name of NAMES) {
        const file = Path.join(dir, name)
        if (yield* Effect.orElseSucceed(fs.exists(file), () => false)) return file
      }
    }
    return undefined
  })

/** Decodes the file's text; a bad file is a `ConfigError` naming each bad key. */
export const decode = (text: string, file: string): Either.Either<ExtensionsConfig, ConfigError> => {
  let raw: unknown
  try {
    raw = Json.parse(text)
  } catch (cause) {
    return Either.left(new ConfigError({
      reason: "syntax",
      file,
      issues: [{ path: "", message: `not valid JSON (${cause instanceof Error ? cause.message : String(cause)})` }]
    }))
  }
  return Either.mapLeft(
    Schema.decodeUnknownEither(ExtensionsConfig, { errors: "all" })(raw),
    (error) => new ConfigError({ reason: "schema", file, issues: schemaIssues(error) })
  )
}

/** Reads the extensions file at `file`. */
export const load = (file: string): Effect.Effect<ExtensionsConfig, ConfigError> =>
  Effect.flatMap(readConfigText(file, MAX_CONFIG_BYTES), (text) => decode(text, file))

/** The extensions of an app: the file's content and where it came from (empty when there is no file). */
export const find = (
  configSource: string | undefined,
  home?: string
): Effect.Effect<
  { readonly config: ExtensionsConfig; readonly source: string | undefined },
  ConfigError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const file = yield* resolvePath(configSource, home)
    if (file === undefined) return { config: { mcpServers: {} }, source: undefined }
    return { config: yield* load(file), source: file }
  })

/**
 * Writes the extensions file whole, as DeerFlow's `atomic_write_extensions_config`: flushed and renamed over the
 * file, so a failed write leaves it as it was and no temporary file beside it. A symbolic link at `file` stays a
 * link, the file it names written (a dangling one is replaced by the file); the file keeps its permissions, and a
 * new one is its owner's only (0600: it holds the MCP servers' secrets).
 */
export const write = (file: string, text: string): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const linked = Effect.zipRight(fs.readLink(file), fs.realPath(file))
    const target = yield* Effect.orElseSucceed(linked, () => file)
    const mode = yield* fs.stat(target).pipe(
      Effect.map((info) => info.mode & 0o777),
      Effect.orElseSucceed(() => undefined)
    )
    yield* writeTextAtomic(target, text, mode)
  })

/** What the extensions file says now: where it is and its text (undefined: no file, or it cannot be read). */
const snapshot = (configSource: string | undefined, home: string | undefined) =>
  Effect.flatMap(resolvePath(configSource, home), (file) =>
    file === undefined
      ? Effect.succeed(undefined)
      : Effect.match(readConfigText(file, MAX_CONFIG_BYTES), {
        onFailure: () => undefined,
        onSuccess: (text) => ({ file, text })
      }))

/** Where a thread's stdio MCP processes keep their temporary files: under its workspace, as DeerFlow's. */
export const MCP_TMP_SUBDIR = ".mcp/tmp"

/**
 * A thread's place for its stdio MCP servers' processes (DeerFlow's pinning): its workspace as their working
 * directory, `.mcp/tmp` in it as their temporary directory (so what they save lands where the thread's files are
 * served, and `.mcp` is left out of its changes), and the host paths of its files in their results named as the
 * model knows them (`/mnt/user-data/...`), as are the files named by a path relative to the process's working
 * directory or by the bare name of a file the call wrote (`WorkspaceFiles`). None for ids that are not one path
 * segment each (`SafeId`).
 */
export const workspaceOf = (home: string, scope: SessionScope): McpClient.Workspace | undefined => {
  // (ids that are not one path segment each have no workspace: the sandbox refuses them too)
  if (!isSafeId(scope.userId) || !isSafeId(scope.threadId)) return undefined
  const paths = threadPaths(home, scope.userId, scope.threadId)
  const roots = [paths.root]
  let resolved = false
  return {
    cwd: paths.workspace,
    tmp: `${paths.workspace}/${MCP_TMP_SUBDIR}`,
    files: { root: paths.root, virtual: USER_DATA, workspace: paths.workspace },
    rewrite: (text) => {
      if (!resolved) {
        resolved = true
        try {
          const real = Fs.realpathSync(paths.root)
          if (real !== paths.root) roots.push(real)
        } catch {
          // not made yet: its path is the one written
        }
      }
      let out = text
      for (const root of roots) out = out.replaceAll(`${root}/`, `${USER_DATA}/`).replaceAll(root, USER_DATA)
      return out
    }
  }
}

/** Keys of config.yaml's `extensions` block that DeerFlow reads and Antler takes from the extensions file only. */
const YAML_ONLY_IN_FILE: ReadonlyArray<string> = ["mcpServers", "mcp_servers", "skills"]

/** How often, at most, a hand edit of the extensions file is looked for (when the next agent is built). */
export const RECHECK_MS = 2_000

/**
 * The app's MCP service from its extensions file (found beside the loaded `config.yaml`). Servers start when
 * their tools are first asked for and stop when the layer is released. The file edited by hand (or another file
 * found in its place) while the app runs is read again when the next agent is built (DeerFlow's stale-cache
 * check, on the file's content), at most once every `recheckMs` (default `RECHECK_MS`): its servers replace the
 * old ones. A file that no longer decodes keeps the servers, with a warning; a file removed keeps them too.
 * `learnSecrets` is told the secrets of an edited file's servers before any of them starts (a growing redactor's
 * `learn`: what the servers echo is hidden as the secrets of the servers of the start are).
 */
export const layer = (
  options: Omit<McpClient.Options, "servers"> & {
    readonly recheckMs?: number
    readonly learnSecrets?: ((secrets: ReadonlyArray<string>) => void) | undefined
    /**
     * Whether the task-enabled servers' settings stay as they started (`antler serve`, as DeerFlow's gateway): an
     * edit of them is refused (`Mcp.Service.refusal`), and a hand edit of the file making one is not taken.
     */
    readonly freezeTaskServers?: boolean | undefined
  } = {}
): Layer.Layer<Mcp, ConfigError, AppConfigService | FileSystem.FileSystem> =>
  Layer.scoped(
    Mcp,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const fs = yield* FileSystem.FileSystem
      const { config, source } = yield* find(app.source, app.home)
      if (config.mcpInterceptors !== undefined && config.mcpInterceptors !== null) {
        yield* Effect.logWarning(
          `${source}: mcpInterceptors is not read: Antler cannot load DeerFlow's Python interceptors (MCP calls go ` +
            "out without them)"
        )
      }
      // DeerFlow lets config.yaml's `extensions` block set the MCP servers and skill states too; Antler reads them
      // from the extensions file only, and says so rather than drop them silently
      const inYaml = Object.keys(app.config.extensions ?? {}).filter((key) => YAML_ONLY_IN_FILE.includes(key))
      if (inYaml.length > 0) {
        const keys = inYaml.map((key) => `extensions.${key}`).join(", ")
        yield* Effect.logWarning(
          `${app.source ?? "config.yaml"}: ${keys} ${inYaml.length === 1 ? "is" : "are"} not read: Antler reads MCP ` +
            `servers and skill states from ${source ?? "extensions_config.json"} (move them there)`
        )
      }
      const { learnSecrets, recheckMs = RECHECK_MS, freezeTaskServers, ...clientOptions } = options
      const startup = TaskSnapshot.of(config.mcpServers)
      const refusal = freezeTaskServers === true
        ? (servers: Readonly<Record<string, McpServerConfig>>) => TaskSnapshot.refusal(startup, servers)
        : undefined
      const service = yield* McpReloadable.make({
        workspace: (scope) => workspaceOf(app.home, scope),
        ...clientOptions,
        servers: config.mcpServers
      })
      const now = snapshot(app.source, app.home).pipe(Effect.provideService(FileSystem.FileSystem, fs))
      let seen = yield* now
      const lock = yield* Effect.makeSemaphore(1)
      const replace = service.replace!
      // (the file edited since it was last seen: its servers, once; a bad file warns once. Read at most once a
      // `recheckMs`: under load every run would otherwise read it, one at a time, before its agent is built)
      let checkedAt = Number.NEGATIVE_INFINITY
      const due = Effect.map(Clock.currentTimeMillis, (at) => {
        if (at - checkedAt < recheckMs) return false
        checkedAt = at
        return true
      })
      const refresh = Effect.flatMap(due, (go) => !go ? Effect.void : lock.withPermits(1)(Effect.gen(function*() {
        const current = yield* now
        if (current === undefined || (current.file === seen?.file && current.text === seen.text)) return
        seen = current
        const decoded = decode(current.text, current.file)
        if (Either.isLeft(decoded)) {
          return yield* Effect.logWarning(
            `${current.file} changed but was not taken, the MCP servers stay as they were: ${decoded.left.message}`
          )
        }
        const refused = refusal?.(decoded.right.mcpServers)
        if (refused !== undefined) {
          return yield* Effect.logWarning(
            `${current.file} changed but was not taken, the MCP servers stay as they were: ${refused}`
          )
        }
        if (learnSecrets !== undefined) learnSecrets(yield* serverSecrets(decoded.right.mcpServers))
        yield* replace(decoded.right.mcpServers)
      })))
      return {
        ...service,
        refusal,
        revision: Effect.zipRight(refresh, service.revision!),
        // (the gateway writes the file, then replaces the servers: what it wrote is seen)
        replace: (servers) =>
          lock.withPermits(1)(Effect.zipRight(replace(servers), Effect.flatMap(now, (s) => Effect.sync(() => {
            seen = s
          }))))
      } satisfies Mcp["Type"]
    })
  )
