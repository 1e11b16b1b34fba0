/**
 * The source of a stdio MCP server with DeerFlow's long-running task contract (`task_toolsets`: `start_report`
 * submits, `report_status` polls, `report_cancel` cancels), run as `node --input-type=module -e <source>` by the
 * tests of MCP tasks. Its tasks live in its process: `tasks`, by id, each `{ topic, polls, at, state }` (`state`
 * `"running"` until cancelled); what a status call answers is the test's.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { childEnv, writeServeConfig } from "./cli.js"
import { tempDir } from "./fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")

export interface TaskServer {
  /**
   * JS statements answering `report_status`, with `args`, `task` (the task's record, undefined for an id the server
   * never gave) and `answer` (a result with its `structuredContent`) in scope.
   */
  readonly status: string
  /** JS statements answering `report_cancel` (default: the task's state `cancelled`, and so answered). */
  readonly cancel?: string
  /** Module-level JS statements (state of the test's own). */
  readonly prelude?: string
  /** More tools: the JS object literals of their listing, and JS statements answering their calls. */
  readonly tools?: string
  readonly other?: string
}

/**
 * A `prelude` keeping the server's tasks in the file `$TASKS_FILE` (read at start, written at every change): a server
 * started again, or another process's, knows the tasks.
 */
export const TASKS_IN_FILE = `const fs = await import("node:fs")
    const FILE = process.env.TASKS_FILE
    if (fs.existsSync(FILE)) for (const [id, task] of JSON.parse(fs.readFileSync(FILE, "utf8"))) tasks.set(id, task)
    const keep = tasks.set.bind(tasks)
    tasks.set = (id, task) => { keep(id, task); fs.writeFileSync(FILE, JSON.stringify([...tasks])); return tasks }`

const object = (properties: string) => `object({ ${properties} })`

/** The server's source. */
export const reportTaskServer = (options: TaskServer): string => `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const tasks = new Map()
  let n = 0
  ${options.prelude ?? ""}
  const object = (properties) => ({ type: "object", properties })
  const server = new Server({ name: "tasks", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [
    { name: "start_report", description: "Writes a report on a topic",
      inputSchema: ${object(`topic: { type: "string" }`)} },
    { name: "report_status", description: "Status of a report", inputSchema: ${object(`task_id: { type: "string" }`)} },
    { name: "report_cancel", description: "Cancels a report", inputSchema: ${object(`task_id: { type: "string" }`)} },
    ${options.tools ?? ""}
  ] }))
  const answer = (structuredContent) =>
    ({ content: [{ type: "text", text: "see structuredContent" }], structuredContent })
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = request.params.arguments ?? {}
    const task = tasks.get(args.task_id)
    switch (request.params.name) {
      case "start_report": {
        const id = "remote-" + process.pid + "-" + (++n)
        tasks.set(id, { topic: String(args.topic), polls: 0, at: Date.now(), state: "running" })
        return answer({ task_id: id, status: "running" })
      }
      case "report_status": {
        ${options.status}
      }
      case "report_cancel": {
        ${options.cancel ?? `if (task !== undefined) task.state = "cancelled"
        return answer({ task_id: args.task_id, status: "cancelled" })`}
      }
      default: {
        ${options.other ?? `throw new Error("no tool " + request.params.name)`}
      }
    }
  })
  await server.connect(new StdioServerTransport())
`

/** The `extensions_config.json` entry of a stdio server of `source` (`reportTaskServer`) with its Report toolset. */
export const taskServerEntry = (source: string, more: Record<string, unknown> = {}) => ({
  type: "stdio",
  command: "node",
  args: ["--input-type=module", "-e", source],
  ...more,
  task_toolsets: [
    { name: "Report", submit_tool: "start_report", status_tool: "report_status", cancel_tool: "report_cancel" }
  ]
})

/**
 * Writes `dir`'s `extensions_config.json`: the server of `source` as `tasks` (`more`: its `env`...). Returns the path
 * of a `config.yaml` beside it, the configuration's `source` (where the gateway looks for the extensions).
 */
export const writeTaskExtensions = (dir: string, source: string, more: Record<string, unknown> = {}): string => {
  Fs.writeFileSync(
    Path.join(dir, "extensions_config.json"),
    JSON.stringify({ mcpServers: { tasks: taskServerEntry(source, more) } })
  )
  return Path.join(dir, "config.yaml")
}

const ALLOWLIST = "DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST"

/**
 * Lets the stdio MCP servers that `node` runs start in this process while the file's tests run (its
 * `DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST` is `node` from before its first `beforeAll` to after its last `afterAll`:
 * call it before registering them), and puts the variable back after.
 */
export const allowNodeServers = () => {
  const before = process.env[ALLOWLIST]
  beforeAll(() => {
    process.env[ALLOWLIST] = "node"
  })
  afterAll(() => {
    if (before === undefined) delete process.env[ALLOWLIST]
    else process.env[ALLOWLIST] = before
  })
}

/** Options of `cliHome`. */
export interface CliHomeOptions {
  /** More of `config.yaml` (`mcp_tasks`...). */
  readonly config: Record<string, unknown>
  /** More of the server's entry (default: run by this Node, `process.execPath`). */
  readonly server?: Record<string, unknown>
  /** More of the children's environment. */
  readonly env?: Record<string, string>
}

/**
 * A data directory of `antler run` (a new temp directory named `prefix...`): its `config.yaml` over the scripted
 * model at `modelUrl`, the task server of `source` beside it, and the environment of children run on it.
 */
export const cliHome = (prefix: string, modelUrl: string, source: string, options: CliHomeOptions) => {
  const dir = tempDir(prefix)
  const config = writeServeConfig(Path.join(dir, "config.yaml"), modelUrl, options.config)
  writeTaskExtensions(dir, source, { command: process.execPath, ...options.server })
  return { dir, config, env: childEnv({ ANTLER_HOME: dir, ANTLER_CONFIG: config, ...options.env }) }
}
