/**
 * The gateway's routes as its tests know them (written out here, not read from the sources), and the routes its
 * sources declare (`declaredRoutes`, read from them), for the tests that check the two agree: the fuzzing test
 * (every route is fuzzed) and the OpenAPI test (every API route is documented).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { SERVED } from "../../../src/programs/gateway/api/GatewayApi.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")

/** What a route reads. */
export type BodyKind =
  | "none"
  | "run"
  | "thread"
  | "search"
  | "patch"
  | "state"
  | "history"
  | "checkpoint"
  | "assistants"
  | "upload"
  | "feedback"
  | "goal"
  | "regenerate"
  | "edit"
  | "branch"
  | "account"
  | "login"
  | "password"
  | "suggest"
  | "polish"
  | "artifact"
  | "compact"
  | "cron"
  | "store"

export interface Route {
  readonly method: string
  /** The path as the router declares it (`:name` parameters, `*`), with its prefix. */
  readonly path: string
  readonly body: BodyKind
}

export const LANGGRAPH: ReadonlyArray<readonly [string, string, BodyKind]> = [
  ["POST", "/assistants/search", "assistants"],
  ["GET", "/assistants/:assistant_id", "none"],
  ["GET", "/assistants/:assistant_id/graph", "none"],
  ["GET", "/assistants/:assistant_id/schemas", "none"],
  ["POST", "/assistants/count", "assistants"],
  ["POST", "/assistants", "assistants"],
  ["PATCH", "/assistants/:assistant_id", "assistants"],
  ["DELETE", "/assistants/:assistant_id", "none"],
  ["GET", "/assistants/:assistant_id/subgraphs", "none"],
  ["GET", "/assistants/:assistant_id/subgraphs/:namespace", "none"],
  ["POST", "/assistants/:assistant_id/versions", "assistants"],
  ["POST", "/assistants/:assistant_id/latest", "assistants"],
  ["POST", "/threads", "thread"],
  ["POST", "/threads/search", "search"],
  ["POST", "/threads/count", "search"],
  ["POST", "/threads/prune", "search"],
  ["GET", "/threads/:thread_id", "none"],
  ["PATCH", "/threads/:thread_id", "patch"],
  ["DELETE", "/threads/:thread_id", "none"],
  ["POST", "/threads/:thread_id/copy", "none"],
  ["GET", "/threads/:thread_id/state", "none"],
  ["POST", "/threads/:thread_id/state", "state"],
  ["POST", "/threads/:thread_id/state/checkpoint", "checkpoint"],
  ["GET", "/threads/:thread_id/state/:checkpoint_id", "none"],
  ["GET", "/threads/:thread_id/history", "none"],
  ["POST", "/threads/:thread_id/history", "history"],
  ["GET", "/threads/:thread_id/stream", "none"],
  ["POST", "/threads/:thread_id/runs", "run"],
  ["POST", "/threads/:thread_id/runs/stream", "run"],
  ["POST", "/threads/:thread_id/runs/wait", "run"],
  ["GET", "/threads/:thread_id/runs", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id", "none"],
  ["DELETE", "/threads/:thread_id/runs/:run_id", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id/stream", "none"],
  ["POST", "/threads/:thread_id/runs/:run_id/stream", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id/join", "none"],
  ["GET", "/runs/:run_id/stream", "none"],
  ["POST", "/threads/:thread_id/runs/:run_id/cancel", "none"],
  ["POST", "/runs", "run"],
  ["POST", "/runs/stream", "run"],
  ["POST", "/runs/wait", "run"],
  ["POST", "/runs/cancel", "search"],
  ["POST", "/runs/batch", "run"],
  ["POST", "/threads/:thread_id/runs/crons", "cron"],
  ["POST", "/runs/crons", "cron"],
  ["POST", "/runs/crons/search", "search"],
  ["POST", "/runs/crons/count", "search"],
  ["PATCH", "/runs/crons/:cron_id", "cron"],
  ["DELETE", "/runs/crons/:cron_id", "none"],
  ["PUT", "/store/items", "store"],
  ["GET", "/store/items", "none"],
  ["DELETE", "/store/items", "store"],
  ["POST", "/store/items/search", "store"],
  ["POST", "/store/namespaces", "store"],
  ["GET", "/ok", "none"],
  ["GET", "/health", "none"],
  ["GET", "/info", "none"]
]

export const DEERFLOW: ReadonlyArray<readonly [string, string, BodyKind]> = [
  ["POST", "/threads/:thread_id/uploads", "upload"],
  ["GET", "/threads/:thread_id/uploads/list", "none"],
  ["DELETE", "/threads/:thread_id/uploads/:filename", "none"],
  ["GET", "/threads/:thread_id/artifacts/*", "none"],
  ["GET", "/models", "none"],
  ["GET", "/models/:model_name", "none"],
  ["GET", "/skills", "none"],
  ["GET", "/skills/:skill_name", "none"],
  ["GET", "/scheduled-tasks", "none"],
  ["POST", "/scheduled-tasks", "patch"],
  ["GET", "/scheduled-tasks/:task_id", "none"],
  ["PATCH", "/scheduled-tasks/:task_id", "patch"],
  ["DELETE", "/scheduled-tasks/:task_id", "none"],
  ["POST", "/scheduled-tasks/:task_id/pause", "none"],
  ["POST", "/scheduled-tasks/:task_id/resume", "none"],
  ["POST", "/scheduled-tasks/:task_id/trigger", "none"],
  ["GET", "/scheduled-tasks/:task_id/runs", "none"],
  ["GET", "/threads/:thread_id/scheduled-tasks", "none"],
  // issue 27: a thread's turns (api/Turns.ts)
  ["GET", "/threads/:thread_id/messages/page", "none"],
  ["GET", "/threads/:thread_id/messages", "none"],
  ["GET", "/threads/:thread_id/token-usage", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id/events", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id/workspace-changes", "none"],
  ["PUT", "/threads/:thread_id/runs/:run_id/feedback", "feedback"],
  ["GET", "/threads/:thread_id/runs/:run_id/feedback", "none"],
  ["DELETE", "/threads/:thread_id/runs/:run_id/feedback", "none"],
  ["POST", "/threads/:thread_id/runs/:run_id/feedback", "feedback"],
  ["GET", "/threads/:thread_id/runs/:run_id/feedback/stats", "none"],
  ["DELETE", "/threads/:thread_id/runs/:run_id/feedback/:feedback_id", "none"],
  ["GET", "/runs/:run_id/feedback", "none"],
  ["GET", "/threads/:thread_id/runs/:run_id/messages", "none"],
  ["GET", "/runs/:run_id/messages", "none"],
  ["GET", "/threads/:thread_id/goal", "none"],
  ["PUT", "/threads/:thread_id/goal", "goal"],
  ["DELETE", "/threads/:thread_id/goal", "none"],
  // issue 28: manual compaction (api/Compact.ts)
  ["POST", "/threads/:thread_id/compact", "compact"],
  // issue 27: regenerate, edit, branch (api/Branches.ts)
  ["POST", "/threads/:thread_id/runs/regenerate/prepare", "regenerate"],
  ["POST", "/threads/:thread_id/runs/edit-regenerate/prepare", "edit"],
  ["POST", "/threads/:thread_id/branches", "branch"],
  ["GET", "/memory", "none"],
  ["DELETE", "/memory", "none"],
  ["POST", "/memory/reload", "none"],
  ["GET", "/memory/export", "none"],
  ["GET", "/memory/config", "none"],
  ["GET", "/memory/status", "none"],
  ["POST", "/memory/import", "patch"],
  ["POST", "/memory/facts", "patch"],
  ["PATCH", "/memory/facts/:fact_id", "patch"],
  ["DELETE", "/memory/facts/:fact_id", "none"],
  ["GET", "/agents", "none"],
  ["GET", "/agents/check", "none"],
  ["POST", "/agents", "patch"],
  ["GET", "/agents/:agent_name", "none"],
  ["PUT", "/agents/:agent_name", "patch"],
  ["DELETE", "/agents/:agent_name", "none"],
  ["GET", "/mcp/config", "none"],
  ["PUT", "/mcp/config", "patch"],
  ["PATCH", "/mcp/config", "patch"],
  ["POST", "/mcp/cache/reset", "none"],
  ["GET", "/mcp/status", "none"],
  ["PUT", "/skills/:skill_name", "patch"],
  ["POST", "/skills/install", "patch"],
  ["POST", "/skills/reload", "none"],
  // issue 27: custom skills with their history (api/CustomSkills.ts)
  ["GET", "/skills/custom", "none"],
  ["GET", "/skills/custom/:skill_name", "none"],
  ["PUT", "/skills/custom/:skill_name", "patch"],
  ["DELETE", "/skills/custom/:skill_name", "none"],
  ["GET", "/skills/custom/:skill_name/history", "none"],
  ["POST", "/skills/custom/:skill_name/rollback", "patch"],
  ["GET", "/threads/:thread_id/mcp-tasks", "none"],
  ["GET", "/threads/:thread_id/mcp-tasks/:task_id", "none"],
  ["POST", "/threads/:thread_id/mcp-tasks/:task_id/cancel", "none"],
  ["GET", "/v1/auth/setup-status", "none"],
  ["GET", "/v1/auth/providers", "none"],
  ["POST", "/v1/auth/initialize", "account"],
  ["POST", "/v1/auth/register", "account"],
  ["POST", "/v1/auth/login/local", "login"],
  ["POST", "/v1/auth/logout", "none"],
  ["GET", "/v1/auth/me", "none"],
  ["POST", "/v1/auth/change-password", "password"],
  ["GET", "/features", "none"],
  ["GET", "/channels/providers", "none"],
  ["GET", "/channels/connections", "none"],
  ["GET", "/integrations/lark/status", "none"],
  ["GET", "/suggestions/config", "none"],
  ["POST", "/threads/:thread_id/suggestions", "suggest"],
  ["POST", "/input-polish", "polish"],
  ["GET", "/threads/:thread_id/uploads/limits", "none"],
  ["PUT", "/threads/:thread_id/artifacts/*", "artifact"]
]

export const WEB: ReadonlyArray<string> = ["/", "/index.html", "/app.js", "/style.css"]

/** The API's documentation: its OpenAPI document, and the page browsing it. */
export const DOCS: ReadonlyArray<string> = ["/openapi.json", "/docs"]

/**
 * Every route the gateway serves: the LangGraph API at each of its prefixes, DeerFlow's under `/api`, the page,
 * the documentation.
 */
export const ROUTES: ReadonlyArray<Route> = [
  ...["", "/api", "/api/langgraph"].flatMap((prefix) =>
    LANGGRAPH.map(([method, path, body]) => ({ method, path: `${prefix}${path}`, body }))
  ),
  ...DEERFLOW.map(([method, path, body]) => ({ method, path: `/api${path}`, body })),
  ...WEB.map((path) => ({ method: "GET", path, body: "none" as const })),
  ...DOCS.map((path) => ({ method: "GET", path, body: "none" as const }))
]

/** Paths no route serves (they must be refused as well as any other request). */
export const UNROUTED: ReadonlyArray<Route> = [
  { method: "GET", path: "/nope", body: "none" },
  { method: "POST", path: "/api/threads/:thread_id/nope", body: "none" },
  { method: "GET", path: "/api/langgraph/threads/:thread_id/runs/:run_id/nope", body: "none" },
  { method: "GET", path: "/threads/:thread_id/uploads/list", body: "none" }
]

/** The TypeScript sources under a directory of the repository, as text. */
const sourcesUnder = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(Path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => Fs.readFileSync(Path.join(ROOT, dir, file), "utf8"))

/** The endpoints of the APIs the gateway serves, `METHOD /path`, as their declarations (`api/`) say. */
export const declaredEndpoints = (): ReadonlyArray<string> => {
  const routes: Array<string> = []
  const add = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
    api: HttpApi.HttpApi<Id, Groups, E, R>
  ) =>
    HttpApi.reflect(api, {
      onGroup: () => {},
      onEndpoint: ({ endpoint }) => routes.push(`${endpoint.method} ${endpoint.path}`)
    })
  for (const api of SERVED.langgraph) add(api)
  add(SERVED.deerflow)
  return routes.sort()
}

/**
 * The routes the sources declare, `METHOD /path` (to check the table above misses none): every endpoint of the
 * APIs the gateway serves (`SERVED`, declared in src/programs/gateway/api/, mounted at their prefixes), and every
 * route added with HttpRouter anywhere in src/programs/gateway/ (the web page, the documentation; a route whose
 * path is not a string literal is listed as written, so that it cannot go unnoticed).
 */
export const declaredRoutes = (): ReadonlyArray<string> => {
  const pattern = /HttpRouter\.(get|post|put|patch|del|head|options|all|mount|mountApp)\(\s*("([^"]*)"|[^,)]*)/g
  const raw = sourcesUnder("src/programs/gateway").flatMap((text) =>
    [...text.matchAll(pattern)].map(([, method, argument, path]) =>
      `${method === "del" ? "DELETE" : method!.toUpperCase()} ${path ?? argument}`
    )
  )
  return [...declaredEndpoints(), ...raw].sort()
}
