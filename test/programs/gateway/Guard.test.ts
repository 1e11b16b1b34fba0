/**
 * Whom the gateway answers (`Guard`): a `Host` naming the gateway (any loopback spelling with its port when bound
 * to loopback, or a name of `gateway.allowed_hosts`), else 403 for every route, reads included (DNS rebinding);
 * state-changing requests only from the gateway's own page, an origin of `gateway.cors.allow_origins`, or a
 * client that is no browser; else 403, and nothing changes. Raw HTTP requests (node:http sets any `Host`) against
 * a real gateway; the same attacks from a real browser are in CrossSite.test.ts.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Http from "node:http"
import * as Os from "node:os"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as App from "../../../src/programs/App.js"
import * as Gateway from "../../../src/programs/gateway/Gateway.js"
import * as Guard from "../../../src/programs/gateway/Guard.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** A raw request to a gateway, with exactly the given headers (`host` included, or left out with `null`). */
const raw = (
  gateway: TestGateway,
  method: string,
  path: string,
  headers: Record<string, string | null> = {},
  body?: string
) =>
  new Promise<Answer>((resolve, reject) => {
    const port = Number(new URL(gateway.url).port)
    const request = Http.request({ host: "127.0.0.1", port, method, path, setHost: false }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, body: text }))
    })
    request.on("error", reject)
    const all: Record<string, string | null> = { host: `127.0.0.1:${port}`, ...headers }
    for (const [name, value] of Object.entries(all)) if (value !== null) request.setHeader(name, value)
    if (body !== undefined) {
      request.setHeader("content-type", "application/json")
      request.setHeader("content-length", Buffer.byteLength(body))
      request.end(body)
    } else {
      request.end()
    }
  })

const detail = (answer: Answer) => {
  assert.strictEqual(answer.headers["content-type"], "application/problem+json")
  return (JSON.parse(answer.body) as { detail: string }).detail
}

const runBody = JSON.stringify({ input: { messages: [{ type: "human", content: "hi" }] } })

let gateway: TestGateway
let port = 0
let threadId = ""

const threadIds = async () => {
  const found = await raw(gateway, "POST", "/threads/search", {}, JSON.stringify({ limit: 1000 }))
  assert.strictEqual(found.status, 200)
  return (JSON.parse(found.body) as Array<{ thread_id: string }>).map((t) => t.thread_id).sort()
}

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Hello.",
    config: { gateway: { heartbeat_seconds: 1, allowed_hosts: ["antler.example", "pinned.example:9999"] } }
  })
  port = Number(new URL(gateway.url).port)
  const created = await raw(gateway, "POST", "/threads", {}, JSON.stringify({ metadata: { owner: "me" } }))
  threadId = (JSON.parse(created.body) as { thread_id: string }).thread_id
})
afterAll(async () => {
  await gateway?.stop()
})

describe("the Host header", () => {
  it("bound to loopback, any loopback spelling with the gateway's port is answered", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      assert.strictEqual((await raw(gateway, "GET", `/threads/${threadId}`, { host })).status, 200, host)
    }
    // and the names of gateway.allowed_hosts: a bare name on any port, a name:port on that port
    for (const host of ["antler.example", `antler.example:${port}`, "pinned.example:9999"]) {
      assert.strictEqual((await raw(gateway, "GET", `/threads/${threadId}`, { host })).status, 200, host)
    }
  })

  it("another name is refused on every route, reads and the page included: DNS rebinding reads nothing", async () => {
    const before = await threadIds()
    const hosts = [
      `attacker.example:${port}`,
      `127.0.0.1:${port + 1}`,
      "127.0.0.1",
      "pinned.example",
      `pinned.example:${port}`
    ]
    for (const host of hosts) {
      const requests: Array<[string, string, string | undefined]> = [
        ["GET", "/", undefined],
        ["GET", `/threads/${threadId}/state`, undefined],
        ["GET", `/api/threads/${threadId}/uploads/list`, undefined],
        ["POST", "/threads/search", "{}"],
        ["POST", "/threads", JSON.stringify({ metadata: { rebound: true } })],
        ["POST", `/threads/${threadId}/runs/wait`, runBody],
        ["DELETE", `/threads/${threadId}`, undefined]
      ]
      for (const [method, path, body] of requests) {
        const answer = await raw(gateway, method, path, { host }, body)
        assert.strictEqual(answer.status, 403, `${method} ${path} with Host ${host}`)
        assert.include(detail(answer), "gateway.allowed_hosts")
        assert.notInclude(answer.body, threadId)
      }
    }
    assert.deepStrictEqual(await threadIds(), before)
    assert.strictEqual(gateway.scripted.requests.length, 0)
  })

  it("no Host, or one that is not a host, is a 400", async () => {
    assert.strictEqual((await raw(gateway, "GET", "/ok", { host: null })).status, 400)
    const bad = await raw(gateway, "GET", "/ok", { host: "http://127.0.0.1/" })
    assert.strictEqual(bad.status, 400)
    assert.include(detail(bad), "not a host name")
  })

  it("decides by name and port, as the pure check", () => {
    const loopback: Guard.Options = { host: "127.0.0.1", port: 8001, allowedHosts: [], allowOrigins: [] }
    assert.isUndefined(Guard.hostProblem("127.0.0.1:8001", loopback))
    assert.isUndefined(Guard.hostProblem("127.5.6.7:8001", loopback))
    assert.isUndefined(Guard.hostProblem("[::1]:8001", { ...loopback, host: "::1" }))
    assert.isDefined(Guard.hostProblem("127.0.0.1:8002", loopback))
    assert.isDefined(Guard.hostProblem("localhost.attacker.example:8001", loopback))
    assert.isDefined(Guard.hostProblem("127.0.0.1.nip.io:8001", loopback))
    // bound to port 80, a Host without a port is on it
    assert.isUndefined(Guard.hostProblem("localhost", { ...loopback, port: 80 }))
    // bound to one address: that address; bound to all: this machine's addresses
    const lan: Guard.Options = { host: "192.168.7.9", port: 8001, allowedHosts: [], allowOrigins: [] }
    assert.isUndefined(Guard.hostProblem("192.168.7.9:8001", lan))
    assert.isDefined(Guard.hostProblem("localhost:8001", lan))
    const all: Guard.Options = { host: "0.0.0.0", port: 8001, allowedHosts: [], allowOrigins: [] }
    const mine = Object.values(Os.networkInterfaces()).flat().map((i) => i!.address)
    for (const address of mine) {
      const host = address.includes(":") ? `[${address}]:8001` : `${address}:8001`
      // (link-local IPv6 addresses carry a zone, which no Host can)
      if (!address.includes("%")) assert.isUndefined(Guard.hostProblem(host, all), host)
    }
    assert.isDefined(Guard.hostProblem("rebind.example:8001", all))
  })
})

describe("the Origin of state-changing requests", () => {
  const json = JSON.stringify({ metadata: { from: "a page" } })

  it("another site's page is refused (403), with or without its Origin, and nothing changes", async () => {
    const before = await threadIds()
    const pages: Array<Record<string, string>> = [
      { origin: `http://127.0.0.1:${port + 1}` },
      { origin: "http://attacker.example" },
      { origin: `http://localhost:${port}.attacker.example` },
      { origin: "null" },
      // the own page's origin with a path, a port that is no number (DeerFlow's test_csrf_middleware refuses both)
      { origin: `http://127.0.0.1:${port}/path` },
      { origin: `http://127.0.0.1:${port}/` },
      { origin: "http://127.0.0.1:bad" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" }
    ]
    for (const headers of pages) {
      const requests: Array<[string, string, string | undefined]> = [
        ["POST", "/threads", json],
        ["POST", `/threads/${threadId}/runs`, runBody],
        ["PATCH", `/threads/${threadId}`, JSON.stringify({ metadata: { owner: "attacker" } })],
        ["DELETE", `/threads/${threadId}`, undefined],
        ["POST", `/api/threads/${threadId}/uploads`, undefined]
      ]
      for (const [method, path, body] of requests) {
        const answer = await raw(gateway, method, path, headers, body)
        assert.strictEqual(answer.status, 403, `${method} ${path} ${JSON.stringify(headers)}`)
        assert.include(detail(answer), "refused")
      }
    }
    assert.deepStrictEqual(await threadIds(), before)
    const thread = await raw(gateway, "GET", `/threads/${threadId}`)
    assert.deepStrictEqual((JSON.parse(thread.body) as { metadata: unknown }).metadata, { owner: "me" })
    assert.strictEqual(gateway.scripted.requests.length, 0)
  })

  it("the gateway's own page (any loopback spelling it was opened by) and clients without an Origin may", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const headers = { host, origin: `http://${host}`, "sec-fetch-site": "same-origin" }
      const own = await raw(gateway, "POST", "/threads", headers, json)
      assert.strictEqual(own.status, 200, host)
    }
    assert.strictEqual((await raw(gateway, "POST", "/threads", {}, json)).status, 200)
    // a page opened by one spelling is not the page of another
    const spelling = { host: `127.0.0.1:${port}`, origin: `http://localhost:${port}` }
    const other = await raw(gateway, "POST", "/threads", spelling, json)
    assert.strictEqual(other.status, 403)
    // reads from other origins reach the route (CORS decides whether a browser may read the answer)
    const read = await raw(gateway, "GET", `/threads/${threadId}`, { origin: "http://attacker.example" })
    assert.strictEqual(read.status, 200)
    assert.isUndefined(read.headers["access-control-allow-origin"])
  })

  it("an origin of gateway.cors.allow_origins may (written with a trailing slash, too)", async () => {
    const cors = await Support.start({
      script: () => "Hello.",
      config: { gateway: { cors: { allow_origins: ["http://ui.example:3000/"] } } }
    })
    try {
      const allowed = await raw(cors, "POST", "/threads", { origin: "http://ui.example:3000" }, json)
      assert.strictEqual(allowed.status, 200)
      assert.strictEqual(allowed.headers["access-control-allow-origin"], "http://ui.example:3000")
      assert.strictEqual((await raw(cors, "POST", "/threads", { origin: "http://ui.example:3001" }, json)).status, 403)
      const path = await raw(cors, "POST", "/threads", { origin: "http://ui.example:3000/app" }, json)
      assert.strictEqual(path.status, 403)
    } finally {
      await cors.stop()
    }
  })

  it("allow_origins \"*\" needs API tokens: without, no start; with, any origin is answered", async () => {
    assert.include(
      await startError({ gateway: { cors: { allow_origins: ["*"] } } }),
      "refusing gateway.cors.allow_origins \"*\" without API tokens"
    )
    const token = "token-of-the-ui-0123456789"
    const open = await Support.start({
      script: () => "Hello.",
      config: { gateway: { cors: { allow_origins: ["*"] }, auth: { tokens: [{ token, user: "ui" }] } } }
    })
    try {
      const headers = { origin: "http://anywhere.example", authorization: `Bearer ${token}` }
      const created = await raw(open, "POST", "/threads", headers, json)
      assert.strictEqual(created.status, 200)
      assert.strictEqual(created.headers["access-control-allow-origin"], "*")
    } finally {
      await open.stop()
    }
  })
})

describe("signing in from another site's page", () => {
  it("allow_origins \"*\" admits no page without a token: no first admin, account, sign-in, sign-out", async () => {
    const token = "token-of-the-ui-0123456789"
    const gateway = await Support.start({
      script: () => "Hello.",
      config: {
        gateway: { cors: { allow_origins: ["*"] }, auth: { accounts: true, tokens: [{ token, user: "ui" }] } }
      }
    })
    const post = (path: string, headers: Record<string, string>, body?: string) =>
      fetch(`${gateway.url}${path}`, { method: "POST", headers, ...(body === undefined ? {} : { body }) })
    const JSON_BODY = { "content-type": "application/json" }
    const FORM = { "content-type": "application/x-www-form-urlencoded" }
    const evil = { origin: "http://evil.example" }
    const account = (email: string) => JSON.stringify({ email, password: "a-long-passphrase-9" })
    const form = (email: string) => new URLSearchParams({ username: email, password: "a-long-passphrase-9" }).toString()
    try {
      // a page of any origin may not make the first admin of a fresh gateway (the password would be its own)
      const seized = await post("/api/v1/auth/initialize", { ...JSON_BODY, ...evil }, account("evil@example.com"))
      assert.strictEqual(seized.status, 403)
      assert.include(((await seized.json()) as { detail: string }).detail, "refused")
      const status = await fetch(`${gateway.url}/api/v1/auth/setup-status`)
      assert.deepInclude(await status.json(), { needs_setup: true })
      // a client that is no browser may; then a foreign page may neither register nor sign anyone in (login CSRF:
      // the victim's browser signed in to the attacker's account), nor sign out
      assert.strictEqual((await post("/api/v1/auth/initialize", JSON_BODY, account("admin@example.com"))).status, 201)
      assert.strictEqual((await post("/api/v1/auth/register", JSON_BODY, account("mallory@example.com"))).status, 201)
      const refused: Array<[string, Record<string, string>, string | undefined]> = [
        ["/api/v1/auth/register", JSON_BODY, account("victim@example.com")],
        ["/api/v1/auth/login/local", FORM, form("mallory@example.com")],
        ["/api/v1/auth/logout", {}, undefined]
      ]
      for (const [path, headers, body] of refused) {
        const answer = await post(path, { ...headers, ...evil }, body)
        assert.strictEqual(answer.status, 403, path)
        assert.deepStrictEqual(answer.headers.getSetCookie(), [], path)
      }
      const victim = await post("/api/v1/auth/login/local", FORM, form("victim@example.com"))
      assert.strictEqual(victim.status, 401)
      // the gateway's own page signs in; a page with a token still uses the API from anywhere
      const port = new URL(gateway.url).port
      const own = await post("/api/v1/auth/login/local", { ...FORM, origin: `http://127.0.0.1:${port}` },
        form("mallory@example.com"))
      assert.strictEqual(own.status, 200)
      assert.isNotEmpty(own.headers.getSetCookie())
      const withToken = await post("/threads", { ...JSON_BODY, ...evil, authorization: `Bearer ${token}` }, "{}")
      assert.strictEqual(withToken.status, 200)
    } finally {
      await gateway.stop()
    }
  })
})

describe("gateway.allowed_hosts in config.yaml", () => {
  it("is decoded: an entry with a scheme or a path is refused, saying what an entry is", async () => {
    const home = Support.tempDir("antler-hosts-")
    const models = [{ name: "m", model: "m", api_key: "sk-000000000000" }]
    const exit = await Effect.runPromiseExit(
      ConfigFile.fromObject({ models, gateway: { allowed_hosts: ["https://antler.example/"] } }, { home })
    )
    assert.isTrue(Exit.isFailure(exit))
    const message = String(Exit.isFailure(exit) ? exit.cause : "")
    assert.include(message, "allowed_hosts")
    assert.include(message, "no scheme, no path")
  })
})

/** Why a gateway with this configuration does not start. */
const startError = async (config: Record<string, unknown>) => {
  const home = Support.tempDir("antler-start-")
  const exit = await Effect.runPromiseExit(Effect.gen(function*() {
    const models = [{ name: "m", model: "m", api_key: "sk-000000000000" }]
    const app = yield* ConfigFile.fromObject({ models, ...config }, { home })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    return yield* Layer.launch(Gateway.layer({ app, choice, host: "127.0.0.1", port: 0 }))
  }))
  assert.isTrue(Exit.isFailure(exit))
  return String(Exit.isFailure(exit) ? exit.cause : "")
}
