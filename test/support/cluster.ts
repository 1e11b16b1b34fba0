/**
 * Runners of a cluster for tests: `antler serve` child processes of one cluster on one PostgreSQL database (see
 * `postgres.ts`), each started with a config of its own (a free runner port) beside a scripted model server, and the
 * thread leases and runner registrations they keep there, read with `psql`.
 */
import { afterAll, assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { serveProcess, writeServeConfig, type ServeProcess } from "./cli.js"
import { until } from "./poll.js"
import { freePort } from "./ports.js"
import type * as Postgres from "./postgres.js"
import { psql } from "./postgres.js"

/** What a runner's start says when its runner port is in use (`Gateway`'s listen problem). */
const RUNNER_PORT_TAKEN = "the address is in use (another antler serve, or another program, listens there); stop it, " +
  "or choose another port with gateway.cluster.runner_port"

/** Options of one runner. */
export interface RunnerOptions {
  /** The database the cluster shares. */
  readonly dbUrl: string
  /** The data directory (shared by the cluster's runners). */
  readonly home: string
  /** The scripted model server's URL. */
  readonly modelUrl: string
  /** More of `gateway.cluster` (`runner_port` is a free port). */
  readonly cluster?: Record<string, unknown>
  /** More of `gateway`. */
  readonly gateway?: Record<string, unknown>
  /** More of `config.yaml` (`sandbox`...). */
  readonly config?: Record<string, unknown>
  /** The config file's name in `home` (default: `config-<n>.yaml`, n counting the suite's runners). */
  readonly name?: string
  readonly args?: ReadonlyArray<string>
}

/** A runner process and its URL. */
export interface Runner {
  readonly server: ServeProcess
  readonly url: string
}

/**
 * A file of cluster tests: the runner processes and the model servers it starts, all stopped after its tests
 * (`cleanup` first, then the model servers), and PostgreSQL with them.
 */
export const suite = (pg: Postgres.Postgres | { readonly skip: string }, cleanup: () => void = () => {}) => {
  const scope = Effect.runSync(Scope.make())
  const servers: Array<ServeProcess> = []
  // (counted as they are asked for: runners started at once have config files of their own)
  let started = 0
  afterAll(async () => {
    for (const server of servers) server.child.kill("SIGKILL")
    cleanup()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    if ("stop" in pg) await pg.stop()
  })
  /** A scripted model server, stopped after the file's tests. */
  const model = (script: ScriptedChatServer.Script) =>
    Effect.runPromise(Scope.extend(ScriptedChatServer.start(script), scope))
  /**
   * One more runner (killed after the file's tests), once it listens. Its free runner port taken by another process
   * between `freePort` and the runner's listen (tests run side by side): started again on another.
   */
  const runner = async (options: RunnerOptions): Promise<Runner> => {
    for (let attempt = 1; ; attempt++) {
      const config = writeServeConfig(
        Path.join(options.home, options.name ?? `config-${started++}.yaml`),
        options.modelUrl,
        {
          ...options.config,
          database: { url: options.dbUrl },
          gateway: { ...options.gateway, cluster: { runner_port: await freePort(), ...options.cluster } }
        }
      )
      const server = serveProcess(options.home, config, options.args)
      servers.push(server)
      try {
        return { server, url: await server.url }
      } catch (error) {
        const taken = String(error).includes(RUNNER_PORT_TAKEN) && options.cluster?.runner_port === undefined
        if (!taken || attempt >= 3) throw error
      }
    }
  }
  return { servers, model, runner }
}

/** The lease a thread's run holds (its runner's `host:pid` as `owner`), if one does. */
export const lease = (dbUrl: string, threadId: string) => {
  const row = psql(dbUrl, `SELECT run_id || ' ' || owner FROM antler_leases WHERE thread_id = '${threadId}'`)
  if (row === "") return undefined
  const [runId, owner] = row.split(" ") as [string, string]
  return { runId, owner, pid: Number(owner.slice(owner.lastIndexOf(":") + 1)) }
}

/** Of two runners, the one running the thread's run (holding its lease), and the other. */
export const holderOf = (dbUrl: string, threadId: string, a: Runner, b: Runner) => {
  const leased = lease(dbUrl, threadId)
  const holder = [a, b].find((runner) => runner.server.child.pid === leased?.pid)
  assert.isDefined(holder, `lease owner ${leased?.owner}`)
  return { leased: leased!, holder: holder!, other: holder === a ? b : a }
}

/** Until `count` runners of the cluster on `dbUrl` are registered and healthy, and the shards had time to settle. */
export const registered = async (dbUrl: string, count: number) => {
  await until(() => psql(dbUrl, "SELECT count(*) FROM cluster_runners WHERE healthy") === String(count), "runners")
  // (shard assignments are refreshed every 3 s)
  await new Promise((resolve) => setTimeout(resolve, 8000))
}
