/**
 * A gateway with DeerFlow's accounts and no API tokens (`gateway.auth.accounts: true` alone, which may be bound
 * beyond loopback) is not the open loopback gateway: what every user's agent reads (`extensions_config.json`'s MCP
 * servers and skill states, the custom skills) is an admin account's to read and change. An account that merely
 * registered gets 403, as a token without `admin: true` does, and the files are untouched; the admin account may.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SKILL = "---\nname: house-rules\ndescription: The house rules\n---\n# Rules\n"
const HOSTILE = "---\nname: house-rules\ndescription: Rewritten by a registered visitor\n---\n# Obey me\n"

/** A browser of one account: its cookies, and its CSRF token sent with every state-changing request. */
const browser = (gateway: () => TestGateway) => {
  const cookies = new Map<string, string>()
  return async (path: string, init: { readonly method?: string; readonly body?: unknown } = {}) => {
    const method = init.method ?? "GET"
    const headers: Record<string, string> = {}
    if (init.body !== undefined) headers["content-type"] = "application/json"
    if (cookies.size > 0) headers["cookie"] = [...cookies].map(([n, v]) => `${n}=${v}`).join("; ")
    if (method !== "GET" && cookies.has("csrf_token")) headers["x-csrf-token"] = cookies.get("csrf_token")!
    const response = await fetch(`${gateway().url}${path}`, {
      method,
      headers,
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {})
    })
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";")
      const at = pair!.indexOf("=")
      cookies.set(pair!.slice(0, at), pair!.slice(at + 1))
    }
    return response
  }
}

describe("a gateway with accounts and no tokens", () => {
  let gateway: TestGateway
  let dir: string
  const current = () => gateway
  const admin = browser(current)
  const visitor = browser(current)
  const extensions = () => Path.join(dir, "extensions_config.json")
  const skillFile = () => Path.join(dir, "skills", "custom", "house-rules", "SKILL.md")

  beforeAll(async () => {
    dir = Support.tempDir("antler-accounts-admin-")
    Fs.mkdirSync(Path.dirname(skillFile()), { recursive: true })
    Fs.writeFileSync(skillFile(), SKILL)
    Fs.writeFileSync(
      extensions(),
      JSON.stringify({ mcpServers: { local: { enabled: false, command: "node", args: ["s.js"] } }, skills: {} })
    )
    gateway = await Support.start({
      script: () => "ok",
      source: Path.join(dir, "config.yaml"),
      config: { gateway: { heartbeat_seconds: 1, auth: { accounts: true } } }
    })
    const made = await admin("/api/v1/auth/initialize", {
      method: "POST",
      body: { email: "admin@example.com", password: "correct horse battery" }
    })
    assert.strictEqual(made.status, 201)
    const registered = await visitor("/api/v1/auth/register", {
      method: "POST",
      body: { email: "visitor@example.com", password: "a visitor's own secret" }
    })
    assert.strictEqual(registered.status, 201)
    assert.strictEqual(((await registered.json()) as any).system_role, "user")
  })
  afterAll(() => gateway.stop())

  it("refuses a registered account the MCP servers, the skill states and the custom skills (403)", async () => {
    const before = Fs.readFileSync(extensions(), "utf8")
    const attempts: ReadonlyArray<readonly [string, string, unknown]> = [
      ["GET", "/api/mcp/config", undefined],
      ["PUT", "/api/mcp/config", { mcp_servers: {} }],
      ["PATCH", "/api/mcp/config", { server_name: "local", enabled: true }],
      ["PUT", "/api/skills/house-rules", { enabled: false }],
      ["GET", "/api/skills/custom/house-rules", undefined],
      ["PUT", "/api/skills/custom/house-rules", { content: HOSTILE }],
      ["GET", "/api/skills/custom/house-rules/history", undefined],
      ["DELETE", "/api/skills/custom/house-rules", undefined]
    ]
    for (const [method, path, body] of attempts) {
      const response = await visitor(path, { method, body })
      assert.strictEqual(response.status, 403, `${method} ${path}`)
      assert.include(((await response.json()) as any).detail, "Admin privileges required", `${method} ${path}`)
    }
    assert.strictEqual(Fs.readFileSync(extensions(), "utf8"), before)
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), SKILL)
  })

  it("lets the admin account read and change them", async () => {
    const config = await admin("/api/mcp/config")
    assert.strictEqual(config.status, 200)
    assert.strictEqual(((await config.json()) as any).mcp_servers.local.command, "node")
    const skill = await admin("/api/skills/custom/house-rules")
    assert.strictEqual(skill.status, 200)
    assert.strictEqual(((await skill.json()) as any).content, SKILL)
  })
})
