/**
 * DeerFlow's built-in RBAC provider (test_rbac_authorization_provider, test_authorization_enforcement,
 * test_authorization_route_permissions): deny wins over allow, a role without a policy for a resource may use all of
 * it, an unknown or missing role cannot be decided (which `fail_closed` turns into "nothing"), filtering keeps the
 * candidates' order and never adds one; and the gateway's routes map to DeerFlow's permissions.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Rbac from "../../src/layers/RbacAuthorization.js"
import { permissionOf } from "../../src/programs/gateway/RoutePermissions.js"
import * as Authz from "../../src/services/Authorization.js"
import { AuthorizationConfig } from "../../src/services/config/Authorization.js"
import { rbac } from "../support/rbac.js"

const section = (roles: unknown, failClosed = true) =>
  Schema.decodeUnknownSync(AuthorizationConfig)(rbac(roles, { fail_closed: failClosed }))

const ROLES = {
  admin: { tools: { allow: "*" } },
  user: { tools: { allow: "*", deny: ["update_agent"] }, routes: { allow: ["threads:read", "runs:read"] } },
  guest: { tools: { allow: ["web_search", "read_file"], deny: ["read_file"] }, models: { allow: false } }
}

const as = (role: string | null) => Authz.principalOf({ userId: "u1", role }, "user")

describe("the RBAC provider", () => {
  const authz = Rbac.fromConfig(section(ROLES))!

  it.effect("deny wins, a missing allow is all, no policy is unrestricted, with DeerFlow's reasons", () =>
    Effect.gen(function*() {
      const ask = (role: string, resource: string, target: string) =>
        authz.provider.authorize({ principal: as(role), resource, action: "call", target })
      const denied = yield* ask("guest", "tool", "read_file")
      assert.isFalse(denied.allow)
      assert.deepStrictEqual(denied.reasons, [{
        code: "authz.denied",
        message: "role 'guest' is denied 'read_file' on resource 'tool'"
      }])
      assert.strictEqual(denied.policy_id, "rbac:deny")
      assert.isTrue((yield* ask("guest", "tool", "web_search")).allow)
      assert.isFalse((yield* ask("guest", "tool", "bash")).allow)
      assert.isFalse((yield* ask("user", "tool", "update_agent")).allow)
      assert.isTrue((yield* ask("user", "tool", "bash")).allow)
      const free = yield* ask("admin", "model", "gpt-4")
      assert.deepStrictEqual([free.allow, free.reasons[0]?.code, free.policy_id], [
        true,
        "authz.no_policy",
        "rbac:unrestricted"
      ])
      assert.isFalse((yield* ask("guest", "model", "gpt-4")).allow)
    }))

  it.effect("filtering keeps order, never adds; an unknown role fails, and fail_closed hides everything", () =>
    Effect.gen(function*() {
      const tools = ["bash", "web_search", "read_file", "web_search"]
      assert.deepStrictEqual(yield* Authz.visible(authz, as("guest"), "tool", tools), ["web_search", "web_search"])
      assert.deepStrictEqual(yield* Authz.visible(authz, as("admin"), "tool", tools), tools)
      const unknown = yield* Effect.flip(authz.provider.filterResources(as("intern"), "tool", tools))
      assert.include(unknown.message, `Unknown role 'intern'; known roles: ["admin","guest","user"]`)
      assert.deepStrictEqual(yield* Authz.visible(authz, as("intern"), "tool", tools), [])
      const open = Rbac.fromConfig(section(ROLES, false))!
      assert.deepStrictEqual(yield* Authz.visible(open, as("intern"), "tool", tools), tools)
      // a caller without a role is the default role's
      assert.strictEqual(as(null).role, "user")
      assert.isFalse(yield* Authz.allows(authz, as(null), "tool", "call", "update_agent"))
    }))

  it.effect("as a guardrail: a hidden tool is denied with the reason; a provider failure is a GuardrailError", () =>
    Effect.gen(function*() {
      const guard = Authz.asGuardrail(authz)
      const request = {
        tool_name: "bash",
        tool_input: {},
        agent_id: null,
        thread_id: "t",
        run_id: "r",
        tool_call_id: "c",
        is_subagent: false,
        timestamp: "2026-01-01T00:00:00Z",
        user_id: "u1",
        user_role: "guest",
        oauth_provider: null,
        oauth_id: null,
        channel_user_id: null,
        is_internal: false,
        authz_attributes: {}
      }
      const decision = yield* guard.evaluate(request)
      assert.isFalse(decision.allow)
      assert.strictEqual(decision.reasons[0]?.code, "authz.denied")
      const failed = yield* Effect.flip(guard.evaluate({ ...request, user_role: "intern" }))
      assert.strictEqual(failed._tag, "GuardrailError")
    }))
})

describe("the gateway's route permissions", () => {
  it("map DeerFlow's decorated routes, under every prefix; other routes need none", () => {
    const cases: ReadonlyArray<readonly [string, string, string | undefined]> = [
      ["GET", "/threads/t1", "threads:read"],
      ["GET", "/api/langgraph/threads/t1/state", "threads:read"],
      ["POST", "/api/threads/t1/history", "threads:read"],
      ["PATCH", "/threads/t1", "threads:write"],
      ["POST", "/threads/t1/state", "threads:write"],
      ["DELETE", "/threads/t1", "threads:delete"],
      ["DELETE", "/api/threads/t1/uploads/a.txt", "threads:delete"],
      ["POST", "/api/threads/t1/uploads", "threads:write"],
      ["GET", "/api/threads/t1/uploads/list", "threads:read"],
      ["POST", "/threads/t1/runs", "runs:create"],
      ["POST", "/threads/t1/runs/stream", "runs:create"],
      ["POST", "/runs/wait", "runs:create"],
      ["POST", "/api/threads/t1/runs/regenerate/prepare", "runs:create"],
      ["GET", "/threads/t1/runs/r1/join", "runs:read"],
      ["POST", "/threads/t1/runs/r1/stream", "runs:read"],
      ["GET", "/api/threads/t1/messages/page?limit=5", "runs:read"],
      ["POST", "/threads/t1/runs/r1/cancel", "runs:cancel"],
      // (a run's feedback is the thread's, as DeerFlow's feedback router; a run's messages and feedback by its id
      // alone are runs:read, as its runs router)
      ["PUT", "/api/threads/t1/runs/r1/feedback", "threads:write"],
      ["POST", "/api/threads/t1/runs/r1/feedback", "threads:write"],
      ["GET", "/api/threads/t1/runs/r1/feedback", "threads:read"],
      ["GET", "/api/threads/t1/runs/r1/feedback/stats", "threads:read"],
      ["DELETE", "/api/threads/t1/runs/r1/feedback", "threads:delete"],
      ["DELETE", "/api/threads/t1/runs/r1/feedback/f1", "threads:delete"],
      ["GET", "/api/threads/t1/runs/r1/messages", "runs:read"],
      ["GET", "/api/runs/r1/messages", "runs:read"],
      ["GET", "/api/runs/r1/feedback", "runs:read"],
      ["POST", "/threads/search", "threads:read"],
      ["POST", "/threads", "threads:write"],
      ["POST", "/api/input-polish", "runs:create"],
      ["GET", "/api/scheduled-tasks", "threads:read"],
      ["GET", "/api/models", undefined],
      ["GET", "/api/memory", undefined],
      ["POST", "/assistants/search", undefined],
      ["GET", "/ok", undefined]
    ]
    for (const [method, path, expected] of cases) {
      assert.strictEqual(permissionOf(method, path), expected, `${method} ${path}`)
    }
  })
})
