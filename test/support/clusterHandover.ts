/**
 * Two runners of a cluster for tests of a run handed over between them (`cluster.ts`'s suite): runner A's model never
 * answers, so a run it takes goes on until it is handed over; B's answers `<label> answered by B`, a run labelled
 * `hold-<n>` by its user message. With the HTTP calls those tests make of a runner.
 */
import type * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import type { ServeProcess } from "./cli.js"
import type * as Cluster from "./cluster.js"
import { psql } from "./postgres.js"

/** A runner, its URL and its model server. */
export interface Server extends Omit<ServeProcess, "url"> {
  readonly url: string
  readonly scripted: ScriptedChatServer.ScriptedChatServer
}

/** The `hold-<n>` label of a request's last user message ("" when it has none). */
export const labelOf = (body: ChatRequestBody): string => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  return /\bhold-\d+/.exec(asked)?.[0] ?? ""
}

/** The model of runner `name`: A's never answers (its runs go on until handed over); B's answers. */
const scriptOf = (name: string) => (body: ChatRequestBody): Turn =>
  name === "A" ? { content: "Still thinking", stall: true } : `${labelOf(body)} answered by ${name}`

/** Runner `name` of `suite`, draining for `drainSeconds` when stopped. */
export const serve = async (
  suite: ReturnType<typeof Cluster.suite>,
  options: { readonly name: string; readonly dbUrl: string; readonly home: string; readonly drainSeconds: number }
): Promise<Server> => {
  const scripted = await suite.model(scriptOf(options.name))
  const { server, url } = await suite.runner({
    dbUrl: options.dbUrl,
    home: options.home,
    modelUrl: scripted.url,
    name: `config-${options.name}.yaml`,
    gateway: { heartbeat_seconds: 1 },
    cluster: { health_check_seconds: 2, drain_seconds: options.drainSeconds }
  })
  return { ...server, url, scripted }
}

/** POSTs `body` as JSON to a runner, failing unless it answers 200. */
export const post = async (base: string, path: string, body: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const json = await response.json() as any
  if (response.status !== 200) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(json)}`)
  return json
}

/** A run's status as a runner answers it. */
export const runStatus = async (base: string, thread: string, runId: string): Promise<string> =>
  ((await (await fetch(`${base}/threads/${thread}/runs/${runId}`)).json()) as any).status

/** How many runners the cluster's table says are healthy. */
export const healthy = (dbUrl: string) => psql(dbUrl, "SELECT count(*) FROM cluster_runners WHERE healthy")
