/**
 * Attack round 23b on request secrets for MCP servers (`${secret:NAME}`), the MCP service alone, against the real
 * echo server (test/fixtures/echo-secrets-mcp.mjs):
 * - in a header: a value no HTTP header can carry must not reach the HTTP client, whose refusal repeats the header's
 *   value (a NUL: `Headers.append: "Bearer ..." is an invalid header value`) or fails the call naming one of its
 *   characters (past U+00FF); nor a NUL a stdio server's variable, whose spawn's refusal repeats it (a library's
 *   run: the gateway and the CLI refuse a NUL);
 * - in env: a variable that makes the server's start run other code, besides those refused already: `HOME` (Python
 *   runs the `.pth` files of `~/.local`, npx reads `~/.npmrc`, git `~/.gitconfig`), `PYTHONUSERBASE`, `GCONV_PATH`,
 *   `RUBYLIB`, a package launcher's registry... A user's value there ran code of the user's choosing on the host:
 *   shown with a real Python start that then becomes the echo server.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as McpClient from "../../src/layers/McpClient.js"
import type { McpResult } from "../../src/services/Mcp.js"
import * as Servers from "../support/mcpServers.js"
import * as Support from "./gateway/support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const SECRET = "sk-mcp-nul-7c1e-DO-NOT-LEAK"

const textOf = (result: McpResult) => result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n")

const startHttpEcho = async (log: string) => {
  const child = ChildProcess.spawn(process.execPath, [ECHO, "http"], {
    env: { ...process.env, ECHO_LOG: log },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = /^(http:\/\/\S+)\n/.exec(out)
      if (line !== null) resolve(line[1]!)
    })
    child.on("exit", (code) => reject(new Error(`the HTTP echo server exited (${code})`)))
  })
  return { url, child }
}

describe("Attack23b: a request secret no header can carry", () => {
  it.scopedLive("a NUL or a character past U+00FF leaves the header out, never in an error or the result", () =>
    Effect.gen(function*() {
      const dir = Support.tempDir("antler-mcp-secret-nul-")
      const http = yield* Effect.acquireRelease(
        Effect.promise(() => startHttpEcho(Path.join(dir, "echo.log"))),
        ({ child }) => Effect.sync(() => child.kill())
      )
      const headers = { Authorization: "Bearer ${secret:ERP_TOKEN}" }
      const remote = Servers.server({ type: "http", url: http.url, headers })
      const mcp = yield* McpClient.make({ servers: { remote } })
      for (const value of [`${SECRET}\u0000x`, `${SECRET}\u0100x`]) {
        const run = { userId: "alice", threadId: "t1", secrets: Redacted.make(new Map([["ERP_TOKEN", value]])) }
        const exit = yield* Effect.exit(mcp.call("remote", "whoami", {}, run))
        const shown = JSON.stringify(exit)
        assert.notInclude(shown, SECRET)
        assert.strictEqual(exit._tag, "Success", shown)
        if (exit._tag === "Success") assert.include(textOf(exit.value), "token:[]")
      }
    }), 120_000)
})

/** The real Python interpreter (not a shim that reads $HOME itself), or undefined where there is none. */
const python = (() => {
  try {
    const asked = ["-c", "import sys; print(sys.executable)"]
    return ChildProcess.execFileSync("python3", asked, { encoding: "utf8" }).trim()
  } catch {
    return undefined
  }
})()

describe("Attack23b: a request secret no environment variable can hold", () => {
  it.scopedLive("a NUL leaves a stdio server's variable out, never in the spawn's error or the result", () =>
    Effect.gen(function*() {
      const env = { ERP_TOKEN: "${secret:ERP_TOKEN}" }
      const local = Servers.server({ type: "stdio", command: process.execPath, args: [ECHO, "stdio"], env })
      const mcp = yield* McpClient.make({ servers: { local } })
      const secrets = Redacted.make(new Map([["ERP_TOKEN", `${SECRET}\u0000x`]]))
      const run = { userId: "alice", threadId: "t1", secrets }
      const exit = yield* Effect.exit(mcp.call("local", "whoami", {}, run))
      const shown = JSON.stringify(exit)
      assert.notInclude(shown, SECRET)
      assert.strictEqual(exit._tag, "Success", shown)
      if (exit._tag === "Success") assert.include(textOf(exit.value), "token:[]")
    }), 120_000)
})

describe("Attack23b: a request secret in a variable that runs code at the server's start", () => {
  it.scopedLive.skipIf(python === undefined)("HOME from a request ran a user's .pth in Python's start: refused", () =>
    Effect.gen(function*() {
      const dir = Support.tempDir("antler-mcp-secret-home-")
      const marker = Path.join(dir, "ran")
      // what a user (or the model's bash, in the workspace) can leave in a directory they then name as HOME
      const asked = "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"
      const version = ChildProcess.execFileSync(python!, ["-c", asked], { encoding: "utf8" }).trim()
      const site = Path.join(dir, "home", ".local", "lib", `python${version}`, "site-packages")
      Fs.mkdirSync(site, { recursive: true })
      Fs.writeFileSync(Path.join(site, "x.pth"), `import os; open(${JSON.stringify(marker)}, "w").write("code ran")\n`)
      const exec = `import os, sys; os.execv(sys.argv[1], [sys.argv[1], sys.argv[2], "stdio"])`
      const mcp = yield* McpClient.make({
        servers: {
          py: Servers.server({
            type: "stdio",
            command: python!,
            args: ["-c", exec, process.execPath, ECHO],
            env: { HOME: "${secret:HOME}" }
          })
        }
      })
      const problems = (yield* mcp.catalog).problems.map((p) => p.message).join("\n")
      const run = {
        userId: "mallory",
        threadId: "t1",
        secrets: Redacted.make(new Map([["HOME", Path.join(dir, "home")]]))
      }
      yield* Effect.exit(mcp.call("py", "whoami", {}, run))
      assert.isFalse(Fs.existsSync(marker), "the user's code ran in the MCP server's start")
      assert.include(problems, "MCP server 'py': env.HOME may not name a request secret")
    }), 120_000)

  it.scopedLive("the other variables that choose what runs are refused too, naming the variable", () =>
    Effect.gen(function*() {
      const names = [
        "PYTHONUSERBASE", "GCONV_PATH", "RUBYLIB", "PERLLIB", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH",
        "LUA_INIT", "PHPRC", "XDG_CONFIG_HOME", "GIT_SSH_COMMAND", "GIT_CONFIG_VALUE_0", "NPM_CONFIG_REGISTRY",
        "npm_config_node_options", "UV_INDEX_URL", "PIP_INDEX_URL", "PYTHONWARNINGS", "PYTHONBREAKPOINT", "BROWSER",
        "GIT_PAGER", "EDITOR"
      ]
      const servers = Object.fromEntries(names.map((name) => [
        `s_${name.toLowerCase()}`,
        Servers.server({ type: "stdio", command: process.execPath, args: [ECHO], env: { [name]: "${secret:X}" } })
      ]))
      const mcp = yield* McpClient.make({ servers })
      const problems = (yield* mcp.catalog).problems.map((p) => p.message).join("\n")
      for (const name of names) assert.include(problems, `env.${name} may not name a request secret`)
    }), 120_000)
})
