/**
 * `GET /api/features` says truthfully what this server has (the custom agents API and MCP tasks exactly when
 * their endpoints are served; never live browser control), and DeerFlow's endpoints of features Antler has not
 * (channels, the Lark integration) answer as DeerFlow does with them off, for each user, never a 404.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
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
      mcp_tasks: { enabled: served.includes("GET /api/threads/:thread_id/mcp-tasks") }
    })
    assert.strictEqual((await get("/api/features", null)).status, 401)
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
