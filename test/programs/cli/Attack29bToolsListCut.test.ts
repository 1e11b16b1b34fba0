/**
 * Attack round 29b on `antler tools list` and an MCP server whose failed start says one of the process's own secrets
 * (another server's configured env value) where the cut of its stderr tail (300 characters) falls: the CLI masks what
 * it prints with whole values only, and the MCP service it listed with was given none of them, so the key's beginning
 * was printed under the failing server.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"
import * as McpErrorCut from "../../support/mcpErrorCut.js"

const KEY = "VAULTKEY-a29b-cli-0123456789abcdefghijklmnop"
const SLOW = 180_000

describe("Attack29b: antler tools list and an MCP server's failed start cut inside another server's secret", () => {
  it.live("prints the start's stderr without the key's beginning", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-attack29b-tools-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "tools: []\n")
      const node = (args: ReadonlyArray<string>) => ({ type: "stdio", command: process.execPath, args })
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: {
          noisy: node(["-e", McpErrorCut.failingStart(JSON.stringify(KEY))]),
          vault: { ...node(["-e", "process.exit(1)"]), env: { VAULT_KEY: KEY } }
        }
      }))
      const env = childEnv({ ANTLER_HOME: Path.join(dir, "home") })
      const result = yield* Effect.promise(() => runAntler(["tools", "list", "--config", config], { cwd: dir, env }))
      assert.strictEqual(result.code, 0, result.stderr)
      assert.include(result.stdout, "(its stderr: yyy", "the start's stderr is told")
      assert.notInclude(result.stdout, KEY.slice(0, 8), result.stdout)
      assert.notInclude(result.stderr, KEY.slice(0, 8))
    }), SLOW)
})
