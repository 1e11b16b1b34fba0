/**
 * `antler tools list` and an MCP server that lists its tools only with a request secret (`${secret:ERP_TOKEN}` in
 * its env; test/fixtures/echo-secrets-mcp.mjs with `ECHO_LIST_NEEDS_AUTH=1`, a real stdio server process): the
 * server is shown as listing its tools per run, naming the secret it needs, once, rather than only the server's raw
 * refusal. Before, it read `MCP server 'erp' did not list its tools: ... unauthorized`, as if it were broken.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const SLOW = 180_000

describe("antler tools list with an MCP server listing its tools only with a request secret", () => {
  it.live("shows the server as listed per run, naming the secret, once", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-tools-gated-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "tools: []\n")
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: {
          erp: {
            type: "stdio",
            command: process.execPath,
            args: [ECHO, "stdio"],
            env: { ERP_TOKEN: "${secret:ERP_TOKEN}", ECHO_LIST_NEEDS_AUTH: "1" }
          }
        }
      }))
      const env = childEnv({ ANTLER_HOME: Path.join(dir, "home") })
      const result = yield* Effect.promise(() => runAntler(["tools", "list", "--config", config], { cwd: dir, env }))
      assert.strictEqual(result.code, 0, result.stderr)
      const out = result.stdout
      const told = "MCP server 'erp' lists its tools per run, with the request secret ERP_TOKEN (context.secrets, " +
        "antler run --secret NAME): it did not list them without it"
      assert.match(out, /\n {2}erp\s+stdio\s+/)
      assert.include(out, told)
      assert.strictEqual(out.split(told).length - 1, 1, out)
      assert.notInclude(out, "erp_whoami")
    }), SLOW)
})
