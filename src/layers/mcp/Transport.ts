/**
 * How the MCP client reaches a server: the SDK (an optional package, loaded when a server first starts), its
 * transport for the server's kind (a stdio child process, started with a parent-death signal when there is one;
 * streamable HTTP; SSE, with the configured headers on the event stream too; over HTTP and SSE, an OAuth token on
 * every request when the server has one, `OAuth.ts`), each message it sends bounded as it arrives (`Bounds.ts`;
 * past the bound, the connection is ended), and the ending of a stdio server's process when a start is given up.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { FetchLike, Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { ChildProcess } from "node:child_process"
import { EventEmitter } from "node:events"
import type { McpServerConfig } from "../../services/Extensions.js"
import * as ParentDeath from "../ParentDeath.js"
import { boundedFetch, LineBuffer, type Limit } from "./Bounds.js"
import type { TokenSource } from "./OAuth.js"
import { authorizedFetch } from "./OAuth.js"

/** The MCP SDK: an optional package (a missing one fails a server's start, naming it). */
export const MCP_SDK = "@modelcontextprotocol/sdk"

/** The SDK's client and transports, loaded when a server first starts (an app without MCP servers never does). */
export const loadSdk = () =>
  Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/sse.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/shared/stdio.js")
  ]).then(([client, sse, stdio, http, lines]) => ({
    Client: client.Client,
    SSEClientTransport: sse.SSEClientTransport,
    StdioClientTransport: stdio.StdioClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    deserializeMessage: lines.deserializeMessage
  }))

/** The loaded SDK. */
export type Sdk = Awaited<ReturnType<typeof loadSdk>>

/** A server being started: its client, and the process the stdio transport spawned for it (once it has). */
export interface Start {
  readonly client: Client
  child: ChildProcess | undefined
}

/**
 * Ends a process of ours: SIGTERM, then SIGKILL if it is still there after a second. Resolves when it has exited
 * (or two seconds at most).
 */
export const terminate = (child: ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(hard)
      clearTimeout(last)
      resolve()
    }
    child.once("exit", done)
    const hard = setTimeout(() => child.kill("SIGKILL"), 1000)
    const last = setTimeout(done, 2000)
    child.kill("SIGTERM")
  })
}

/**
 * The transport to a server (`entry`, its `$VAR`s resolved) of the given kind. A stdio server's process is
 * recorded in `start` once spawned, and its stderr handed to `onStderr`. An HTTP or SSE server's requests carry
 * `tokens`' `Authorization` header when it has OAuth. A message over `limit` (a stdio line, an HTTP body, an
 * event) is dropped as it arrives, `limit.onOversize` is told, and the connection ends: a stdio server's output
 * is no longer read and its process is ended, an HTTP or SSE transport is closed (its calls under way fail).
 */
export const makeTransport = (
  sdk: Sdk,
  kind: "stdio" | "sse" | "http",
  entry: McpServerConfig,
  start: Start,
  wrapper: ParentDeath.Wrapper,
  onStderr: (text: string) => void,
  limit: Limit,
  tokens?: TokenSource | undefined
): Transport => {
  if (kind === "stdio") {
    const env = { ...sdk.getDefaultEnvironment(), ...entry.env }
    const { args, command } = ParentDeath.wrap(wrapper, entry.command!, entry.args, {
      path: env.PATH,
      cwd: entry.cwd ?? process.cwd()
    })
    const transport = new sdk.StdioClientTransport({
      command,
      args: [...args],
      env: { ...entry.env },
      ...(entry.cwd !== undefined ? { cwd: entry.cwd } : {}),
      stderr: "pipe"
    })
    transport.stderr?.on("data", (chunk: Buffer) => onStderr(chunk.toString("utf8")))
    // The SDK's read buffer holds a line whole until its end (up to 10 MiB, then it only closes stdin and waits):
    // this one skips a line past the bound as it streams, and ends the process at once, so the calls under way
    // fail while the server is still writing. (A private field, as `_process` below: checked before it is set.)
    const buffer = new LineBuffer({
      ...limit,
      onOversize: (message) => {
        limit.onOversize(message)
        const child = start.child
        if (child !== undefined) {
          child.stdout?.destroy()
          void terminate(child)
        }
      }
    }, sdk.deserializeMessage)
    const internals = transport as unknown as { _readBuffer?: { readonly append?: unknown } }
    if (typeof internals._readBuffer?.append === "function") internals._readBuffer = buffer
    // The process, kept to end it when a start is given up. The SDK's own close, which the client calls
    // when its handshake fails, waits up to 4 s for the process to exit, on timers that do not keep Node
    // alive: an app that exits sooner leaves the server running. (Read off the transport once it has
    // spawned: the SDK does not hand the process out.)
    const spawn = transport.start.bind(transport)
    transport.start = async () => {
      await spawn()
      const child = (transport as unknown as { readonly _process?: unknown })._process
      if (child instanceof EventEmitter && typeof (child as ChildProcess).kill === "function") {
        start.child = child as ChildProcess
      }
    }
    return transport
  }
  const url = new URL(entry.url!)
  const requestInit = { headers: { ...entry.headers } }
  let closing: Transport | undefined
  // (past the bound the transport is closed: a response's call fails at once, an event's has no other way to)
  const base: FetchLike = boundedFetch(tokens === undefined ? fetch : authorizedFetch(tokens), {
    ...limit,
    onOversize: (message) => {
      limit.onOversize(message)
      void closing?.close().catch(() => undefined)
    }
  })
  const transport = kind === "sse"
    ? new sdk.SSEClientTransport(url, {
      requestInit,
      fetch: base,
      // The event stream is opened by its own fetch: the configured headers go there too.
      eventSourceInit: {
        fetch: (input, init) => {
          const headers = new Headers(init?.headers)
          for (const [name, value] of Object.entries(entry.headers)) if (!headers.has(name)) headers.set(name, value)
          return base(input, { ...init, headers })
        }
      }
    })
    : new sdk.StreamableHTTPClientTransport(url, { requestInit, fetch: base })
  closing = transport
  return transport
}
