/**
 * DeerFlow's start-up check of its MCP task runtime (`validate_mcp_task_runtime_configuration`): a server of
 * `extensions_config.json` with `task_toolsets` needs `mcp_tasks.enabled: true` in `config.yaml`, or its submit tools
 * would answer nothing but "not initialized". `antler serve` and `antler run` refuse to start on it. DeerFlow's other
 * condition (a SQL database, not its memory backend) always holds: the tasks are kept beside the threads, in SQLite
 * or PostgreSQL.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as ExtensionsFile from "../layers/ExtensionsFile.js"
import type { AppConfigService } from "../services/AppConfig.js"
import type { McpServerConfig } from "../services/Extensions.js"

/** The enabled servers that configure `task_toolsets`, by name. */
export const taskServers = (servers: Readonly<Record<string, McpServerConfig>>): ReadonlyArray<string> =>
  Object.entries(servers)
    .filter(([, config]) => config.enabled !== false && (config.task_toolsets ?? []).length > 0)
    .map(([name]) => name)
    .sort()

/**
 * Why the configuration cannot start (DeerFlow's words, then where and how to fix it), or undefined. `source`:
 * the extensions file the servers come from.
 */
export const problem = (
  enabled: boolean,
  servers: Readonly<Record<string, McpServerConfig>>,
  source?: string
): string | undefined => {
  const names = taskServers(servers)
  if (enabled || names.length === 0) return undefined
  const where = source === undefined ? "extensions_config.json" : source
  return "MCP task_toolsets are configured, so mcp_tasks.enabled=true is required; Antler will not silently " +
    `expose these tools as synchronous calls (${where}: mcpServers ${names.map((name) => `'${name}'`).join(", ")} ` +
    "configure task_toolsets). Set mcp_tasks.enabled: true in config.yaml, or remove those servers' task_toolsets " +
    "(or set their enabled: false)."
}

/**
 * The problem of `app` with its extensions file; none when the file cannot be read (the commands that read it
 * report that themselves).
 */
export const check = (
  app: AppConfigService["Type"]
): Effect.Effect<string | undefined, never, FileSystem.FileSystem> =>
  ExtensionsFile.find(app.source, app.home).pipe(
    Effect.map(({ config, source }) => problem(app.config.mcp_tasks.enabled, config.mcpServers, source)),
    Effect.orElseSucceed(() => undefined)
  )
