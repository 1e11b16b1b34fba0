/**
 * DeerFlow's local accounts on `antler serve` (`gateway.auth.accounts: true`), through HTTP as DeerFlow's app
 * calls them: the first admin, a second account registered, signing in with the app's form, `me`, sessions in
 * HttpOnly cookies with a CSRF token that state-changing requests must send, sign-in attempts limited, password
 * changes ending the old sessions, sign-out, accounts kept across a restart. Each account is a user of its own:
 * neither sees the other's threads. API tokens work beside accounts. Without accounts, the routes answer as
 * DeerFlow's do with none (its auth-disabled user on an open gateway).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { browser, loginForm } from "../../support/browser.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "carol-token-0123456789abcdef"

const script = () => "Hello."

const json = (response: Response): Promise<any> => response.json()

const FORM = { "content-type": "application/x-www-form-urlencoded" }

describe("gateway accounts", () => {
  let gateway: TestGateway
  const current = () => gateway
  const config = {
    gateway: { heartbeat_seconds: 1, auth: { accounts: true, tokens: [{ token: TOKEN, user: "carol" }] } }
  }
  const admin = browser(current)
  const bob = browser(current)

  beforeAll(async () => {
    gateway = await Support.start({ script, config })
  })
  afterAll(() => gateway.stop())

  it("starts needing its first admin; nobody is signed in", async () => {
    const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
    assert.deepStrictEqual(await json(status), { needs_setup: true, registration_enabled: true })
    const me = await fetch(`${gateway.url}/api/v1/auth/me`)
    assert.strictEqual(me.status, 401)
    const threads = await fetch(`${gateway.url}/api/threads/search`, { method: "POST", body: "{}" })
    assert.strictEqual(threads.status, 401)
    const providers = await fetch(`${gateway.url}/api/v1/auth/providers`)
    assert.deepStrictEqual(await json(providers), { providers: [] })
  })

  it("makes the first admin once, signed in by HttpOnly cookie with a CSRF token", async () => {
    const made = await admin.fetch("/api/v1/auth/initialize", {
      method: "POST",
      body: JSON.stringify({ email: "Admin@Example.com", password: "correct horse battery", remember_me: true })
    })
    assert.strictEqual(made.status, 201)
    const user = await json(made)
    assert.strictEqual(user.email, "admin@example.com")
    assert.strictEqual(user.system_role, "admin")
    assert.strictEqual(user.needs_setup, false)
    assert.strictEqual(user.oauth_provider, null)
    const cookies = made.headers.getSetCookie()
    const access = cookies.find((c) => c.startsWith("access_token="))!
    const csrf = cookies.find((c) => c.startsWith("csrf_token="))!
    assert.match(access, /HttpOnly/i)
    assert.match(access, /SameSite=Lax/i)
    assert.notMatch(csrf, /HttpOnly/i)
    // the token is only in the cookie
    assert.notInclude(JSON.stringify(user), admin.cookies.get("access_token")!)

    const again = await browser(current).fetch("/api/v1/auth/initialize", {
      method: "POST",
      body: JSON.stringify({ email: "other@example.com", password: "another good one" })
    })
    assert.strictEqual(again.status, 409)
    assert.strictEqual((await json(again)).code, "system_already_initialized")
    const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
    assert.deepStrictEqual(await json(status), { needs_setup: false, registration_enabled: true })

    const me = await admin.fetch("/api/v1/auth/me")
    assert.deepStrictEqual(await json(me), { ...user })
  })

  it("registers a second account; a taken email and weak passwords are refused", async () => {
    const taken = await browser(current).fetch("/api/v1/auth/register", {
      method: "POST",
      body: JSON.stringify({ email: "admin@example.com", password: "yet another one" })
    })
    assert.strictEqual(taken.status, 400)
    assert.strictEqual((await json(taken)).code, "email_already_exists")
    for (const password of ["short", "password123"]) {
      const weak = await browser(current).fetch("/api/v1/auth/register", {
        method: "POST",
        body: JSON.stringify({ email: "weak@example.com", password })
      })
      assert.strictEqual(weak.status, 422)
      assert.match((await json(weak)).detail, /password/)
    }
    const made = await bob.fetch("/api/v1/auth/register", {
      method: "POST",
      body: JSON.stringify({ email: "bob@example.com", password: "bobs own secret" })
    })
    assert.strictEqual(made.status, 201)
    const user = await json(made)
    assert.strictEqual(user.system_role, "user")
    assert.ok(bob.cookies.has("access_token") && bob.cookies.has("csrf_token"))
  })

  it("keeps each account's threads its own", async () => {
    const made = await admin.fetch("/api/threads", {
      method: "POST",
      body: JSON.stringify({ thread_id: "shared-name", metadata: { owner: "admin" } })
    })
    assert.strictEqual(made.status, 200)
    assert.strictEqual((await admin.fetch("/api/threads/shared-name")).status, 200)
    assert.strictEqual((await bob.fetch("/api/threads/shared-name")).status, 404)
    const bobs = await bob.fetch("/api/threads/search", { method: "POST", body: "{}" })
    assert.deepStrictEqual(await json(bobs), [])
    // the same id is bob's to take, and stays apart from the admin's
    const his = await bob.fetch("/api/threads", {
      method: "POST",
      body: JSON.stringify({ thread_id: "shared-name", metadata: { owner: "bob" } })
    })
    assert.strictEqual(his.status, 200)
    const read = await admin.fetch("/api/threads/shared-name")
    assert.strictEqual((await json(read)).metadata.owner, "admin")
    const deleted = await bob.fetch("/api/threads/shared-name", { method: "DELETE" })
    assert.strictEqual(deleted.status, 200)
    assert.strictEqual((await admin.fetch("/api/threads/shared-name")).status, 200)
  })

  it("refuses a session's state-changing request without the session's CSRF token", async () => {
    const none = await admin.fetch("/api/threads", { method: "POST", body: "{}", csrf: false })
    assert.strictEqual(none.status, 403)
    assert.match((await json(none)).detail, /CSRF token missing/)
    const wrong = await admin.fetch("/api/threads", {
      method: "POST",
      body: "{}",
      csrf: false,
      headers: { "x-csrf-token": bob.cookies.get("csrf_token")! }
    })
    assert.strictEqual(wrong.status, 403)
    assert.match((await json(wrong)).detail, /CSRF token mismatch/)
    // another account's CSRF token, planted as the cookie too, is still not this session's
    const planted = await fetch(`${gateway.url}/api/threads`, {
      method: "POST",
      body: "{}",
      headers: {
        "content-type": "application/json",
        cookie: `access_token=${admin.cookies.get("access_token")}; csrf_token=${bob.cookies.get("csrf_token")}`,
        "x-csrf-token": bob.cookies.get("csrf_token")!
      }
    })
    assert.strictEqual(planted.status, 403)
  })

  it("signs in with the app's form; wrong passwords get invalid_credentials; forms go nowhere else", async () => {
    const wrong = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
      method: "POST",
      headers: FORM,
      body: loginForm("bob@example.com", "not his password")
    })
    assert.strictEqual(wrong.status, 401)
    const problem = await json(wrong)
    assert.strictEqual(problem.code, "invalid_credentials")
    assert.strictEqual(problem.message, "Incorrect email or password")
    assert.deepStrictEqual(wrong.headers.getSetCookie(), [])

    const second = browser(current)
    const ok = await second.fetch("/api/v1/auth/login/local", {
      method: "POST",
      headers: FORM,
      body: loginForm("BOB@example.com", "bobs own secret")
    })
    assert.strictEqual(ok.status, 200)
    assert.deepStrictEqual(await json(ok), { expires_in: 7 * 24 * 3600, needs_setup: false })
    assert.strictEqual((await json(await second.fetch("/api/v1/auth/me"))).email, "bob@example.com")

    const asJson = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "bob@example.com", password: "bobs own secret" })
    })
    assert.strictEqual(asJson.status, 415)
    const formElsewhere = await second.fetch("/api/threads", {
      method: "POST",
      headers: FORM,
      body: "thread_id=x"
    })
    assert.strictEqual(formElsewhere.status, 415)
  })

  it("marks the session's cookies Secure behind an HTTPS proxy (X-Forwarded-Proto or Forwarded)", async () => {
    const signIn = (headers: Record<string, string>) =>
      fetch(`${gateway.url}/api/v1/auth/login/local`, {
        method: "POST",
        headers: { ...FORM, ...headers },
        body: loginForm("bob@example.com", "bobs own secret")
      })
    const secure = async (headers: Record<string, string>) => {
      const answer = await signIn(headers)
      assert.strictEqual(answer.status, 200, JSON.stringify(headers))
      const cookies = answer.headers.getSetCookie()
      // (the session's, its CSRF token's and the remember-me choice's)
      assert.strictEqual(cookies.length, 3)
      return cookies.map((line) => /;\s*secure(;|$)/i.test(line))
    }
    assert.deepStrictEqual(await secure({}), [false, false, false])
    assert.deepStrictEqual(await secure({ "x-forwarded-proto": "https" }), [true, true, true])
    assert.deepStrictEqual(await secure({ forwarded: "proto=https;host=antler.example" }), [true, true, true])
    const first = { forwarded: "for=192.0.2.60;Proto=\"https\", proto=http" }
    assert.deepStrictEqual(await secure(first), [true, true, true])
    assert.deepStrictEqual(await secure({ forwarded: "proto=http;host=antler.example" }), [false, false, false])
  })

  it("limits failed sign-ins from one address", async () => {
    const limited = await Support.start({ script, config })
    try {
      const attempt = (password: string) =>
        fetch(`${limited.url}/api/v1/auth/initialize`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "dave@example.com", password: "daves good secret" })
        }).then(() =>
          fetch(`${limited.url}/api/v1/auth/login/local`, {
            method: "POST",
            headers: FORM,
            body: loginForm("dave@example.com", password)
          })
        )
      for (let i = 0; i < 5; i++) assert.strictEqual((await attempt(`wrong guess ${i}`)).status, 401)
      const locked = await attempt("daves good secret")
      assert.strictEqual(locked.status, 429)
      assert.ok(Number(locked.headers.get("retry-after")) > 0)
    } finally {
      await limited.stop()
    }
  })

  it("limits wrong current passwords of a password change as it limits sign-ins", async () => {
    const limited = await Support.start({ script, config })
    try {
      const dave = browser(() => limited)
      const made = await dave.fetch("/api/v1/auth/initialize", {
        method: "POST",
        body: JSON.stringify({ email: "dave@example.com", password: "daves good secret" })
      })
      assert.strictEqual(made.status, 201)
      const change = (current: string) =>
        dave.fetch("/api/v1/auth/change-password", {
          method: "POST",
          body: JSON.stringify({ current_password: current, new_password: "daves newer secret" })
        })
      for (let i = 0; i < 5; i++) assert.strictEqual((await change(`wrong guess ${i}`)).status, 400)
      assert.strictEqual((await change("daves good secret")).status, 429)
    } finally {
      await limited.stop()
    }
  })

  it("changes a password: the old sessions end, the new password signs in", async () => {
    const other = browser(current)
    await other.fetch("/api/v1/auth/login/local", {
      method: "POST",
      headers: FORM,
      body: loginForm("bob@example.com", "bobs own secret")
    })
    const before = new Map(bob.cookies)
    const wrong = await bob.fetch("/api/v1/auth/change-password", {
      method: "POST",
      body: JSON.stringify({ current_password: "not it at all", new_password: "bobs newer secret" })
    })
    assert.strictEqual(wrong.status, 400)
    assert.strictEqual((await json(wrong)).message, "Current password is incorrect")
    const noCsrf = await bob.fetch("/api/v1/auth/change-password", {
      method: "POST",
      csrf: false,
      body: JSON.stringify({ current_password: "bobs own secret", new_password: "bobs newer secret" })
    })
    assert.strictEqual(noCsrf.status, 403)

    const changed = await bob.fetch("/api/v1/auth/change-password", {
      method: "POST",
      body: JSON.stringify({
        current_password: "bobs own secret",
        new_password: "bobs newer secret",
        remember_me: true
      })
    })
    assert.strictEqual(changed.status, 200)
    assert.deepStrictEqual(await json(changed), { message: "Password changed successfully" })
    assert.notStrictEqual(bob.cookies.get("access_token"), before.get("access_token"))
    assert.strictEqual((await bob.fetch("/api/v1/auth/me")).status, 200)
    assert.strictEqual((await other.fetch("/api/v1/auth/me")).status, 401)
    const stale = await fetch(`${gateway.url}/api/v1/auth/me`, {
      headers: { cookie: `access_token=${before.get("access_token")}` }
    })
    assert.strictEqual(stale.status, 401)
    const old = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
      method: "POST",
      headers: FORM,
      body: loginForm("bob@example.com", "bobs own secret")
    })
    assert.strictEqual(old.status, 401)
  })

  it("keeps API tokens working beside accounts", async () => {
    const me = await fetch(`${gateway.url}/api/v1/auth/me`, { headers: { authorization: `Bearer ${TOKEN}` } })
    assert.deepStrictEqual(await json(me), {
      id: "carol",
      email: "carol@token.local",
      system_role: "user",
      needs_setup: false,
      oauth_provider: null
    })
    const list = await fetch(`${gateway.url}/api/threads/search`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: "{}"
    })
    assert.deepStrictEqual(await json(list), [])
    const bad = await fetch(`${gateway.url}/api/v1/auth/me`, {
      headers: { authorization: "Bearer not-a-token-at-all-0000" }
    })
    assert.strictEqual(bad.status, 401)
  })

  it("signs out: the session ends and its cookies are cleared", async () => {
    const token = admin.cookies.get("access_token")!
    const out = await admin.fetch("/api/v1/auth/logout", { method: "POST" })
    assert.strictEqual(out.status, 200)
    assert.deepStrictEqual(await json(out), { message: "Successfully logged out" })
    assert.strictEqual(admin.cookies.has("access_token"), false)
    const replayed = await fetch(`${gateway.url}/api/v1/auth/me`, { headers: { cookie: `access_token=${token}` } })
    assert.strictEqual(replayed.status, 401)
  })

  it("keeps accounts and their threads across a restart", async () => {
    const home = gateway.home
    await gateway.stop()
    gateway = await Support.start({ script, config, home })
    const again = browser(current)
    const ok = await again.fetch("/api/v1/auth/login/local", {
      method: "POST",
      headers: FORM,
      body: loginForm("admin@example.com", "correct horse battery")
    })
    assert.strictEqual(ok.status, 200)
    assert.strictEqual((await again.fetch("/api/threads/shared-name")).status, 200)
    const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
    assert.strictEqual((await json(status)).needs_setup, false)
  })
})

describe("gateway without accounts", () => {
  it("answers DeerFlow's auth-disabled user on an open gateway, and has no sign-in", async () => {
    const gateway = await Support.start({ script })
    try {
      const me = await fetch(`${gateway.url}/api/v1/auth/me`)
      assert.deepStrictEqual(await json(me), {
        id: "default",
        email: "default@test.local",
        system_role: "admin",
        needs_setup: false,
        oauth_provider: null
      })
      const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
      assert.deepStrictEqual(await json(status), { needs_setup: false, registration_enabled: false })
      const login = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
        method: "POST",
        headers: FORM,
        body: loginForm("a@example.com", "whatever it is")
      })
      assert.strictEqual(login.status, 404)
      assert.match((await json(login)).detail, /gateway\.auth\.accounts/)
    } finally {
      await gateway.stop()
    }
  })

  // and as DeerFlow's config.yaml closes it (test_local_registration_gate.py): auth.local.allow_registration
  for (
    const [how, config] of [
      ["gateway.auth.allow_registration", { gateway: { auth: { accounts: true, allow_registration: false } } }],
      ["DeerFlow's auth.local.allow_registration", {
        auth: { local: { allow_registration: false } },
        gateway: { auth: { accounts: true } }
      }]
    ] as const
  ) {
    it(`refuses registration when it is closed (${how})`, async () => {
      const gateway = await Support.start({ script, config })
      try {
        const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
        assert.deepStrictEqual(await json(status), { needs_setup: true, registration_enabled: false })
        const made = await fetch(`${gateway.url}/api/v1/auth/register`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "eve@example.com", password: "eves long secret" })
        })
        assert.strictEqual(made.status, 403)
        assert.strictEqual((await json(made)).code, "registration_disabled")
        // closing registration never blocks making the first admin
        const admin = await fetch(`${gateway.url}/api/v1/auth/initialize`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "eve@example.com", password: "eves long secret" })
        })
        assert.strictEqual(admin.status, 201)
        assert.strictEqual((await json(admin)).system_role, "admin")
      } finally {
        await gateway.stop()
      }
    })
  }
})
