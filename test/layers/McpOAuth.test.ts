/**
 * OAuth for MCP servers over HTTP and SSE (DeerFlow's `oauth` of a server entry): a token endpoint started by the
 * test hands out tokens; every request to the MCP server carries the current one; a token is kept until it is about
 * to expire, a rotated refresh token is used for the next refresh, concurrent calls share one token request, and a
 * refused token request is a readable problem of that server that does not show the secrets sent.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as McpClient from "../../src/layers/McpClient.js"
import * as McpTools from "../../src/layers/McpTools.js"
import * as OAuth from "../../src/layers/mcp/OAuth.js"
import { McpOAuth, serverProblem } from "../../src/services/Extensions.js"
import * as Tool from "../../src/services/Tool.js"
import * as Schema from "effect/Schema"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"
import * as Servers from "../support/mcpServers.js"

const SLOW = 120_000

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const invoke = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "call_1", name: tool.name, args }).pipe(
    Effect.provide(inRun().context),
    Effect.map((result) => M.contentText(result.message.content))
  )

/**
 * A token endpoint at `/token`: the n-th request gets `tok-n` (and, for the refresh grant, the rotated refresh
 * token `rt-n`), expiring in `expiresIn` seconds; `status` other than 200 refuses.
 */
const tokenEndpoint = (answer: { readonly status?: number; readonly expiresIn?: number } = {}) =>
  Effect.map(
    HttpServer.start((request, response) => {
      const n = tokens.count++ + 1
      if ((answer.status ?? 200) !== 200) {
        return HttpServer.reply(response, answer.status!, JSON.stringify({ error: "invalid_client" }), "application/json")
      }
      const form = new URLSearchParams(request.body)
      HttpServer.reply(
        response,
        200,
        JSON.stringify({
          access_token: `tok-${n}`,
          token_type: "Bearer",
          expires_in: answer.expiresIn ?? 3600,
          ...(form.get("grant_type") === "refresh_token" ? { refresh_token: `rt-${n}` } : {})
        }),
        "application/json"
      )
    }),
    (server) => ({ ...server, token: `${server.url}/token`, forms: () => server.requests.map((r) => new URLSearchParams(r.body)) })
  )
const tokens = { count: 0 }

describe("MCP servers with OAuth", () => {
  it.scopedLive("client_credentials over streamable HTTP: the form carries the grant, every request the token", () =>
    Effect.gen(function*() {
      tokens.count = 0
      const endpoint = yield* tokenEndpoint()
      const http = yield* Servers.httpServer
      const mcp = yield* McpClient.make({
        servers: {
          warehouse: Servers.server({
            type: "http",
            url: http.url,
            oauth: {
              token_url: endpoint.token,
              client_id: "antler",
              client_secret: "$WAREHOUSE_SECRET",
              scope: "tools:read",
              audience: "warehouse",
              extra_token_params: { resource: "https://warehouse.example", grant_type: "password" }
            }
          })
        }
      }).pipe(withEnv({ WAREHOUSE_SECRET: "s3cret-value" }))
      const catalog = yield* mcp.catalog
      const tools = McpTools.tools(mcp, catalog.tools)
      assert.strictEqual(yield* invoke(tools[0]!, { a: 40, b: 2 }), "40 + 2 = 42")
      assert.strictEqual(yield* invoke(tools[0]!, { a: 1, b: 2 }), "1 + 2 = 3")
      // one token, kept: every request to the server carried it
      assert.lengthOf(endpoint.requests, 1)
      const form = endpoint.forms()[0]!
      assert.deepStrictEqual(Object.fromEntries(form), {
        resource: "https://warehouse.example",
        grant_type: "client_credentials",
        scope: "tools:read",
        audience: "warehouse",
        client_id: "antler",
        client_secret: "s3cret-value"
      })
      assert.strictEqual(endpoint.requests[0]!.headers["content-type"], "application/x-www-form-urlencoded")
      assert.isTrue(http.headers.length >= 3)
      assert.isTrue(http.headers.every((h) => h.authorization === "Bearer tok-1"))
    }), SLOW)

  it.scopedLive("refresh_token over SSE: a token about to expire is taken again, with the rotated refresh token", () =>
    Effect.gen(function*() {
      tokens.count = 0
      // expires in 30 s, refreshed 60 s before expiry: every request takes a new one
      const endpoint = yield* tokenEndpoint({ expiresIn: 30 })
      const sse = yield* Servers.sseServer
      const mcp = yield* McpClient.make({
        servers: {
          loud: Servers.server({
            transport: "sse",
            url: sse.url,
            oauth: { token_url: endpoint.token, grant_type: "refresh_token", refresh_token: "rt-0" }
          })
        }
      })
      const catalog = yield* mcp.catalog
      assert.strictEqual(yield* invoke(McpTools.tools(mcp, catalog.tools)[0]!, { text: "antlers" }), "ANTLERS")
      const forms = endpoint.forms()
      assert.isTrue(forms.length >= 2, `${forms.length} token requests`)
      assert.deepStrictEqual(forms.map((f) => f.get("grant_type")), forms.map(() => "refresh_token"))
      // each refresh sends the refresh token the previous answer rotated to
      assert.deepStrictEqual(forms.map((f) => f.get("refresh_token")), forms.map((_, i) => `rt-${i}`))
      assert.isNull(forms[0]!.get("client_secret"))
      // the event stream and the posted messages both carried a token, each a fresher one
      const sent = sse.headers.map((h) => h.authorization)
      assert.isTrue(sent.length >= 2)
      assert.isTrue(sent.every((value) => /^Bearer tok-\d+$/.test(String(value))), sent.join(", "))
      assert.notStrictEqual(sent[0], sent[sent.length - 1])
    }), SLOW)

  it.scopedLive("a refused token request is the server's problem, readable, without the secret", () =>
    Effect.gen(function*() {
      tokens.count = 0
      const endpoint = yield* tokenEndpoint({ status: 401 })
      const http = yield* Servers.httpServer
      const mcp = yield* McpClient.make({
        servers: {
          locked: Servers.server({
            type: "http",
            url: http.url,
            oauth: { token_url: `${endpoint.token}?api_key=k3y`, client_id: "antler", client_secret: "s3cret-value" }
          })
        }
      })
      const catalog = yield* mcp.catalog
      assert.lengthOf(catalog.tools, 0)
      const message = catalog.problems[0]!.message
      assert.include(message, "MCP server 'locked' could not be started")
      assert.include(message, `the OAuth token request to ${endpoint.token} failed: HTTP 401`)
      assert.notInclude(message, "s3cret-value")
      assert.notInclude(message, "k3y")
      // the MCP server itself was never reached without a token
      assert.lengthOf(http.headers, 0)
    }), SLOW)
})

describe("OAuth token source", () => {
  const oauth = (fields: Record<string, unknown>) => Schema.decodeUnknownSync(McpOAuth)({ token_url: "https://auth.example/token", ...fields })
  const answering = (body: unknown, status = 200) => {
    const requests: Array<URLSearchParams> = []
    const post = (async (_url: unknown, init?: RequestInit) => {
      requests.push(new URLSearchParams(String(init?.body)))
      await new Promise((resolve) => setTimeout(resolve, 10))
      return new Response(typeof body === "string" ? body : JSON.stringify(body), { status })
    }) as typeof fetch
    return { post, requests }
  }

  it("calls made together share one token request; the token is kept until the skew before its expiry", async () => {
    let now = 1_000_000
    const { post, requests } = answering({ access_token: "abc", expires_in: "120", token_type: "" })
    const source = OAuth.tokenSource(oauth({ client_id: "a", client_secret: "b", refresh_skew_seconds: 60 }), {
      fetch: post,
      now: () => now
    })
    const headers = await Promise.all([source.authorization(), source.authorization(), source.authorization()])
    // (an empty token_type: the default type)
    assert.deepStrictEqual(headers, ["Bearer abc", "Bearer abc", "Bearer abc"])
    assert.lengthOf(requests, 1)
    now += 59_000
    await source.authorization()
    assert.lengthOf(requests, 1, "still a minute and a second before expiry")
    now += 2_000
    await source.authorization()
    assert.lengthOf(requests, 2, "within the skew: taken again")
  })

  it("an answer without the token field, not JSON, or too large is refused, saying which", async () => {
    const fails = async (body: string, status = 200) => {
      const source = OAuth.tokenSource(oauth({ client_id: "a", client_secret: "b" }), { fetch: answering(body, status).post })
      return source.authorization().then(() => "no failure", (error: Error) => error.message)
    }
    assert.strictEqual(
      await fails(JSON.stringify({ token: "x" })),
      "the OAuth token request to https://auth.example/token failed: its answer has no 'access_token'"
    )
    assert.include(await fails("<html>"), "its answer is not JSON")
    assert.include(await fails("x".repeat(OAuth.MAX_TOKEN_RESPONSE_BYTES + 1)), "its answer is larger than")
    assert.include(await fails("{}", 503), "HTTP 503")
    // a custom token field is read
    const custom = OAuth.tokenSource(oauth({ client_id: "a", client_secret: "b", token_field: "jwt" }), {
      fetch: answering({ jwt: "j.w.t" }).post
    })
    assert.strictEqual(await custom.authorization(), "Bearer j.w.t")
  })

  it("an entry whose grant lacks what it needs is a problem naming the field; a stdio server's oauth is not read", () => {
    const http = (fields: Record<string, unknown>) =>
      serverProblem("api", Servers.server({ type: "http", url: "https://mcp.example/mcp", oauth: { token_url: "https://auth.example/t", ...fields } }))
    assert.strictEqual(http({ client_id: "a" }), "MCP server 'api': oauth with grant_type client_credentials needs client_id and client_secret")
    assert.strictEqual(http({ grant_type: "refresh_token" }), "MCP server 'api': oauth with grant_type refresh_token needs refresh_token")
    assert.strictEqual(
      serverProblem("api", Servers.server({ type: "http", url: "https://mcp.example/mcp", oauth: { token_url: "ftp://x", client_id: "a", client_secret: "b" } })),
      "MCP server 'api': oauth.token_url must be http:// or https://"
    )
    assert.isUndefined(http({ client_id: "a", client_secret: "b" }))
    assert.isUndefined(http({ enabled: false }))
    assert.isUndefined(http({ grant_type: "refresh_token", refresh_token: "$RT" }))
    assert.isUndefined(serverProblem("local", Servers.everything({ oauth: { token_url: "x" } })))
  })

  it.effect("the client secret and refresh token are secrets to redact", () =>
    Effect.gen(function*() {
      const found = yield* McpClient.secrets({
        api: Servers.server({
          type: "http",
          url: "https://mcp.example/mcp",
          oauth: { token_url: "https://auth.example/t", grant_type: "refresh_token", refresh_token: "$RT", client_secret: "cs-42" }
        })
      }).pipe(withEnv({ RT: "rt-secret-1" }))
      assert.includeMembers([...found], ["rt-secret-1", "cs-42"])
    }))
})
