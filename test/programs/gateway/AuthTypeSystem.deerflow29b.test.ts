/**
 * DeerFlow test_auth_type_system.py, the session cookie's lifetime (`resolve_session_cookie_policy`): a session kept
 * after the browser closes (remember me) only where its cookie cannot be read on the way, over HTTPS or from a
 * loopback host; a public host over plain HTTP gets a cookie that ends with the browser, whatever a forwarded host
 * says. Through the gateway's sign-in, with the exact `Host` header a browser sends.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Http from "node:http"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const WEEK = 7 * 24 * 3600

/** A sign-in with exactly these headers (`host` among them); the answer's status and `Set-Cookie` lines. */
const signIn = (gateway: TestGateway, headers: Record<string, string>, remember?: string) =>
  new Promise<{ status: number; cookies: Array<string> }>((resolve, reject) => {
    const port = Number(new URL(gateway.url).port)
    const form = { username: "ann@example.com", password: "anns own secret" }
    const body = new URLSearchParams(remember === undefined ? form : { ...form, remember_me: remember }).toString()
    const request = Http.request(
      { host: "127.0.0.1", port, method: "POST", path: "/api/v1/auth/login/local", setHost: false },
      (response) => {
        response.resume()
        response.on("end", () =>
          resolve({ status: response.statusCode!, cookies: response.headers["set-cookie"] ?? [] }))
      }
    )
    request.on("error", reject)
    const all = { host: `127.0.0.1:${port}`, ...headers }
    for (const [name, value] of Object.entries(all)) request.setHeader(name, value)
    request.setHeader("content-type", "application/x-www-form-urlencoded")
    request.setHeader("content-length", Buffer.byteLength(body))
    request.end(body)
  })

/** Each session cookie's lifetime (its Max-Age, or null for one that ends with the browser) and whether Secure. */
const policy = async (gateway: TestGateway, headers: Record<string, string>, remember?: string) => {
  const answer = await signIn(gateway, headers, remember)
  assert.strictEqual(answer.status, 200, JSON.stringify(headers))
  return ["access_token", "csrf_token"].map((name) => {
    const line = answer.cookies.find((cookie) => cookie.startsWith(`${name}=`))
    assert.isDefined(line, name)
    const age = /;\s*max-age=(\d+)/i.exec(line!)
    return { name, maxAge: age === null ? null : Number(age[1]), secure: /;\s*secure(;|$)/i.test(line!) }
  })
}

const both = (maxAge: number | null, secure: boolean) => [
  { name: "access_token", maxAge, secure },
  { name: "csrf_token", maxAge, secure }
]

describe("DeerFlow test_auth_type_system: the session cookie's lifetime", () => {
  let gateway: TestGateway
  let port: number

  beforeAll(async () => {
    gateway = await Support.start({
      script: () => "Hello.",
      config: { gateway: { auth: { accounts: true }, allowed_hosts: ["sandbox.example"] } }
    })
    port = Number(new URL(gateway.url).port)
    const made = await fetch(`${gateway.url}/api/v1/auth/initialize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "ann@example.com", password: "anns own secret" })
    })
    assert.strictEqual(made.status, 201)
  })
  afterAll(() => gateway.stop())

  it("test_session_cookie_policy_persists_on_localhost_http and _on_ipv4_loopback_range", async () => {
    assert.deepStrictEqual(await policy(gateway, { host: `localhost:${port}` }), both(WEEK, false))
    assert.deepStrictEqual(await policy(gateway, { host: `127.1.2.3:${port}` }), both(WEEK, false))
  })

  it("test_session_cookie_policy_persists_on_https (a proxy's X-Forwarded-Proto)", async () => {
    const https = { host: "sandbox.example", "x-forwarded-proto": "https" }
    assert.deepStrictEqual(await policy(gateway, https), both(WEEK, true))
  })

  it("test_session_cookie_policy_degrades_public_http_to_session_cookie", async () => {
    assert.deepStrictEqual(await policy(gateway, { host: "sandbox.example" }), both(null, false))
  })

  it("test_session_cookie_policy_ignores_forwarded_localhost_on_public_http", async () => {
    const spoofed = [
      { "x-forwarded-host": `localhost:${port}` },
      { forwarded: `for=192.0.2.1;host="localhost:${port}";proto=http` }
    ]
    for (const headers of spoofed) {
      assert.deepStrictEqual(await policy(gateway, { host: "sandbox.example", ...headers }), both(null, false))
    }
  })

  it("test_session_cookie_policy_remember_me_false_is_session_cookie (and over HTTPS)", async () => {
    assert.deepStrictEqual(await policy(gateway, { host: `localhost:${port}` }, "false"), both(null, false))
    const https = { host: "sandbox.example", "x-forwarded-proto": "https" }
    assert.deepStrictEqual(await policy(gateway, https, "false"), both(null, true))
  })

  it("test_session_cookie_policy_allows_operator_opt_in_for_public_http", async () => {
    process.env["DEER_FLOW_AUTH_ALLOW_INSECURE_PERSISTENT_COOKIE"] = "1"
    try {
      assert.deepStrictEqual(await policy(gateway, { host: "sandbox.example" }), both(WEEK, false))
    } finally {
      delete process.env["DEER_FLOW_AUTH_ALLOW_INSECURE_PERSISTENT_COOKIE"]
    }
    assert.deepStrictEqual(await policy(gateway, { host: "sandbox.example" }), both(null, false))
  })

  it("test_change_password_preserves_session_only_preference; _reissues_..._when_preference_changes", async () => {
    const registered = await fetch(`${gateway.url}/api/v1/auth/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "bea@example.com", password: "beas own secret", remember_me: false })
    })
    assert.strictEqual(registered.status, 201)
    const change = async (cookies: Array<string>, password: string, next: string, remember?: boolean) => {
      const jar = new Map(cookies.map((line) => line.split(";")[0]!.split("=") as [string, string]))
      const answer = await fetch(`${gateway.url}/api/v1/auth/change-password`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          cookie: [...jar].map(([name, value]) => `${name}=${value}`).join("; "),
          "x-csrf-token": jar.get("csrf_token")!
        },
        body: JSON.stringify({
          current_password: password,
          new_password: next,
          ...(remember === undefined ? {} : { remember_me: remember })
        })
      })
      assert.strictEqual(answer.status, 200)
      return answer.headers.getSetCookie()
    }
    const maxAge = (cookies: Array<string>, name: string) => {
      const line = cookies.find((cookie) => cookie.startsWith(`${name}=`))
      assert.isDefined(line, name)
      const age = /;\s*max-age=(\d+)/i.exec(line!)
      return age === null ? null : Number(age[1])
    }
    const kept = await change(registered.headers.getSetCookie(), "beas own secret", "beas second secret")
    assert.strictEqual(maxAge(kept, "access_token"), null, "a session-only sign-in stays session-only")
    assert.strictEqual(maxAge(kept, "csrf_token"), null)
    const remembered = await change(kept, "beas second secret", "beas third secret", true)
    assert.strictEqual(maxAge(remembered, "access_token"), WEEK)
    assert.strictEqual(maxAge(remembered, "csrf_token"), WEEK)
    const again = await change(remembered, "beas third secret", "beas fourth secret")
    assert.strictEqual(maxAge(again, "access_token"), WEEK, "and a remembered one stays remembered")
  })

  it("test_register_remember_me_false_keeps_access_and_csrf_session_only; test_register_https_cookie_...", async () => {
    const register = async (email: string, remember: boolean) => {
      const answer = await fetch(`${gateway.url}/api/v1/auth/register`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-proto": "https" },
        body: JSON.stringify({ email, password: "a long enough secret", remember_me: remember })
      })
      assert.strictEqual(answer.status, 201)
      return answer.headers.getSetCookie().map((line) => {
        const [name, value] = line.split(";")[0]!.split("=") as [string, string]
        return {
          name,
          ...(name === "deerflow_session_persistent" ? { value } : {}),
          maxAge: /;\s*max-age=(\d+)/i.exec(line)?.[1] ?? null,
          secure: /;\s*secure(;|$)/i.test(line),
          httpOnly: /;\s*httponly(;|$)/i.test(line)
        }
      }).sort((a, b) => (a.name < b.name ? -1 : 1))
    }
    const expected = (maxAge: string | null, value: string) => [
      { name: "access_token", maxAge, secure: true, httpOnly: true },
      { name: "csrf_token", maxAge, secure: true, httpOnly: false },
      { name: "deerflow_session_persistent", value, maxAge, secure: true, httpOnly: true }
    ]
    assert.deepStrictEqual(await register("cid@example.com", false), expected(null, "0"))
    assert.deepStrictEqual(await register("dee@example.com", true), expected(String(WEEK), "1"))
  })
})
