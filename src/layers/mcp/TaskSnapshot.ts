/**
 * DeerFlow's freeze of its task-enabled MCP servers (`set_mcp_task_config_snapshot`,
 * `validate_mcp_task_config_snapshot`): the settings of the enabled servers with `task_toolsets`, taken when the
 * gateway starts, may not change while it runs, or the tools the agents are offered would be split from the
 * servers the background tasks are polled and cancelled on. What counts is each such server's entry without what
 * only presents its tools (`description`, `routing`, `tools`, `tool_name_prefix`); a task-enabled server added,
 * removed, switched on or off counts too. DeerFlow fails the next agent's tool loading with its message; Antler
 * refuses the edit itself with the same words (see `refusal`), the running servers untouched.
 */
import type { McpServerConfig } from "../../services/Extensions.js"

/** The fields of an entry that only present its tools (DeerFlow's `presentation_field`s). */
const PRESENTATION: ReadonlySet<string> = new Set(["description", "routing", "tools", "tool_name_prefix"])

/** DeerFlow's `DEFAULT_MCP_SESSION_INIT_TIMEOUT`, the seconds a server has to start (McpClient's default too). */
const DEFAULT_SESSION_INIT_TIMEOUT = 60

/**
 * A value as JSON with every object's keys sorted and its null fields left out (the settings page writes an unset
 * field back as null): two entries that say the same compare equal.
 */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
        Object.entries(v as Record<string, unknown>)
          .filter(([, field]) => field !== null && field !== undefined)
          .sort(([a], [b]) => (a < b ? -1 : 1))
      )
      : v)

/** The snapshot of `servers`: each enabled task-enabled server's entry (presentation left out), canonical. */
export type Snapshot = ReadonlyMap<string, string>

/** The snapshot of `servers` (DeerFlow's `_task_server_configs`). */
export const of = (servers: Readonly<Record<string, McpServerConfig>>): Snapshot => {
  const out = new Map<string, string>()
  for (const [name, server] of Object.entries(servers)) {
    if (server.enabled === false || (server.task_toolsets ?? []).length === 0) continue
    const runtime = Object.fromEntries(
      Object.entries(server).filter(([key, value]) => !PRESENTATION.has(key) && value !== null && value !== undefined)
    )
    // (DeerFlow's model has its default in place of an unset one, as the settings page writes it back)
    out.set(name, canonical({ session_init_timeout: DEFAULT_SESSION_INIT_TIMEOUT, ...runtime }))
  }
  return out
}

/** The task-enabled servers whose settings differ between two snapshots, sorted. */
export const changed = (startup: Snapshot, current: Snapshot): ReadonlyArray<string> =>
  [...new Set([...startup.keys(), ...current.keys()])].filter((name) => startup.get(name) !== current.get(name)).sort()

/** DeerFlow's message, naming the servers (Antler in DeerFlow's place). */
export const message = (names: ReadonlyArray<string>): string =>
  `MCP task-enabled server configuration changed after Gateway startup (${names.join(", ") || "<unknown>"}); ` +
  "restart Antler before using durable task tools"

/** Why `servers` may not replace the servers of a gateway that started with `startup` (none: they may). */
export const refusal = (startup: Snapshot, servers: Readonly<Record<string, McpServerConfig>>): string | undefined => {
  const names = changed(startup, of(servers))
  return names.length === 0 ? undefined : message(names)
}
