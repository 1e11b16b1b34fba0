/**
 * `GET /api/features` says truthfully what this server has (the custom agents API exactly when its endpoints are
 * served; never live browser control, nor durable MCP tasks: DeerFlow's app would show a Background tasks button
 * that is always empty), and DeerFlow's endpoints of features Antler has not
 * (channels, the Lark integration) answer as DeerFlow does with them off, for each user, never a 404. With
 * `agents_api.enabled: false` the custom agents endpoints answer DeerFlow's 403.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { declaredEndpoints } from "./routes.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "alice-token-0123456789abcdef"

describe("features", () => {
  let gateway: TestGateway
  const get = async (path: string, token: string | null = TOKEN) => {
    const response = await fetch(`${gateway.url}${path}`, {
      headers: token === null ? {} : { authorization: `Bearer ${token}` }
    })
    return { status: response.status, body: await response.json() as any }
  }

  beforeAll(async () => {
    gateway = await Support.start({
      script: () => "Hello.",
      config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: TOKEN, user: "alice" }] } } }
    })
  })
  afterAll(() => gateway.stop())

  it("reports the features this server serves", async () => {
    const served = declaredEndpoints()
    const { body, status } = await get("/api/features")
    assert.strictEqual(status, 200)
    assert.deepStrictEqual(body, {
      agents_api: { enabled: served.includes("GET /api/agents") },
      browser_control: { enabled: false },
      mcp_tasks: { enabled: false }
    })
    assert.strictEqual((await get("/api/features", null)).status, 401)
  })

  it("has no durable MCP tasks: DeerFlow's app hides its Background tasks button; a thread lists none", async () => {
    // (the app's useMcpTasksEnabled reads mcp_tasks.enabled, as DeerFlow's gateway answers it with its
    // mcp_tasks runtime off, its default; an app that asks anyway gets the thread's tasks: none)
    assert.isFalse((await get("/api/features")).body.mcp_tasks.enabled)
    const thread = await fetch(`${gateway.url}/api/threads`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: "{}"
    }).then((response) => response.json() as Promise<any>)
    const tasks = await get(`/api/threads/${thread.thread_id}/mcp-tasks?limit=20`)
    assert.strictEqual(tasks.status, 200)
    assert.deepStrictEqual(tasks.body, [])
  })

  it("has no channels and no Lark integration, as DeerFlow answers with them off", async () => {
    assert.deepStrictEqual((await get("/api/channels/providers")).body, { enabled: false, providers: [] })
    assert.deepStrictEqual((await get("/api/channels/connections")).body, { connections: [] })
    const lark = await get("/api/integrations/lark/status")
    assert.strictEqual(lark.status, 200)
    assert.strictEqual(lark.body.installed, false)
    assert.strictEqual(lark.body.app_configured, false)
    assert.strictEqual(lark.body.cli.available, false)
    assert.strictEqual(lark.body.auth.status, "unavailable")
    assert.deepStrictEqual(lark.body.installed_skills, [])
  })
})

// DeerFlow's test_custom_agent: TestAgentsApiDisabled
describe("agents_api.enabled: false", () => {
  let gateway: TestGateway
  beforeAll(async () => {
    gateway = await Support.start({
      script: () => "Hello.",
      config: {
        agents_api: { enabled: false },
        gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: TOKEN, user: "alice" }] } }
      }
    })
  })
  afterAll(() => gateway.stop())

  it("refuses every custom agents endpoint with 403 naming the key, writes nothing, and says the feature is off", async () => {
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      return { status: response.status, body: await response.json() as any }
    }
    const requests: ReadonlyArray<[string, string, unknown?]> = [
      ["GET", "/api/agents"],
      ["GET", "/api/agents/example-agent"],
      ["GET", "/api/agents/check?name=example-agent"],
      ["POST", "/api/agents", { name: "example-agent", soul: "blocked" }],
      ["PUT", "/api/agents/example-agent", { description: "blocked" }],
      ["DELETE", "/api/agents/example-agent"]
    ]
    for (const [method, path, body] of requests) {
      const answer = await call(method, path, body)
      assert.strictEqual(answer.status, 403, `${method} ${path}: ${JSON.stringify(answer.body)}`)
      assert.include(answer.body.detail, "agents_api.enabled=true", `${method} ${path}`)
    }
    assert.isFalse(Fs.existsSync(Path.join(gateway.home, "users", "alice", "agents")))
    assert.deepStrictEqual((await call("GET", "/api/features")).body.agents_api, { enabled: false })
  })
})
