/**
 * DeerFlow's app reaches the gateway through its Next server, which rewrites `/api/langgraph/*` to the gateway's
 * `/api/*`; its LangGraph SDK client (apiUrl `.../api/langgraph`) rejoins a run whose stream broke at the path the
 * gateway's `Location` header names, appended to its apiUrl. The `Location` is therefore the path under the API
 * (`/threads/{id}/runs/{run_id}/stream`), whatever prefix the request came in by: with the prefix in it, the SDK
 * asked `/api/langgraph/api/threads/...` (a 404, five times) and the answer under way was lost.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type * as Http from "node:http"
import * as HttpServer from "../../support/httpServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const LONG = Array.from({ length: 40 }, (_, i) => `deer${i}`).join(" ")

let gateway: TestGateway
let proxy: HttpServer.Server
const scope = Effect.runSync(Scope.make())
/** The SDK's requests as the gateway got them (method and path). */
const forwarded: Array<string> = []
/** How many streams of a new run the proxy still breaks (after their fourth event). */
let breaks = 0

/** DeerFlow's Next rewrite: `/api/langgraph/x` to the gateway's `/api/x`, everything else as it is. */
const rewrite = (url: string) => (url.startsWith("/api/langgraph/") ? `/api/${url.slice(15)}` : url)

/** Forwards a request to the gateway; a new run's stream is cut once `breaks` says so, as a dropped connection. */
const forward = async (request: HttpServer.Received, response: Http.ServerResponse) => {
  const path = rewrite(request.url)
  forwarded.push(`${request.method} ${path.split("?")[0]}`)
  const headers: Record<string, string> = {}
  for (const name of ["content-type", "last-event-id", "accept"]) {
    const value = request.headers[name]
    if (typeof value === "string") headers[name] = value
  }
  const upstream = await fetch(`${gateway.url}${path}`, {
    method: request.method,
    headers,
    ...(request.body === "" ? {} : { body: request.body })
  })
  const answered: Record<string, string> = {}
  upstream.headers.forEach((value, name) => {
    if (["content-type", "location", "content-location"].includes(name)) answered[name] = value
  })
  response.writeHead(upstream.status, answered)
  const cut = request.method === "POST" && path.endsWith("/runs/stream") && breaks > 0
  if (cut) breaks -= 1
  const reader = upstream.body!.getReader()
  let events = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    response.write(value)
    events += Buffer.from(value).toString("utf8").split("\n\n").length - 1
    if (cut && events >= 4) {
      await reader.cancel()
      response.socket?.destroy()
      return
    }
  }
  response.end()
}

beforeAll(async () => {
  gateway = await Support.start({ script: () => LONG, server: { delayMs: 10 } })
  proxy = await Effect.runPromise(Scope.extend(
    HttpServer.start((request, response) => void forward(request, response).catch(() => response.destroy())),
    scope
  ))
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await gateway?.stop()
})

describe("DeerFlow's app behind its Next rewrite", () => {
  it("a broken run stream is rejoined where Location says: the events after the last one, each once", async () => {
    const client = new Client({ apiUrl: `${proxy.url}/api/langgraph`, apiKey: null })
    const thread = await client.threads.create()
    breaks = 1
    const parts: Array<{ event: string; data: any; id?: string }> = []
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Count the deer" }] },
      streamMode: ["values", "messages-tuple"],
      onDisconnect: "continue"
    })) parts.push(part as any)
    assert.strictEqual(breaks, 0)
    const runId = parts[0]!.data.run_id
    // the SDK rejoined once, at the run's stream under the API the app uses, with the last event's id
    const rejoins = forwarded.filter((call) => call === `GET /api/threads/${thread.thread_id}/runs/${runId}/stream`)
    assert.strictEqual(rejoins.length, 1, forwarded.join("\n"))
    assert.notInclude(forwarded.join("\n"), "/api/api/")
    assert.deepStrictEqual(parts.map((p) => Number(p.id)), parts.map((_, i) => i + 1))
    assert.strictEqual(parts.at(-1)!.event, "end")
    const values = parts.filter((p) => p.event === "values").at(-1)!.data
    assert.strictEqual(Support.visible(values.messages).at(-1).content, LONG)
  })

  it("the SDK's Location names the run's stream under whichever prefix the client uses", async () => {
    for (const prefix of ["", "/api", "/api/langgraph"]) {
      const thread = await (await fetch(`${gateway.url}${prefix}/threads`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}"
      })).json() as { thread_id: string }
      const streamed = await fetch(`${gateway.url}${prefix}/threads/${thread.thread_id}/runs/stream`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: Support.userInput("hi"), stream_mode: ["values"] })
      })
      await Support.readSse(streamed)
      const location = streamed.headers.get("location")!
      assert.match(location, /^\/threads\/[^/]+\/runs\/[^/]+\/stream$/, prefix)
      // (what the SDK asks: its apiUrl, then the Location)
      const rejoined = await fetch(`${gateway.url}${prefix}${location}`)
      assert.strictEqual(rejoined.status, 200, prefix)
      assert.strictEqual((await Support.readSse(rejoined)).events.at(-1)?.event, "end", prefix)
      const threadStream = await fetch(`${gateway.url}${prefix}/threads/${thread.thread_id}/stream`)
      assert.strictEqual(threadStream.headers.get("location"), `/threads/${thread.thread_id}/stream`, prefix)
      await threadStream.body?.cancel()
    }
  })
})
