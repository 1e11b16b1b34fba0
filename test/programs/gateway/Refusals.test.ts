/**
 * Requests the gateway takes no route for: a path it does not serve, a method a path does not take. Each gets a
 * JSON problem saying so (as every other refusal does), not an empty answer a client cannot tell from a broken
 * proxy; and the gateway serves the next request as before. Raw HTTP requests (node:http) against a real gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Http from "node:http"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

let gateway: TestGateway
let port = 0

/** A raw request with exactly these headers (`host` added unless given). */
const raw = (method: string, path: string, headers: Record<string, string> = {}) =>
  new Promise<Answer>((resolve, reject) => {
    const request = Http.request({ host: "127.0.0.1", port, method, path, setHost: false, agent: false }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, body: text }))
    })
    request.on("error", reject)
    for (const [name, value] of Object.entries({ host: `127.0.0.1:${port}`, ...headers })) {
      request.setHeader(name, value)
    }
    request.end()
  })

/** The problem an answer is: its status and detail. */
const problem = (answer: Answer) => {
  assert.strictEqual(answer.headers["content-type"], "application/problem+json", `${answer.status}: ${answer.body}`)
  const body = JSON.parse(answer.body) as { type: string; title: string; status: number; detail: string }
  assert.strictEqual(body.status, answer.status)
  assert.strictEqual(body.type, "about:blank")
  assert.isString(body.title)
  return { status: answer.status, detail: body.detail }
}

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  port = Number(new URL(gateway.url).port)
})
afterAll(() => gateway?.stop())

describe("requests no route takes", () => {
  it("a path the gateway does not serve is a 404 problem naming it, under every prefix", async () => {
    for (const path of ["/nope", "/api/nope", "/api/langgraph/threads/t1/nope", "/threads/t1/uploads/list"]) {
      const refused = problem(await raw("GET", path))
      assert.strictEqual(refused.status, 404)
      assert.include(refused.detail, `GET ${path}`)
    }
    assert.strictEqual((await raw("GET", "/ok")).status, 200)
  })

  it("a method a path does not take is a 404 problem, HEAD of a GET route is answered as GET", async () => {
    for (const [method, path] of [["PUT", "/threads"], ["DELETE", "/ok"], ["PATCH", "/api/models"], ["OPTIONS", "/"]]) {
      const refused = problem(await raw(method!, path!))
      assert.strictEqual(refused.status, 404)
      assert.include(refused.detail, `${method} ${path}`)
    }
    const head = await raw("HEAD", "/ok")
    assert.strictEqual(head.status, 200)
  })

  it("a very long path is named shortened", async () => {
    const path = `/${"x".repeat(5000)}`
    const refused = problem(await raw("GET", path))
    assert.strictEqual(refused.status, 404)
    assert.isBelow(refused.detail.length, 500)
  })
})
