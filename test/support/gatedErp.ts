/**
 * A gateway over one MCP server, `erp`, that lists its tools only with a request secret: the real HTTP echo server
 * (test/fixtures/echo-secrets-mcp.mjs with `ECHO_LIST_NEEDS_AUTH=1`), its header `Authorization: Bearer
 * ${secret:ERP_TOKEN}`. Shared by the tests of the per-run listing and of a subagent's view of it.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "../programs/gateway/support.js"
import * as Support from "../programs/gateway/support.js"

const ECHO = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/echo-secrets-mcp.mjs")

/** The HTTP echo server refusing to list without a credential, and a two-user gateway over it (`stop`: both). */
export const start = async (
  script: (body: ChatRequestBody) => Turn,
  prefix: string
): Promise<{ readonly gateway: TestGateway; readonly stop: () => Promise<void> }> => {
  const dir = Support.tempDir(prefix)
  const echo = ChildProcess.spawn(process.execPath, [ECHO, "http"], {
    env: { ...process.env, ECHO_LIST_NEEDS_AUTH: "1" },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    echo.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = /^(http:\/\/\S+)\n/.exec(out)
      if (line !== null) resolve(line[1]!)
    })
    echo.on("exit", (code) => reject(new Error(`the HTTP echo server exited (${code})`)))
  })
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
    mcpServers: { erp: { type: "http", url, headers: { Authorization: "Bearer ${secret:ERP_TOKEN}" } } }
  }))
  const gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: { gateway: Support.twoUsers }
  }).catch((error) => {
    echo.kill()
    throw error
  })
  return {
    gateway,
    stop: async () => {
      await gateway.stop()
      echo.kill()
    }
  }
}
