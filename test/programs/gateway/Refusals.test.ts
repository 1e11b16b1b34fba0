/**
 * Requests the gateway takes no route for: a path it does not serve, a method a path does not take; and requests
 * Node's HTTP parser refuses before any route sees them: a method it does not know, headers over its limit, no
 * Host header. Each gets a JSON problem saying so (as every other refusal does), not an empty answer a client
 * cannot tell from a broken proxy; and the gateway serves the next request as before. Raw HTTP requests
 * (node:http, or a socket where node:http would not send the request) against a real gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Http from "node:http"
import * as Net from "node:net"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

let gateway: TestGateway
let port = 0

/** A raw request with exactly these headers (`host` added unless given as null). */
const raw = (method: string, path: string, headers: Record<string, string | null> = {}) =>
  new Promise<Answer>((resolve, reject) => {
    const options = { host: "127.0.0.1", port, method, path, setHost: false, agent: false }
    const request = Http.request(options, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, body: text }))
    })
    request.on("error", reject)
    for (const [name, value] of Object.entries({ host: `127.0.0.1:${port}`, ...headers })) {
      if (value !== null) request.setHeader(name, value)
    }
    request.end()
  })

/** The text of a request written to a socket as is, and the answer read until the server closes it. */
const socket = (text: string) =>
  new Promise<Answer>((resolve, reject) => {
    const connection = Net.connect(port, "127.0.0.1", () => connection.end(text))
    let received = ""
    connection.setEncoding("latin1")
    connection.on("data", (chunk) => (received += chunk))
    connection.on("error", reject)
    connection.on("close", () => {
      const [head = "", ...rest] = received.split("\r\n\r\n")
      const [statusLine = "", ...lines] = head.split("\r\n")
      const headers: Http.IncomingHttpHeaders = {}
      for (const line of lines) {
        const colon = line.indexOf(":")
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: rest.join("\r\n\r\n") })
    })
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

describe("requests Node's HTTP parser refuses", () => {
  it("a method Node does not know is a 400 problem", async () => {
    for (const method of ["FOO", "PROPFIND2", "BREW"]) {
      const refused = problem(await socket(`${method} /ok HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`))
      assert.strictEqual(refused.status, 400)
      assert.include(refused.detail, "not an HTTP request")
    }
    assert.strictEqual((await raw("GET", "/ok")).status, 200)
  })

  it("headers over Node's limit are a 431 problem", async () => {
    for (const name of ["x-fill", "authorization", "cookie"]) {
      const refused = problem(await raw("GET", "/ok", { [name]: "f".repeat(20_000) }))
      assert.strictEqual(refused.status, 431)
      assert.include(refused.detail, "headers")
    }
    assert.strictEqual((await raw("GET", "/ok")).status, 200)
  })

  it("the answer to a HEAD request over the limit has no body (a client reads none and fails on one)", async () => {
    const refused = await raw("HEAD", "/ok", { "x-fill": "f".repeat(40_000) })
    assert.strictEqual(refused.status, 431)
    assert.strictEqual(refused.headers["content-type"], "application/problem+json")
    assert.strictEqual(refused.body, "")
  })

  it("a request without a Host header is a 400 problem saying so", async () => {
    const refused = problem(await raw("GET", "/ok", { host: null }))
    assert.strictEqual(refused.status, 400)
    assert.include(refused.detail, "no Host header")
    assert.strictEqual(problem(await raw("POST", "/threads", { host: null })).status, 400)
  })
})
