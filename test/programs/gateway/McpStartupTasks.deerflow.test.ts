/**
 * DeerFlow's start-up check of its MCP task runtime (`test_mcp_task_runtime_config.py`,
 * `validate_mcp_task_runtime_configuration`): an enabled MCP server with `task_toolsets` while `mcp_tasks.enabled`
 * is off stops `antler serve` (and `antler run`) before anything runs, naming the keys and how to fix it. Real
 * `antler` processes; their model is a SCRIPTED server that is never asked.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import { childEnv, runAntler, type ServeProcess, serveProcess, writeServeConfig } from "../../support/cli.js"
import * as Support from "./support.js"

const scope = Effect.runSync(Scope.make())
const servers: Array<ServeProcess> = []
afterAll(async () => {
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

const toolset = { name: "reports", submit_tool: "submit_report", status_tool: "status_report", cancel_tool: "cancel" }

/** A data directory with config.yaml (`more` beside the model) and an extensions file of one `reports` server. */
const home = async (more: Record<string, unknown>, server: Record<string, unknown> = {}) => {
  const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(() => "Done."), scope))
  const dir = Support.tempDir("antler-mcpstartup-")
  const config = writeServeConfig(Path.join(dir, "config.yaml"), scripted.url, {
    sandbox: { allow_host_bash: false },
    ...more
  })
  const extensions = {
    mcpServers: { reports: { command: process.execPath, args: ["-e", ""], task_toolsets: [toolset], ...server } }
  }
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify(extensions))
  return { dir, config }
}

const expectRefusal = (output: string) => {
  assert.include(output, "MCP task_toolsets are configured, so mcp_tasks.enabled=true is required")
  assert.include(output, "mcpServers 'reports' configure task_toolsets")
  assert.include(output, "Set mcp_tasks.enabled: true in config.yaml")
}

describe("MCP task_toolsets need the task runtime (DeerFlow's start-up check)", () => {
  it("antler serve exits 2 before it listens, naming mcp_tasks.enabled and the server", async () => {
    const { config, dir } = await home({})
    const server = serveProcess(dir, config)
    servers.push(server)
    const code = await server.exited
    assert.strictEqual(code, 2)
    assert.notInclude(server.output(), "listening on")
    expectRefusal(server.output())
  })

  it("antler run exits 2 before the model is asked", async () => {
    const { config, dir } = await home({ mcp_tasks: { enabled: false } })
    const result = await runAntler(["run", "--config", config, "hello"], {
      cwd: dir,
      env: childEnv({ ANTLER_HOME: dir })
    })
    assert.strictEqual(result.code, 2)
    assert.include(result.stderr, "antler run: ")
    expectRefusal(result.stderr)
  })

  it("a disabled server's task_toolsets do not stop antler serve", async () => {
    const { config, dir } = await home({}, { enabled: false })
    const server = serveProcess(dir, config)
    servers.push(server)
    assert.match(await server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  })
})
