/**
 * The app's MCP connections over servers that may be replaced while the app runs (the gateway's MCP settings
 * write `extensions_config.json`): an `McpClient` per revision, in a scope of its own. `replace` makes the next
 * revision's client and stops the previous one's servers; what asks after that (the next run's agent, which the
 * factory builds again for the new revision) gets the new servers' tools. A call made through an older agent to a
 * server that is gone answers as a call to a server that is not configured.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import type * as Scope from "effect/Scope"
import * as ScopeApi from "effect/Scope"
import type { McpServerConfig } from "../services/Extensions.js"
import type { Service } from "../services/Mcp.js"
import * as McpClient from "./McpClient.js"

/** The MCP service over `options.servers`, replaceable (see the module header). */
export const make = (options: McpClient.Options): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const lock = yield* Effect.makeSemaphore(1)
    const open = (servers: Readonly<Record<string, McpServerConfig>>) =>
      Effect.gen(function*() {
        const own = yield* ScopeApi.fork(scope, ExecutionStrategy.sequential)
        const client = yield* ScopeApi.extend(McpClient.make({ ...options, servers }), own)
        return { client, scope: own }
      })
    let current = yield* open(options.servers)
    let servers = options.servers
    let revision = 0

    const replace = (next: Readonly<Record<string, McpServerConfig>>) =>
      lock.withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
        const previous = current
        current = yield* open(next)
        servers = next
        revision += 1
        yield* ScopeApi.close(previous.scope, Exit.void)
      })))

    return {
      catalog: Effect.suspend(() => current.client.catalog),
      catalogWith: (secrets) =>
        Effect.suspend(() => current.client.catalogWith?.(secrets) ?? current.client.catalog),
      call: (server, tool, args, scope) => Effect.suspend(() => current.client.call(server, tool, args, scope)),
      status: Effect.suspend(() => current.client.status),
      revision: Effect.sync(() => revision),
      replace,
      servers: Effect.sync(() => servers)
    } satisfies Service
  })
