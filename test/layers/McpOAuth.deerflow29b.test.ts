/**
 * DeerFlow's `test_mcp_oauth.py`, the cases McpOAuth.test does not already pin: a server whose token endpoint
 * fails does not take the other servers' tools with it, and a failed token request leaves nothing held, so the next
 * call asks again (DeerFlow's lock released on failure and on cancellation).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as McpClient from "../../src/layers/McpClient.js"
import * as OAuth from "../../src/layers/mcp/OAuth.js"
import { McpOAuth } from "../../src/services/Extensions.js"
import * as HttpServer from "../support/httpServer.js"
import * as Servers from "../support/mcpServers.js"

const SLOW = 120_000

describe("test_mcp_oauth", () => {
  it.scopedLive("test_get_initial_oauth_headers_one_failing_server_does_not_drop_others", () =>
    Effect.gen(function*() {
      const endpoint = yield* HttpServer.start((request, response) => {
        if (request.url?.startsWith("/broken") === true) {
          return HttpServer.reply(response, 500, "{\"error\":\"down\"}", "application/json")
        }
        HttpServer.reply(response, 200, JSON.stringify({ access_token: "token-ok", token_type: "Bearer" }), "application/json")
      })
      const http = yield* Servers.httpServer
      const oauth = (path: string, id: string) => ({ token_url: `${endpoint.url}${path}`, client_id: id, client_secret: "cs" })
      const mcp = yield* McpClient.make({
        servers: {
          "broken-http": Servers.server({ type: "http", url: http.url, oauth: oauth("/broken", "client-id") }),
          "secure-http": Servers.server({ type: "http", url: http.url, oauth: oauth("/token", "client-id-2") })
        }
      })
      const catalog = yield* mcp.catalog
      assert.deepStrictEqual(catalog.problems.map((p) => p.server), ["broken-http"])
      assert.include(catalog.problems[0]!.message, "HTTP 500")
      assert.isAbove(catalog.tools.length, 0)
      assert.isTrue(catalog.tools.every((tool) => tool.server === "secure-http"))
      assert.isTrue(http.headers.length > 0 && http.headers.every((h) => h.authorization === "Bearer token-ok"))
    }), SLOW)

  it("test_get_authorization_header_cancelled_while_waiting_does_not_leak_lock: a failed request holds nothing", async () => {
    let calls = 0
    const post = (async () => {
      calls++
      if (calls === 1) throw new Error("connection reset")
      return new Response(JSON.stringify({ access_token: "abc" }), { status: 200 })
    }) as unknown as typeof fetch
    const source = OAuth.tokenSource(
      Schema.decodeUnknownSync(McpOAuth)({ token_url: "https://auth.example/token", client_id: "a", client_secret: "b" }),
      { fetch: post }
    )
    const first = await Promise.allSettled([source.authorization(), source.authorization()])
    assert.deepStrictEqual(first.map((r) => r.status), ["rejected", "rejected"])
    assert.strictEqual(calls, 1, "the two waiting calls shared the one request")
    assert.strictEqual(await source.authorization(), "Bearer abc")
    assert.strictEqual(calls, 2)
  })
})
