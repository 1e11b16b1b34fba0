/**
 * `mcp_tasks`: DeerFlow's durable MCP task runtime (`McpTasksConfig`), with its keys, defaults and bounds. Off by
 * default; on, the gateway keeps the MCP tools configured as `task_toolsets` (in `extensions_config.json`) running
 * in the background and polls them (see `programs/gateway/mcptasks`).
 */
import * as Schema from "effect/Schema"
import { withDefault } from "./Fields.js"

const between = (low: number, high: number) => Schema.Number.pipe(Schema.int(), Schema.between(low, high))

/** DeerFlow's `mcp_tasks` section. */
export const McpTasksConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  /** Seconds between the poller's passes (and the base of its backoff). */
  poll_interval_seconds: withDefault(between(1, 300), () => 5),
  /** Seconds a process holds a task it polls or cancels before another may take it. */
  lease_seconds: withDefault(between(5, 3600), () => 120),
  /** Tasks polled (and cancelled) at once in one pass. */
  max_concurrent_polls: withDefault(between(1, 64), () => 8),
  /** The longest wait before polling a task again after failed polls. */
  max_poll_backoff_seconds: withDefault(between(1, 3600), () => 300),
  /** The shortest wait between polls of a task waiting for input. */
  input_required_poll_interval_seconds: withDefault(between(5, 3600), () => 60),
  /** Failed polls in a row after which a task's tracking is `tracking_degraded`. */
  tracking_degraded_after_errors: withDefault(between(1, 100), () => 3),
  /** A result whose JSON is larger is not kept: a preview of it is (`result_preview`, `result_truncated`). */
  max_result_bytes: withDefault(between(1024, 10_485_760), () => 65_536),
  /** Characters of that preview. */
  result_preview_max_chars: withDefault(between(64, 100_000), () => 2_000),
  /**
   * Events of one task told by a run at most (Antler's: DeerFlow tells every changed event, so a server asking a
   * new question at each poll had a run of the user's model every `input_required_poll_interval_seconds`, without
   * end); past it an event that does not end the task is given up, saying so. The task's end is always told.
   */
  max_notifications_per_task: withDefault(between(1, 1000), () => 20)
})
export type McpTasksConfig = typeof McpTasksConfig.Type
