/**
 * DeerFlow's settings screens over `extensions_config.json` against the gateway: "Tools" (`src/core/mcp/api.ts`:
 * GET, PUT and PATCH /api/mcp/config, reading `mcp_servers{name: {enabled, description, ...}}`, 403 = admin only)
 * and the skills switch (`src/core/skills/api.ts` enableSkill: PUT /api/skills/{name}), and a thread's MCP tasks
 * (`src/core/background-tasks/api.ts`: an empty list). The file is every user's: Alice's token (not an admin's)
 * neither reads nor changes it; Carol's (an admin's) does, secrets masked when read back and kept when sent back
 * masked, and the next run has the new MCP server's tools without a restart (the SCRIPTED model's requests show
 * them). Real HTTP through the gateway, a real streamable HTTP MCP server.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as McpServers from "../../support/mcpServers.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const CAROL = "carol-token-0123456789abcdef"

let gateway: TestGateway
let scope: Scope.CloseableScope
let mcpUrl: string
let dir: string
const file = () => Path.join(dir, "extensions_config.json")

const SKILL = "---\nname: demo-skill\ndescription: Shows how skills work\n---\n# Demo\n"

beforeAll(async () => {
  scope = Effect.runSync(Scope.make())
  mcpUrl = (await Effect.runPromise(Scope.extend(McpServers.httpServer, scope))).url
  dir = Support.tempDir("antler-ext-")
  Fs.mkdirSync(Path.join(dir, "skills", "public", "demo-skill"), { recursive: true })
  Fs.writeFileSync(Path.join(dir, "skills", "public", "demo-skill", "SKILL.md"), SKILL)
  Fs.writeFileSync(
    file(),
    JSON.stringify({
      mcpServers: {
        local: {
          enabled: false,
          command: "node",
          args: ["server.js"],
          env: { GITHUB_TOKEN: "ghp-stored-secret-value" },
          description: "A local server",
          apiKey: "stored-api-key"
        }
      },
      skills: {},
      middlewares: { kept: true }
    })
  )
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: CAROL, user: "carol", admin: true }] }
      }
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

const call = (token: string, path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${gateway.url}/api${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
  })

const bodyOf = async (response: Response): Promise<any> => response.json()

const ok = async (response: Response): Promise<any> => {
  const body = await bodyOf(response)
  assert.strictEqual(response.status, 200, JSON.stringify(body))
  return body
}

/** What the model was offered in a fresh run of Alice's. */
const offered = async () => {
  const before = gateway.scripted.requests.length
  const run = await call(ALICE, "/runs/wait", {
    method: "POST",
    body: { assistant_id: "lead-agent", input: { messages: [{ role: "user", content: "hi" }] } }
  })
  assert.strictEqual(run.status, 200, await run.text())
  return JSON.stringify(gateway.scripted.requests.slice(before))
}

describe("MCP settings", () => {
  it("is an admin's: another token is refused with 403", async () => {
    for (const [method, body] of [["GET", undefined], ["PUT", { mcp_servers: {} }], [
      "PATCH",
      { server_name: "local", enabled: true }
    ]] as const) {
      const response = await call(ALICE, "/mcp/config", { method, body })
      assert.strictEqual(response.status, 403, method)
      assert.include((await bodyOf(response)).detail, "Admin")
    }
    assert.strictEqual((await call(ALICE, "/skills/demo-skill", { method: "PUT", body: { enabled: false } })).status, 403)
  })

  it("shows the servers with their secrets masked", async () => {
    const config = await ok(await call(CAROL, "/mcp/config"))
    const local = config.mcp_servers.local
    assert.strictEqual(local.enabled, false)
    assert.strictEqual(local.description, "A local server")
    assert.strictEqual(local.type, "stdio")
    assert.strictEqual(local.command, "node")
    assert.deepStrictEqual(local.env, { GITHUB_TOKEN: "***" })
    assert.strictEqual(local.apiKey, "***")
    assert.notInclude(JSON.stringify(config), "stored-secret")
    assert.notInclude(JSON.stringify(config), "stored-api-key")
  })

  it("replaces the servers: kept secrets, the new server's tools in the next run, no restart", async () => {
    assert.notInclude(await offered(), "warehouse_lookup")
    const shown = await ok(await call(CAROL, "/mcp/config"))
    const put = await ok(
      await call(CAROL, "/mcp/config", {
        method: "PUT",
        body: {
          mcp_servers: {
            ...shown.mcp_servers,
            warehouse: {
              enabled: true,
              type: "http",
              url: mcpUrl,
              headers: { "X-Api-Key": "warehouse-key-123" },
              description: "The warehouse"
            }
          }
        }
      })
    )
    assert.deepStrictEqual(put.mcp_servers.warehouse.headers, { "X-Api-Key": "***" })
    assert.strictEqual(put.mcp_servers.warehouse.description, "The warehouse")
    const stored = JSON.parse(Fs.readFileSync(file(), "utf8"))
    assert.strictEqual(stored.mcpServers.local.env.GITHUB_TOKEN, "ghp-stored-secret-value")
    assert.strictEqual(stored.mcpServers.local.apiKey, "stored-api-key")
    assert.strictEqual(stored.mcpServers.warehouse.headers["X-Api-Key"], "warehouse-key-123")
    assert.deepStrictEqual(stored.middlewares, { kept: true })

    assert.include(await offered(), "warehouse_lookup")

    const patched = await ok(
      await call(CAROL, "/mcp/config", { method: "PATCH", body: { server_name: "warehouse", enabled: false } })
    )
    assert.strictEqual(patched.mcp_servers.warehouse.enabled, false)
    assert.notInclude(await offered(), "warehouse_lookup")
  })

  it("refuses what cannot be taken, with a readable detail, and writes nothing", async () => {
    const before = Fs.readFileSync(file(), "utf8")
    const cases: ReadonlyArray<[string, unknown, number, string]> = [
      ["PUT", { mcp_servers: { x: { command: "bash", args: ["-c", "id"] } } }, 400, "disallowed stdio command 'bash'"],
      ["PUT", { mcp_servers: { x: { command: "/usr/bin/npx" } } }, 400, "single executable name"],
      ["PUT", { mcp_servers: { x: { command: "npx", args: ["-e", "1"] } } }, 400, "arbitrary code"],
      ["PUT", { mcp_servers: { x: { command: "npx", env: { LD_PRELOAD: "/x.so" } } } }, 400, "LD_PRELOAD"],
      ["PUT", { mcp_servers: { x: { command: "npx", env: { NEW_KEY: "***" } } } }, 400, "masked value"],
      ["PUT", { mcp_servers: { x: { type: "http" } } }, 400, "has no url"],
      ["PUT", { mcp_servers: { x: { enabled: "yes" } } }, 422, "mcp_servers.x"],
      ["PUT", { mcp_servers: { "a b": { type: "http", url: mcpUrl } } }, 422, "not a server name"],
      ["PUT", { servers: {} }, 422, "mcp_servers"],
      ["PATCH", { server_name: "nope", enabled: true }, 404, "nope"]
    ]
    for (const [method, body, status, detail] of cases) {
      const response = await call(CAROL, "/mcp/config", { method, body })
      const problem = await bodyOf(response)
      assert.strictEqual(response.status, status, JSON.stringify(body))
      assert.include(problem.detail, detail, JSON.stringify(body))
    }
    assert.strictEqual(Fs.readFileSync(file(), "utf8"), before)
  })
})

describe("skills switch", () => {
  it("switches a skill off and on, kept in extensions_config.json", async () => {
    const off = await ok(await call(CAROL, "/skills/demo-skill", { method: "PUT", body: { enabled: false } }))
    assert.deepStrictEqual(off, {
      name: "demo-skill",
      description: "Shows how skills work",
      category: "public",
      license: null,
      enabled: false
    })
    const listed = await ok(await call(ALICE, "/skills"))
    assert.isFalse(listed.skills.find((s: { name: string }) => s.name === "demo-skill").enabled)
    const stored = JSON.parse(Fs.readFileSync(file(), "utf8"))
    assert.deepStrictEqual(stored.skills, { "demo-skill": { enabled: false } })
    assert.property(stored.mcpServers, "warehouse")
    assert.isTrue((await ok(await call(CAROL, "/skills/demo-skill", { method: "PUT", body: { enabled: true } }))).enabled)
    const missing = await call(CAROL, "/skills/nope", { method: "PUT", body: { enabled: true } })
    assert.strictEqual(missing.status, 404)
    assert.include((await bodyOf(missing)).detail, "nope")
  })
})

describe("MCP tasks", () => {
  it("lists none for the user's thread, 404 for another's", async () => {
    const created = await ok(await call(ALICE, "/threads", { method: "POST", body: { thread_id: "t-tasks" } }))
    assert.strictEqual(created.thread_id, "t-tasks")
    assert.deepStrictEqual(await ok(await call(ALICE, "/threads/t-tasks/mcp-tasks?limit=20")), [])
    assert.strictEqual((await call(CAROL, "/threads/t-tasks/mcp-tasks")).status, 404)
  })
})
