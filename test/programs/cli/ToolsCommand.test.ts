/**
 * `antler tools list` and the configuration errors of tools and models, as a user runs them (child processes
 * from sources, each with its own data directory): DeerFlow's example config lists web_fetch and web_search;
 * MCP tools show their server, deferral and a failing server's reason; an Anthropic-native model entry and a
 * bad tool value are configuration errors (exit 2) that say what to do.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDir } from "../../support/fixtures.js"
import * as Servers from "../../support/mcpServers.js"
import { childEnv, runAntler } from "../../support/cli.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const FIXTURE = Path.join(ROOT, "test/fixtures/deerflow/config.example.yaml")
const SLOW = 180_000

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const antler = (args: ReadonlyArray<string>, cwd: string, extra: Record<string, string> = {}): Effect.Effect<Result> =>
  Effect.promise(() => runAntler(args, { cwd, env: childEnv({ ANTLER_HOME: Path.join(cwd, "home"), ...extra }) }))

describe("antler tools list", () => {
  it.live("DeerFlow's config.example.yaml (tools section as shipped) loads and lists web_fetch and web_search", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-tools-")
      const text = yield* antler(["tools", "list", "--config", FIXTURE], dir)
      assert.strictEqual(text.code, 0, text.stderr)
      const lines = text.stdout.split("\n")
      assert.match(lines.find((l) => l.trim().startsWith("web_search"))!, /web_search\s+config\s+web\s+DuckDuckGo, up to 5 results/)
      assert.match(lines.find((l) => l.trim().startsWith("web_fetch"))!, /web_fetch\s+config\s+web\s+read through Jina AI/)
      assert.match(lines.find((l) => l.trim().startsWith("ask_clarification"))!, /middleware/)
      const json = yield* antler(["tools", "list", "--config", FIXTURE, "--json"], dir)
      assert.strictEqual(json.code, 0, json.stderr)
      const report = JSON.parse(json.stdout)
      assert.includeMembers(report.tools.map((t: any) => t.name), ["web_search", "web_fetch", "image_search", "bash", "present_files"])
      assert.deepStrictEqual(report.missing, [])
    }), SLOW)

  it.live("MCP tools show their server and deferral; a failing server says why; missing tools say why", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-tools-mcp-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, [
        "tool_search:",
        "  enabled: true",
        "tools:",
        "  - name: web_search",
        "    group: web",
        "    use: deerflow.community.exa.tools:web_search_tool",
        "  - name: read_file",
        "    group: file:read",
        "    use: deerflow.sandbox.tools:read_file_tool",
        ""
      ].join("\n"))
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: {
          everything: { type: "stdio", command: process.execPath, args: [Servers.EVERYTHING, "stdio"] },
          broken: { type: "stdio", command: process.execPath, args: ["-e", "process.exit(4)"] },
          github: { enabled: false, type: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-github"] }
        }
      }))
      const result = yield* antler(["tools", "list", "--config", config], dir)
      assert.strictEqual(result.code, 0, result.stderr)
      const out = result.stdout
      assert.match(out, /everything_echo\s+mcp:everything\s+deferred: found with tool_search/)
      assert.match(out, /tool_search\s+middleware/)
      assert.match(out, /read_file\s+config\s+file:read/)
      // Exa without its key (EXA_API_KEY unset): left out, saying so in DeerFlow's words
      assert.match(out, /web_search\s+config\s+web\s+EXA_API_KEY is not configured/)
      assert.match(out, /everything\s+stdio\s+running, 13 tools/)
      assert.match(out, /broken\s+stdio\s+failed\n\s+MCP server 'broken' could not be started/)
      assert.match(out, /github\s+stdio\s+disabled/)
    }), SLOW)
})

describe("an MCP server's missing environment variable", () => {
  it.live("is told once, under its server, naming the variable", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-tools-env-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, "memory:\n  enabled: false\n")
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: {
          gh: {
            type: "stdio",
            command: process.execPath,
            args: ["-e", "1"],
            env: { GITHUB_TOKEN: "$NOT_SET_FOR_ANTLER" }
          }
        }
      }))
      const result = yield* antler(["tools", "list", "--config", config], dir)
      assert.strictEqual(result.code, 0, result.stderr)
      const told = "MCP server 'gh': env.GITHUB_TOKEN: environment variable NOT_SET_FOR_ANTLER is not set"
      assert.strictEqual(`${result.stdout}${result.stderr}`.split(told).length - 1, 1, result.stdout)
      assert.match(result.stdout, /gh\s+stdio\s+failed\n\s+MCP server 'gh': env\.GITHUB_TOKEN: environment variable/)
    }), SLOW)
})

describe("configuration errors of models and tools", () => {
  it.live("an Anthropic-native model entry fails with the explained error and exit code 2; nothing runs", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-claude-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, [
        "models:",
        "  - name: claude-sonnet-4",
        "    use: langchain_anthropic:ChatAnthropic",
        "    model: claude-sonnet-4-20250514",
        "    api_key: sk-ant-not-a-real-key",
        ""
      ].join("\n"))
      const result = yield* antler(["run", "--config", config, "hello"], dir)
      assert.strictEqual(result.code, 2)
      assert.strictEqual(result.stdout, "")
      assert.include(
        result.stderr,
        `${config}: models[0].use: the model "claude-sonnet-4" uses langchain_anthropic:ChatAnthropic, which talks ` +
          "Anthropic's native Messages API; Antler speaks only OpenAI's Chat Completions API"
      )
      assert.include(result.stderr, "use: langchain_openai:ChatOpenAI, base_url: https://api.anthropic.com/v1/")
      assert.notInclude(result.stderr, "sk-ant-not-a-real-key")
      const listed = yield* antler(["tools", "list", "--config", config], dir)
      assert.strictEqual(listed.code, 2)
    }), SLOW)

  it.live("a configured tool with a bad value is a configuration error naming the key (exit 2)", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-badtool-")
      const config = Path.join(dir, "config.yaml")
      Fs.writeFileSync(config, [
        "tools:",
        "  - name: web_fetch",
        "    use: deerflow.community.jina_ai.tools:web_fetch_tool",
        "    timeout: soon",
        ""
      ].join("\n"))
      const result = yield* antler(["run", "--config", config, "--base-url", "http://127.0.0.1:9/v1", "hello"], dir)
      assert.strictEqual(result.code, 2)
      assert.include(result.stderr, `${config}: tools[0].timeout: expected a number, got "soon"`)
    }), SLOW)
})
