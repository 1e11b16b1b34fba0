/**
 * An account signing in without end: each sign-in opens a session kept in `accounts.db` until it expires, so a
 * script holding one password could grow the file without bound. An account keeps its newest
 * `MAX_SESSIONS_PER_ACCOUNT` sessions; a sign-in past them ends the oldest.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { MAX_SESSIONS_PER_ACCOUNT } from "../../../src/programs/gateway/accounts/AccountStore.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const EMAIL = "admin@example.com"
const PASSWORD = "a long and unusual passphrase 42"

let gateway: TestGateway

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: { gateway: { heartbeat_seconds: 1, auth: { accounts: true } } }
  })
})
afterAll(() => gateway?.stop())

/** The session cookie a response set. */
const sessionOf = (response: Response): string => {
  const line = response.headers.getSetCookie().find((cookie) => cookie.startsWith("access_token="))
  assert.isDefined(line)
  return line!.split(";")[0]!
}

const signIn = async () => {
  const response = await fetch(`${gateway.url}/api/v1/auth/login/local`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ username: EMAIL, password: PASSWORD }).toString()
  })
  assert.strictEqual(response.status, 200)
  return sessionOf(response)
}

const me = async (cookie: string) => (await fetch(`${gateway.url}/api/v1/auth/me`, { headers: { cookie } })).status

describe("an account's sessions", () => {
  it(`are its newest ${MAX_SESSIONS_PER_ACCOUNT}: a sign-in past them ends the oldest, no other`, async () => {
    const made = await fetch(`${gateway.url}/api/v1/auth/initialize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD })
    })
    assert.strictEqual(made.status, 201)
    const sessions = [sessionOf(made)]
    for (let i = 1; i < MAX_SESSIONS_PER_ACCOUNT; i++) sessions.push(await signIn())
    assert.strictEqual(await me(sessions[0]!), 200)
    sessions.push(await signIn())
    assert.strictEqual(await me(sessions[0]!), 401)
    for (const cookie of [sessions[1]!, sessions.at(-1)!]) assert.strictEqual(await me(cookie), 200)
  }, 120_000)
})
