/**
 * The options of the MCP service (`McpClient.make`): its servers, its timeouts and bounds, and where a scope's
 * stdio servers run (`Workspace`).
 */
import type { McpServerConfig } from "../../services/Extensions.js"
import type { SessionScope } from "../../services/Mcp.js"
import type { Redactor } from "../../state/Redact.js"
import type * as WorkspaceFiles from "./WorkspaceFiles.js"

/** Options of the service. */
export interface Options {
  /** The servers, by name (`mcpServers` of `extensions_config.json`, decoded). */
  readonly servers: Readonly<Record<string, McpServerConfig>>
  /** Starting a server and its handshake, when the server sets no `session_init_timeout`. Default 60 s, DeerFlow's. */
  readonly initTimeoutMs?: number | undefined
  /** One tool call, when the server sets no `tool_call_timeout`. Default 300 s. */
  readonly callTimeoutMs?: number | undefined
  /** A server that failed to start is not tried again for this long. Default 30 s. */
  readonly retryAfterMs?: number | undefined
  /** The client's name in the MCP handshake. */
  readonly clientName?: string | undefined
  /** The `setpriv` giving stdio servers a parent-death signal (default: found on PATH); `false`: none. */
  readonly setpriv?: string | false | undefined
  /**
   * The sessions kept at once for scoped calls (a run's thread each), over all servers; the least recently used
   * one past it is closed (its stdio process ends). Default 256, DeerFlow's `MCPSessionPool.MAX_SESSIONS`.
   */
  readonly maxSessions?: number | undefined
  /**
   * The sessions one user keeps at once (default 16): past it, that user's least recently used one is closed, so
   * one user's many threads can neither start processes without end nor push another user's sessions out.
   */
  readonly maxSessionsPerUser?: number | undefined
  /**
   * The bound on one message a server sends (a stdio line, an HTTP body, an event), applied as it arrives: past it,
   * the message is dropped unread, the calls under way on that connection fail saying so, and the connection is
   * ended (started again by the next call). Default 16 MiB.
   */
  readonly maxMessageBytes?: number | undefined
  /**
   * Where a scope's stdio servers run (DeerFlow's pinning): the working directory of its process (unless the
   * server sets `cwd`) and the temporary directory given as `TMPDIR`/`TMP`/`TEMP` (unless its `env` sets them),
   * both made when its session starts; `rewrite` turns the host paths its results name into the ones the model
   * knows, and `files` the thread's files they name by a relative path or a bare file name (`WorkspaceFiles`).
   * Without it (or without a workspace for the scope), a scope's process starts where the server's configuration
   * says.
   */
  readonly workspace?: ((scope: SessionScope) => Workspace | undefined) | undefined
  /**
   * The process's own secrets (`ProcessSecrets`: another server's env value, a model's key), hidden in a failed
   * start's or listing's error (its stderr as it arrives) before its cut: a server is shared by runs, so no run's
   * context is there to give them. Default: none.
   */
  readonly redact?: Redactor | undefined
}

/** A scope's place for its stdio servers' processes (`Options.workspace`). */
export interface Workspace {
  readonly cwd: string
  readonly tmp: string
  readonly rewrite: (text: string) => string
  /** The thread's files, for the relative paths and bare file names its results name (none: host paths only). */
  readonly files?: WorkspaceFiles.Place | undefined
}
