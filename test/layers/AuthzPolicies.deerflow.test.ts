/**
 * The questions behind the `skills`, `sandbox` and `mcp_servers` policies (DeerFlow's test_rbac_authorization_provider
 * resource mapping, and its RFC's resource map): which tools a principal may see once an MCP tool needs its
 * server's `use` and a sandbox tool the sandbox's `execute` of `default`; the denial a tool call reads (the first
 * refused question's reason); the skills an agent built for a role may use; and a provider failure, which hides
 * everything under `fail_closed`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Rbac from "../../src/layers/RbacAuthorization.js"
import * as AgentAuthorization from "../../src/programs/AgentAuthorization.js"
import * as Authz from "../../src/services/Authorization.js"
import { AuthorizationConfig } from "../../src/services/config/Authorization.js"
import type * as Skills from "../../src/services/Skills.js"
import { rbac } from "../support/rbac.js"

const authzOf = (roles: unknown, failClosed = true) =>
  Rbac.fromConfig(Schema.decodeUnknownSync(AuthorizationConfig)(rbac(roles, { fail_closed: failClosed })))!

const ROLES = {
  user: {},
  guest: { mcp_servers: { deny: ["github"] }, skills: { allow: ["pdf"] }, sandbox: { allow: [] } },
  reader: { tools: { deny: ["write_file"] }, sandbox: { allow: true } }
}
const authz = authzOf(ROLES)
const as = (role: string) => Authz.principalOf({ userId: "u1", role }, "user")
const SERVERS = new Map([["github_issues", "github"], ["docs_search", "docs"]])
const TOOLS = ["bash", "read_file", "write_file", "github_issues", "docs_search", "present_files", "web_search"]

const request = (tool: string, role: string) => ({
  tool_name: tool,
  tool_input: {},
  agent_id: null,
  thread_id: "t",
  run_id: "r",
  tool_call_id: "c",
  is_subagent: false,
  timestamp: "2026-01-01T00:00:00.000Z",
  user_id: "u1",
  user_role: role,
  oauth_provider: null,
  oauth_id: null,
  channel_user_id: null,
  is_internal: false,
  authz_attributes: {}
})

const catalog = (names: ReadonlyArray<string>): Skills.Catalog => ({
  root: "/skills",
  container: "/mnt/skills",
  skills: names.map((name) => ({
    name,
    description: `${name} skill`,
    location: `/mnt/skills/public/${name}/SKILL.md`,
    category: "public",
    enabled: true
  })) as unknown as ReadonlyArray<Skills.Skill>,
  rejected: [],
  shadowed: [],
  warnings: []
})

describe("the skills, sandbox and mcp_servers policies", () => {
  it.effect("a tool is visible when its own policy, its MCP server's and the sandbox's allow it", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Authz.visibleTools(authz, as("user"), TOOLS, SERVERS), TOOLS)
      // `sandbox: {allow: []}` denies `default` (DeerFlow's same-name mapping), and `github` contributes nothing
      assert.deepStrictEqual(
        yield* Authz.visibleTools(authz, as("guest"), TOOLS, SERVERS),
        ["docs_search", "present_files", "web_search"]
      )
      assert.deepStrictEqual(
        yield* Authz.visibleTools(authz, as("reader"), TOOLS, SERVERS),
        ["bash", "read_file", "github_issues", "docs_search", "present_files", "web_search"]
      )
      // an unknown role cannot be decided: nothing under fail_closed, everything without it
      assert.deepStrictEqual(yield* Authz.visibleTools(authz, as("intern"), TOOLS, SERVERS), [])
      assert.deepStrictEqual(yield* Authz.visibleTools(authzOf(ROLES, false), as("intern"), TOOLS, SERVERS), TOOLS)
    }))

  it.effect("a call reads the first refusal: its own, its server's, the sandbox's", () =>
    Effect.gen(function*() {
      const guard = Authz.asGuardrail(authz, SERVERS)
      const reason = (tool: string, role: string) =>
        Effect.map(guard.evaluate(request(tool, role)), (d) => d.allow ? "allowed" : d.reasons[0]!.message)
      const server = "role 'guest' is denied 'github' on resource 'mcp_server'"
      assert.strictEqual(yield* reason("github_issues", "guest"), server)
      assert.strictEqual(yield* reason("docs_search", "guest"), "allowed")
      assert.strictEqual(yield* reason("read_file", "guest"), "role 'guest' is denied 'default' on resource 'sandbox'")
      assert.strictEqual(yield* reason("present_files", "guest"), "allowed")
      const own = "role 'reader' is denied 'write_file' on resource 'tool'"
      assert.strictEqual(yield* reason("write_file", "reader"), own)
      assert.strictEqual(yield* reason("bash", "user"), "allowed")
      const failure = yield* Effect.flip(guard.evaluate(request("bash", "intern")))
      assert.strictEqual(failure._tag, "GuardrailError")
      assert.include(failure.message, "Unknown role 'intern'")
    }))

  it.effect("an agent built for a role uses the skills it may load, within its own allowlist", () =>
    Effect.gen(function*() {
      const skills = catalog(["pdf", "deep-research", "slides"])
      assert.isUndefined(yield* AgentAuthorization.skillsFor(authz, "user", skills, undefined))
      assert.deepStrictEqual(yield* AgentAuthorization.skillsFor(authz, "user", skills, ["slides"]), ["slides"])
      assert.deepStrictEqual(yield* AgentAuthorization.skillsFor(authz, "guest", skills, undefined), ["pdf"])
      assert.deepStrictEqual(yield* AgentAuthorization.skillsFor(authz, "guest", skills, ["slides"]), [])
      assert.deepStrictEqual(yield* AgentAuthorization.skillsFor(authz, "intern", skills, undefined), [])
      assert.deepStrictEqual(yield* AgentAuthorization.skillsFor(undefined, "guest", skills, ["slides"]), ["slides"])
    }))

  it.effect("a deferred tool of a server the role may not use is not in tool_search's catalog", () =>
    Effect.gen(function*() {
      const def = (name: string) => ({ name, description: name, parameters: {} })
      const deferred = {
        tools: [def("github_issues"), def("docs_search")],
        routes: [{ name: "github_issues", priority: 1, keywords: ["issue"] }]
      }
      const guest = yield* AgentAuthorization.deferredFor(authz, "guest", deferred, SERVERS)
      assert.deepStrictEqual(guest?.tools.map((t) => t.name), ["docs_search"])
      assert.deepStrictEqual(guest?.routes, [])
      assert.strictEqual(yield* AgentAuthorization.deferredFor(authz, "user", deferred, SERVERS), deferred)
      const servers = AgentAuthorization.mcpServersOf([
        { name: "github_issues", source: "mcp", server: "github" },
        { name: "bash", source: "sandbox" }
      ])
      assert.deepStrictEqual([...servers], [["github_issues", "github"]])
    }))
})
