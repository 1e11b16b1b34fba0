/**
 * Finding and reading DeerFlow's `extensions_config.json` (its MCP servers), and the app's MCP service over it.
 *
 * The file is `$ANTLER_EXTENSIONS_CONFIG`, else `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`, else `extensions_config.json`
 * (then `mcp_config.json`, DeerFlow's older name) beside the `config.yaml` in use, else in the working
 * directory, else in `$ANTLER_HOME` (where the gateway writes it when no config file is in use). A file named by
 * a variable must exist; none found means no MCP servers. It is read when the app starts; the gateway's MCP
 * settings, which write it, replace the servers (`McpReloadable`).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import { AppConfigService } from "../services/AppConfig.js"
import { ExtensionsConfig } from "../services/Extensions.js"
import { Mcp } from "../services/Mcp.js"
import { ConfigError, MAX_CONFIG_BYTES, readConfigText, schemaIssues } from "./ConfigFile.js"
import type * as McpClient from "./McpClient.js"
import * as McpReloadable from "./McpReloadable.js"
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
 * The app's MCP service from its extensions file (found beside the loaded `config.yaml`). Servers start when
 * their tools are first asked for and stop when the layer is released.
 */
export const layer = (
  options: Omit<McpClient.Options, "servers"> = {}
): Layer.Layer<Mcp, ConfigError, AppConfigService | FileSystem.FileSystem> =>
  Layer.scoped(
    Mcp,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const { config } = yield* find(app.source, app.home)
      return yield* McpReloadable.make({ ...options, servers: config.mcpServers })
    })
  )
