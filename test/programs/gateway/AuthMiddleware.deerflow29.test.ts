/**
 * DeerFlow's `test_auth_middleware.py`, `test_langgraph_auth.py` (its cookie and CSRF cases), `test_auth_errors.py`
 * and `test_gateway_request_path.py`, through a real gateway with DeerFlow's accounts (`gateway.auth.accounts`):
 * public routes answer without a session (`/health` was not served: DeerFlow's Docker healthcheck asks for it), every other route is a 401 carrying DeerFlow's `code`
 * (`not_authenticated` without a cookie, `token_invalid` with one that opens no session; it had none), whatever the
 * method; a session's state-changing request needs its CSRF token (403, DeerFlow's words); a path that only looks
 * public is not served. The open gateway is DeerFlow's auth-disabled mode: its default admin user, no CSRF.
 * Differs on purpose: a path no route serves is a 404 (DeerFlow's middleware answers it 401 before routing).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { browser } from "../../support/browser.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
let open: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello.", config: { gateway: { auth: { accounts: true } } } })
  open = await Support.start({ script: () => "Hello." })
})
afterAll(async () => {
  await gateway.stop()
  await open.stop()
})

const anonymous = as(() => gateway)
const admin = browser(() => gateway)

/** A request with only the cookie `access_token=<token>` (a made-up session), and the CSRF header given. */
const withCookie = (method: string, path: string, token: string, csrf?: string) =>
  fetch(`${gateway.url}${path}`, {
    method,
    headers: { cookie: `access_token=${token}; csrf_token=${csrf ?? "x"}`, ...(csrf ? { "x-csrf-token": csrf } : {}) }
  })

const PROTECTED = [
  "/api/models",
  "/api/mcp/config",
  "/api/memory",
  "/api/skills",
  "/api/threads/123",
  "/api/threads/123/uploads/list",
  "/api/agents",
  "/api/channels/providers",
  "/api/v1/auth/me"
]

describe("test_auth_middleware.py", () => {
  beforeAll(async () => {
    const made = await admin.fetch("/api/v1/auth/initialize", {
      method: "POST",
      body: JSON.stringify({ email: "admin@example.com", password: "correct horse battery", remember_me: true })
    })
    assert.strictEqual(made.status, 201, await made.text())
  })

  it("test_public_paths, test_public_path_no_cookie, test_public_auth_path_no_cookie", async () => {
    for (const path of ["/health", "/openapi.json", "/docs", "/api/v1/auth/setup-status", "/api/v1/auth/providers"]) {
      const answer = await anonymous("GET", path)
      assert.strictEqual(answer.status, 200, `${path}: ${answer.text.slice(0, 200)}`)
    }
    assert.deepStrictEqual((await anonymous("GET", "/health")).json(), { status: "healthy", service: "antler-gateway" })
    // signing in, up and out need no session (a wrong password is the sign-in's own 401, DeerFlow's code)
    const login = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ username: "admin@example.com", password: "wrong password here" }).toString()
    })
    assert.strictEqual(login.status, 401)
    assert.strictEqual(((await login.json()) as any).code, "invalid_credentials")
    assert.strictEqual((await anonymous("POST", "/api/v1/auth/logout")).status, 200)
  })

  it("test_protected_paths, test_protected_path_no_cookie_returns_401, test_protected_auth_path_no_cookie", async () => {
    for (const path of PROTECTED) {
      const answer = await anonymous("GET", path)
      assert.strictEqual(answer.status, 401, `${path}: ${answer.text}`)
      assert.strictEqual(answer.json().code, "not_authenticated", path)
      assert.strictEqual(answer.json().message, answer.json().detail)
    }
  })

  it("test_protected_paths_with_trailing_slash and test_unknown_api_path_is_protected: never served", async () => {
    for (const path of ["/api/models/", "/api/v1/auth/me/", "/api/new-feature", "/api/v2/something", "/api/v1/auth/new-endpoint"]) {
      const answer = await anonymous("GET", path)
      assert.include([401, 404], answer.status, `${path}: ${answer.text}`)
    }
    // the public sign-in routes with a trailing slash are still no way around a session
    assert.include([401, 404, 405], (await anonymous("GET", "/api/v1/auth/change-password/")).status)
  })

  it("test_url_reconstruction_cannot_turn_a_protected_route_path_public", async () => {
    for (const path of [
      "/api/v1/auth/setup-sta%0Atus",
      "/api/v1/auth/setup-sta%0Dtus",
      "/api/v1/auth/setup-sta%09tus",
      "/api/v1/auth/setup-status%23private",
      "/api/v1/auth/setup-status%3Fprivate"
    ]) {
      const answer = await anonymous("GET", path)
      assert.include([401, 404], answer.status, `${path}: ${answer.text}`)
    }
  })

  it("test_protected_path_with_junk_cookie_rejected (and PUT, DELETE, unknown routes)", async () => {
    for (const [method, path] of [["GET", "/api/models"], ["PUT", "/api/mcp/config"], ["DELETE", "/api/threads/abc"]]) {
      const answer = await withCookie(method!, path!, "some-token", "x")
      assert.strictEqual(answer.status, 401, `${method} ${path}`)
      const body = (await answer.json()) as any
      assert.strictEqual(body.code, "token_invalid", `${method} ${path}`)
      assert.match(body.detail, /session has ended/)
    }
    assert.include([401, 404], (await withCookie("GET", "/api/future-endpoint", "tok")).status)
  })

  it("test_protected_post_no_cookie_returns_401, the method matrix and test_mcp_cache_reset_post_no_cookie_returns_401", async () => {
    for (const [method, path, body] of [
      ["POST", "/api/threads/abc/runs/stream", { input: null }],
      ["POST", "/api/mcp/cache/reset", undefined],
      ["PUT", "/api/mcp/config", { mcp_servers: {} }],
      ["DELETE", "/api/threads/abc", undefined],
      ["PATCH", "/api/threads/abc", { metadata: {} }]
    ] as const) {
      const answer = await anonymous(method, path, body)
      assert.include([401, 404], answer.status, `${method} ${path}: ${answer.text}`)
      if (answer.status === 401) assert.strictEqual(answer.json().code, "not_authenticated", `${method} ${path}`)
    }
  })

  it("a signed-in session passes: its user on /me, and the protected routes answer", async () => {
    const me = await admin.fetch("/api/v1/auth/me")
    assert.strictEqual(me.status, 200)
    assert.strictEqual(((await me.json()) as any).system_role, "admin")
    assert.strictEqual((await admin.fetch("/api/models")).status, 200)
  })

  it("test_auth_disabled_allows_protected_path_without_cookie and stamps the default admin user", async () => {
    const openAs = as(() => open)
    const models = await openAs("GET", "/api/models")
    assert.strictEqual(models.status, 200, models.text)
    const me = await openAs("GET", "/api/v1/auth/me")
    assert.strictEqual(me.status, 200, me.text)
    const user = me.json()
    assert.deepStrictEqual(
      [user.id, user.email, user.system_role, user.needs_setup],
      ["default", "default@test.local", "admin", false]
    )
  })

  it("test_auth_disabled_skips_csrf_for_state_changing_requests", async () => {
    const made = await as(() => open)("POST", "/api/threads", {})
    assert.strictEqual(made.status, 200, made.text)
  })
})

describe("test_langgraph_auth.py (cookie and CSRF)", () => {
  it("test_csrf_get_no_check: a GET with the session needs no CSRF token", async () => {
        assert.strictEqual((await admin.fetch("/api/v1/auth/me", { csrf: false })).status, 200)
  })

  it("test_csrf_post_missing_token, test_csrf_put_requires_token, test_csrf_delete_requires_token", async () => {
    for (const [method, path, body] of [
      ["POST", "/api/threads", "{}"],
      ["PUT", "/api/mcp/config", JSON.stringify({ mcp_servers: {} })],
      ["DELETE", "/api/threads/none-here", undefined]
    ] as const) {
      const answer = await admin.fetch(path, { method, csrf: false, ...(body === undefined ? {} : { body }) })
      assert.strictEqual(answer.status, 403, `${method} ${path}`)
      assert.match(((await answer.json()) as any).detail, /CSRF token missing/)
    }
  })

  it("test_csrf_post_mismatched_token", async () => {
    const answer = await admin.fetch("/api/threads", {
      method: "POST",
      csrf: false,
      body: "{}",
      headers: { "x-csrf-token": "wrong-token" }
    })
    assert.strictEqual(answer.status, 403)
    assert.match(((await answer.json()) as any).detail, /mismatch/)
  })

  it("test_csrf_post_matching_token_proceeds_to_jwt: a CSRF token of no session is a 401", async () => {
    const answer = await withCookie("POST", "/api/threads", "garbage", "same-token")
    assert.strictEqual(answer.status, 401)
    assert.strictEqual(((await answer.json()) as any).code, "token_invalid")
    const made = await admin.fetch("/api/threads", { method: "POST", body: "{}" })
    assert.strictEqual(made.status, 200)
  })

  it("test_no_cookie_raises_401 and test_invalid_jwt_raises_401", async () => {
    const none = await anonymous("GET", "/api/threads/abc")
    assert.deepStrictEqual([none.status, none.json().code], [401, "not_authenticated"])
    const junk = await withCookie("GET", "/api/threads/abc", "garbage")
    assert.deepStrictEqual([junk.status, ((await junk.json()) as any).code], [401, "token_invalid"])
  })
})

describe("test_auth_errors.py", () => {
  it("test_auth_error_code_values: the codes the gateway answers are DeerFlow's", async () => {
    assert.strictEqual((await anonymous("GET", "/api/models")).json().code, "not_authenticated")
    const again = await anonymous("POST", "/api/v1/auth/initialize", {
      email: "other@example.com",
      password: "correct horse battery"
    })
    assert.strictEqual(again.status, 409)
    assert.deepStrictEqual(Object.keys(again.json()).filter((k) => k === "code" || k === "message"), ["code", "message"])
    assert.strictEqual(again.json().code, "system_already_initialized")
  })
})

describe("test_gateway_request_path.py", () => {
  it("test_mounting_under_a_public_prefix_does_not_expose_protected_routes", async () => {
    for (const path of ["/health/api/models", "/docs/api/models", "/openapi.json/api/models", "/health/../api/models"]) {
      const answer = await anonymous("GET", path)
      assert.notStrictEqual(answer.status, 200, `${path}: ${answer.text}`)
      assert.notInclude(answer.text, "\"models\"", path)
    }
  })

  it("test_csrf_is_enforced_for_routes_mounted_under_the_webhook_prefix and test_auth_endpoint_detection_follows_the_projection", async () => {
    // no webhook prefix is exempt, and only the exact sign-in route takes a request without a session
    assert.include([401, 403, 404], (await anonymous("POST", "/api/webhooks/action", {})).status)
    assert.include([401, 403, 404], (await anonymous("POST", "/api/v1/auth/login/local/x", {})).status)
  })
})
