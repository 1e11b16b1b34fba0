/**
 * DeerFlow test_mcp_cache.py: the MCP tools follow `extensions_config.json` edited by hand while the app runs, on
 * its content (not its mtime), and a removed file keeps the servers. Antler reads the file again when the next
 * agent is built (`revision`), against real stdio servers; a file that no longer decodes keeps them, with a warning.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ExtensionsFile from "../../src/layers/ExtensionsFile.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { Mcp } from "../../src/services/Mcp.js"
import { tempDirs } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"
import { captureLogs } from "../support/logs.js"

const tempDir = tempDirs()
const SLOW = 120_000

/** The MCP service of `ExtensionsFile.layer(options)` for the app `app`, built in the test's scope. */
const built = (app: AppConfigService["Type"], options: Parameters<typeof ExtensionsFile.layer>[0] = {}) =>
  Layer.build(ExtensionsFile.layer({ setpriv: false, ...options }).pipe(
    Layer.provide(Layer.merge(Layer.succeed(AppConfigService, app), NodeFileSystem.layer))
  ))

// DeerFlow's AppConfig.from_file: config.yaml's `extensions` block may set the MCP servers and skill states; Antler
// reads them from the extensions file only, and names those it does not read instead of dropping them silently
describe("config.yaml's extensions block", () => {
  it.scopedLive("MCP servers or skill states there are named in one warning, not dropped silently", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-ext-yaml-")
      const file = Path.join(dir, "extensions_config.json")
      Fs.writeFileSync(file, JSON.stringify({ mcpServers: {} }))
      const { capture, logged } = captureLogs()
      const config = { ...defaults(), extensions: { middlewares: [], mcpServers: { x: {} }, skills: {} } }
      const app = { config, source: Path.join(dir, "config.yaml"), ignored: [], home: dir }
      yield* built(app).pipe(Effect.provide(capture))
      assert.deepStrictEqual(logged, [
        `${app.source}: extensions.mcpServers, extensions.skills are not read: Antler reads MCP servers and skill ` +
        `states from ${file} (move them there)`
      ])
    }))
})

describe("extensions_config.json edited while the app runs", () => {
  it.scopedLive("its servers replace the old ones at the next agent; a bad or removed file keeps them", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-ext-")
      const file = Path.join(dir, "extensions_config.json")
      const write = (servers: Record<string, unknown>) =>
        Fs.writeFileSync(file, JSON.stringify({ mcpServers: servers }))
      const one = { one: Servers.everything() }
      Fs.writeFileSync(file, JSON.stringify({ mcpServers: one, mcpInterceptors: ["my_pkg.interceptors:build"] }))
      const { capture, logged } = captureLogs()
      const app = { config: defaults(), source: Path.join(dir, "config.yaml"), ignored: [], home: dir }
      const context = yield* built(app, { recheckMs: 0 }).pipe(Effect.provide(capture))
      // DeerFlow test_mcp_custom_interceptors.py: Python interceptors Antler cannot run are named, not dropped silently
      assert.deepStrictEqual(logged, [
        `${file}: mcpInterceptors is not read: Antler cannot load DeerFlow's Python interceptors (MCP calls go out ` +
        "without them)"
      ])
      const mcp = Context.get(context, Mcp)
      const servers = Effect.map(mcp.catalog, (c) => [...new Set(c.tools.map((t) => t.server))])
      assert.strictEqual(yield* mcp.revision!, 0)
      assert.deepStrictEqual(yield* servers, ["one"])
      assert.strictEqual(yield* mcp.revision!, 0, "an untouched file changes nothing")
      // the same length and mtime, another content
      const { mtime } = Fs.statSync(file)
      write({ two: Servers.everything() })
      Fs.utimesSync(file, mtime, mtime)
      assert.strictEqual(yield* mcp.revision!, 1)
      assert.deepStrictEqual(yield* servers, ["two"])
      Fs.writeFileSync(file, "{ not json")
      assert.strictEqual(yield* Effect.provide(mcp.revision!, capture), 1)
      assert.deepStrictEqual(yield* servers, ["two"])
      assert.lengthOf(logged.filter((line) => line.includes("changed but was not taken")), 1)
      Fs.rmSync(file)
      assert.strictEqual(yield* mcp.revision!, 1)
      assert.deepStrictEqual(yield* servers, ["two"])
      // the gateway writes the file, then replaces the servers: they are not replaced twice
      write(one)
      yield* mcp.replace!((yield* ExtensionsFile.load(file)).mcpServers)
      assert.strictEqual(yield* mcp.revision!, 2)
    }), SLOW)
})

describe("looking for a hand edit costs a run nothing most of the time", () => {
  it.scopedLive("within recheckMs of the last look, the file is not read again", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-ext-recheck-")
      const file = Path.join(dir, "extensions_config.json")
      Fs.writeFileSync(file, JSON.stringify({ mcpServers: { one: Servers.everything() } }))
      const app = { config: defaults(), source: Path.join(dir, "config.yaml"), ignored: [], home: dir }
      const context = yield* built(app, { recheckMs: 60_000 })
      const mcp = Context.get(context, Mcp)
      assert.strictEqual(yield* mcp.revision!, 0)
      Fs.writeFileSync(file, JSON.stringify({ mcpServers: { two: Servers.everything() } }))
      // (the first look was just now: the edit waits for the next look, a minute on)
      assert.strictEqual(yield* mcp.revision!, 0)
      assert.deepStrictEqual([...new Set((yield* mcp.catalog).tools.map((t) => t.server))], ["one"])
    }), SLOW)
})
