/**
 * DeerFlow's `test_auth_middleware.py`, `test_langgraph_auth.py` (its cookie and CSRF cases), `test_auth_errors.py`
 * and `test_gateway_request_path.py`, through a real gateway with DeerFlow's accounts (`gateway.auth.accounts`):
 * public routes answer without a session (`/health` was not served: DeerFlow's Docker healthcheck asks for it), every
 * other path under `/api`, routed or not, is a 401 carrying DeerFlow's `code` (`not_authenticated` without a cookie,
 * `token_invalid` with one that opens no session, `token_expired` with one that ended; it had none, and a path no route
 * serves was a 404 first), whatever the method; a session's state-changing request needs its CSRF token (403,
 * DeerFlow's words), checked before the session is looked up (a made-up one was a 401); a path that only looks public
 * is not served. The open gateway is DeerFlow's auth-disabled mode: its default admin user, no CSRF.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createRequire } from "node:module"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { browser, loginForm } from "../../support/browser.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

// the gateway's accounts file, opened beside it (better-sqlite3, as its store opens it)
interface Database {
  readonly pragma: (pragma: string) => unknown
  readonly prepare: (sql: string) => { readonly run: (...params: ReadonlyArray<unknown>) => { changes: number } }
  readonly close: () => void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new(filename: string) => Database

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

  it("test_protected_paths_with_trailing_slash and test_unknown_api_path_is_protected: 401 first, 404 signed in", async () => {
    const unknown = ["/api/new-feature", "/api/v2/something", "/api/v1/auth/new-endpoint"]
    // (DeerFlow's middleware answers a request without a session before any route is looked for)
    for (const path of ["/api/models/", "/api/v1/auth/me/", ...unknown, "/api/v1/auth/change-password/"]) {
      const answer = await anonymous("GET", path)
      assert.strictEqual(answer.status, 401, `${path}: ${answer.text}`)
      assert.strictEqual(answer.json().code, "not_authenticated", path)
    }
    // a signed-in user is told there is no such route
    for (const path of unknown) {
      const answer = await admin.fetch(path)
      assert.strictEqual(answer.status, 404, path)
      assert.match(((await answer.json()) as any).detail, /has no route/, path)
    }
    // the public sign-in routes answer a method they do not take without a session: 404, not 401
    assert.strictEqual((await anonymous("GET", "/api/v1/auth/login/local")).status, 404)
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
      assert.strictEqual(answer.status, 401, `${path}: ${answer.text}`)
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
    // test_unknown_endpoint_with_junk_cookie_rejected
    const future = await withCookie("GET", "/api/future-endpoint", "tok")
    assert.deepStrictEqual([future.status, ((await future.json()) as any).code], [401, "token_invalid"])
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
      assert.strictEqual(answer.status, 401, `${method} ${path}: ${answer.text}`)
      assert.strictEqual(answer.json().code, "not_authenticated", `${method} ${path}`)
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

  it("test_csrf_post_missing_token with a made-up session: the CSRF check comes before the session's", async () => {
    for (const [method, path] of [["POST", "/api/threads"], ["PUT", "/api/mcp/config"], ["DELETE", "/api/threads/abc"]]) {
      const answer = await withCookie(method!, path!, "some-jwt")
      assert.strictEqual(answer.status, 403, `${method} ${path}`)
      assert.strictEqual(((await answer.json()) as any).detail, "CSRF token missing. Include X-CSRF-Token header.")
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

describe("test_auth_errors.py: an expired session", () => {
  it("test_expired_token_returns_token_expired: 401 token_expired, where a made-up one is token_invalid", async () => {
    const user = browser(() => gateway)
    const signed = await user.fetch("/api/v1/auth/login/local", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: loginForm("admin@example.com", "correct horse battery")
    })
    assert.strictEqual(signed.status, 200)
    assert.strictEqual((await user.fetch("/api/v1/auth/me")).status, 200)
    // its end comes: the session's row in the gateway's accounts file says it ended a minute ago
    const db = new Sqlite(Path.join(gateway.home, "accounts.db"))
    try {
      db.pragma("busy_timeout = 5000")
      const digest = Crypto.createHash("sha256").update(user.cookies.get("access_token")!).digest("hex")
      const changed = db.prepare("UPDATE sessions SET expires_at = ? WHERE token_hash = ?").run(Date.now() - 60_000, digest)
      assert.strictEqual(changed.changes, 1)
    } finally {
      db.close()
    }
    for (const path of ["/api/v1/auth/me", "/api/models", "/api/no-such-route"]) {
      const expired = await user.fetch(path)
      assert.strictEqual(expired.status, 401, path)
      const body = (await expired.json()) as any
      assert.deepStrictEqual([body.code, body.message], ["token_expired", body.detail], path)
      assert.match(body.detail, /expired/, path)
    }
    const junk = await withCookie("GET", "/api/v1/auth/me", "never-a-session")
    assert.strictEqual(((await junk.json()) as any).code, "token_invalid")
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
