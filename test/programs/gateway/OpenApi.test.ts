/**
 * The gateway's API documentation, against a real gateway with API tokens: `/openapi.json` is a valid OpenAPI 3
 * document (its references resolve, its path parameters match its paths, its schemas are JSON Schemas) that
 * lists every route of the API the gateway serves (the route table of `routes.ts`, every LangGraph path under each
 * of its prefixes), and what the gateway answers has the shapes it documents (a short session's answers and
 * refusals validated against it). `/docs` is an HTML page, open without a token but behind the Host guard like
 * every route; in a real headless Chromium it shows every operation with no request leaving the gateway (no
 * CDN: the gateway may run without network).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import * as Http from "node:http"
import { chromium } from "playwright-core"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { CHROMIUM, requireOrWarn } from "../../support/chromium.js"
import { DOCS, ROUTES, WEB } from "./routes.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "openapi-test-token-0123456789"

type Json = Record<string, any>

let gateway: TestGateway
let spec: Json

const script = (body: ChatRequestBody) =>
  JSON.stringify(body.messages).includes("Say hello") ? "Hello from the scripted model." : "Noted."

/** A request with the token, JSON in and out. */
const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers
    },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {})
  })
  const text = await response.text()
  return { status: response.status, type: response.headers.get("content-type") ?? "", text }
}

/** A raw GET with exactly this Host header. */
const getWithHost = (path: string, host: string) =>
  new Promise<{ status: number; type: string }>((resolve, reject) => {
    const port = Number(new URL(gateway.url).port)
    const request = Http.request({ host: "127.0.0.1", port, path, setHost: false }, (response) => {
      response.resume()
      response.on("end", () => resolve({ status: response.statusCode!, type: response.headers["content-type"] ?? "" }))
    })
    request.on("error", reject)
    request.setHeader("host", host)
    request.end()
  })

/** An OpenAPI path as the router writes it: `{name}` as `:name`, the wildcard `{*}` as `*`. */
const routerPath = (path: string) => path.replace(/\{\*\}/g, "*").replace(/\{([^}]+)\}/g, ":$1")

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

/** The `$ref`s of a JSON value. */
const refsOf = (value: unknown, into: Array<string> = []): Array<string> => {
  if (Array.isArray(value)) for (const item of value) refsOf(item, into)
  else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === "$ref" && typeof item === "string") into.push(item)
      else refsOf(item, into)
    }
  }
  return into
}

/** The value a local reference (`#/a/b`) points to in the document. */
const resolve = (ref: string): unknown =>
  ref.slice(2).split("/").map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce<any>((node, part) => (node === undefined ? undefined : node[part]), spec)

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true })

/** A JSON pointer's segment. */
const segment = (text: string) => text.replace(/~/g, "~0").replace(/\//g, "~1")

/** Checks a JSON answer against the schema the document gives for that operation's status and content type. */
const conforms = (method: string, path: string, answer: { status: number; type: string; text: string }) => {
  const operation = spec.paths[path]?.[method.toLowerCase()]
  assert.isDefined(operation, `${method} ${path} is documented`)
  const response = operation.responses[String(answer.status)]
  assert.isDefined(response, `${method} ${path}: status ${answer.status} is documented (${answer.text.slice(0, 300)})`)
  const type = answer.type.split(";")[0]!.trim()
  const media = response.content?.[type]
  assert.isDefined(media, `${method} ${path} ${answer.status}: ${type} is documented`)
  const pointer = `#/paths/${segment(path)}/${method.toLowerCase()}/responses/${answer.status}/content/` +
    `${segment(type)}/schema`
  const validate = ajv.getSchema(`openapi.json${pointer}`)!
  const valid = validate(JSON.parse(answer.text))
  const errors = ajv.errorsText(validate.errors)
  assert.isTrue(valid, `${method} ${path} ${answer.status}: ${errors}\n${answer.text.slice(0, 500)}`)
}

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: TOKEN, user: "alice" }] } } }
  })
  const response = await fetch(`${gateway.url}/openapi.json`)
  assert.strictEqual(response.status, 200)
  assert.match(response.headers.get("content-type") ?? "", /^application\/json/)
  spec = await response.json() as Json
  ajv.addSchema({ ...spec, $id: "openapi.json" })
}, 60_000)
afterAll(() => gateway?.stop())

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3 document: references resolve, path parameters match, schemas are JSON Schemas", () => {
    assert.match(spec.openapi, /^3\.\d+\.\d+$/)
    assert.isString(spec.info.title)
    assert.isString(spec.info.version)
    for (const ref of refsOf(spec)) {
      assert.isTrue(ref.startsWith("#/"), `${ref} is local`)
      assert.isDefined(resolve(ref), `${ref} resolves`)
    }
    const operationIds = new Set<string>()
    for (const [path, item] of Object.entries(spec.paths as Json)) {
      assert.isTrue(path.startsWith("/"), path)
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]).sort()
      for (const url of (item.servers ?? []).map((server: Json) => server.url)) assert.match(url, /^\//)
      for (const method of Object.keys(item).filter((key) => METHODS.includes(key))) {
        const operation = item[method]
        assert.isString(operation.operationId)
        assert.isFalse(operationIds.has(operation.operationId), `${operation.operationId} is unique`)
        operationIds.add(operation.operationId)
        const inPath = (operation.parameters ?? []).filter((p: Json) => p.in === "path")
        assert.deepStrictEqual(inPath.map((p: Json) => p.name).sort(), templated, `${method} ${path}`)
        for (const parameter of inPath) assert.isTrue(parameter.required, `${method} ${path} ${parameter.name}`)
        assert.isAbove(Object.keys(operation.responses).length, 0, `${method} ${path} has responses`)
        for (const [status, response] of Object.entries(operation.responses as Json)) {
          assert.match(status, /^[1-5]\d\d$/)
          assert.isString(response.description)
          for (const type of Object.keys(response.content ?? {})) {
            const pointer = `#/paths/${segment(path)}/${method}/responses/${status}/content/${segment(type)}/schema`
            assert.isFunction(ajv.getSchema(`openapi.json${pointer}`), `${method} ${path} ${status} ${type}`)
          }
        }
      }
    }
    for (const name of Object.keys(spec.components.schemas)) {
      assert.isFunction(ajv.getSchema(`openapi.json#/components/schemas/${name}`), name)
    }
    // every refusal is documented as a problem, never as HttpApi's own error
    const errors = Object.values(spec.paths as Json).flatMap((item) =>
      METHODS.filter((m) => item[m] !== undefined).flatMap((m) =>
        Object.entries(item[m].responses as Json).filter(([status]) => Number(status) >= 400).map(([, r]) => r)
      )
    )
    assert.isAbove(errors.length, 0)
    for (const error of errors) {
      assert.deepStrictEqual(Object.keys(error.content), ["application/problem+json"])
    }
    assert.notInclude(JSON.stringify(spec), "HttpApiDecodeError")
  })

  it("lists every route of the API the gateway serves, each LangGraph path under each of its prefixes", () => {
    const documented = Object.entries(spec.paths as Json).flatMap(([path, item]) => {
      const bases: ReadonlyArray<string> = (item.servers ?? spec.servers ?? [{ url: "/" }])
        .map((server: Json) => server.url === "/" ? "" : server.url)
      return METHODS.filter((method) => item[method] !== undefined).flatMap((method) =>
        bases.map((base) => `${method.toUpperCase()} ${base}${routerPath(path)}`)
      )
    }).sort()
    const api = ROUTES.filter((route) => !WEB.includes(route.path) && !DOCS.includes(route.path))
      .map((route) => `${route.method} ${route.path}`).sort()
    assert.isAbove(api.length, 90)
    assert.deepStrictEqual(documented, api)
  })

  it("answers as it documents: a session's answers and refusals have the documented shapes", async () => {
    const thread = await call("POST", "/threads", { metadata: { topic: "docs" } })
    conforms("POST", "/threads", thread)
    const id = JSON.parse(thread.text).thread_id as string
    const hello = { input: { messages: [{ role: "user", content: "Say hello" }] } }
    const wait = await call("POST", `/threads/${id}/runs/wait`, hello)
    assert.include(wait.text, "Hello from the scripted model.")
    conforms("POST", "/threads/{thread_id}/runs/wait", wait)
    const runs = await call("GET", `/threads/${id}/runs`)
    conforms("GET", "/threads/{thread_id}/runs", runs)
    const runId = JSON.parse(runs.text)[0].run_id as string
    const hi = { input: { messages: [{ role: "user", content: "hi" }] } }
    const background = await call("POST", `/threads/${id}/runs`, hi)
    conforms("POST", "/threads/{thread_id}/runs", background)
    await call("GET", `/threads/${id}/runs/${JSON.parse(background.text).run_id}/join`)
    const session: ReadonlyArray<readonly [string, string, string, unknown?]> = [
      ["GET", `/threads/${id}`, "/threads/{thread_id}"],
      ["PATCH", `/threads/${id}`, "/threads/{thread_id}", { metadata: { more: 1 } }],
      ["POST", "/threads/search", "/threads/search", {}],
      ["GET", `/threads/${id}/state`, "/threads/{thread_id}/state"],
      ["GET", `/threads/${id}/history`, "/threads/{thread_id}/history"],
      ["POST", `/threads/${id}/history`, "/threads/{thread_id}/history", { limit: 2 }],
      ["POST", `/threads/${id}/state`, "/threads/{thread_id}/state", { values: { title: "Docs" } }],
      ["GET", `/threads/${id}/runs/${runId}`, "/threads/{thread_id}/runs/{run_id}"],
      ["GET", `/threads/${id}/runs/${runId}/join`, "/threads/{thread_id}/runs/{run_id}/join"],
      ["POST", `/threads/${id}/runs/${runId}/cancel?wait=1`, "/threads/{thread_id}/runs/{run_id}/cancel"],
      ["POST", "/runs/wait", "/runs/wait", hi],
      ["POST", "/assistants/search", "/assistants/search", {}],
      ["GET", "/assistants/lead_agent", "/assistants/{assistant_id}"],
      ["GET", "/assistants/lead_agent/graph", "/assistants/{assistant_id}/graph"],
      ["GET", "/assistants/lead_agent/schemas", "/assistants/{assistant_id}/schemas"],
      ["GET", "/ok", "/ok"],
      ["GET", "/info", "/info"],
      ["GET", "/api/models", "/api/models"],
      ["GET", "/api/skills", "/api/skills"],
      ["GET", `/api/threads/${id}/uploads/list`, "/api/threads/{thread_id}/uploads/list"],
      // refusals
      ["GET", "/threads/nobody-has-this", "/threads/{thread_id}"],
      ["GET", "/threads/..%2Fx", "/threads/{thread_id}"],
      ["POST", "/threads", "/threads", "thread_id=x"],
      ["POST", "/threads", "/threads", { metadata: 5 }],
      ["POST", `/threads/${id}/runs/${runId}/cancel?action=explode`, "/threads/{thread_id}/runs/{run_id}/cancel"],
      ["DELETE", `/api/threads/${id}/uploads/nope.txt`, "/api/threads/{thread_id}/uploads/{filename}"]
    ]
    for (const [method, url, path, body] of session) {
      const headers: Record<string, string> = typeof body === "string" ? { "content-type": "text/plain" } : {}
      conforms(method, path, await call(method, url, body, headers))
    }
    const form = new FormData()
    form.append("files", new Blob(["notes\n"], { type: "text/plain" }), "notes.txt")
    const upload = await fetch(`${gateway.url}/api/threads/${id}/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form
    })
    conforms("POST", "/api/threads/{thread_id}/uploads", {
      status: upload.status,
      type: upload.headers.get("content-type") ?? "",
      text: await upload.text()
    })
    conforms(
      "DELETE",
      "/api/threads/{thread_id}/uploads/{filename}",
      await call("DELETE", `/api/threads/${id}/uploads/notes.txt`)
    )
    const anonymous = await fetch(`${gateway.url}/threads/${id}`)
    conforms("GET", "/threads/{thread_id}", {
      status: anonymous.status,
      type: anonymous.headers.get("content-type") ?? "",
      text: await anonymous.text()
    })
    assert.strictEqual(anonymous.status, 401)
  })
})

describe("GET /docs", () => {
  it("is an HTML page without a token, which no other site may frame; both documents obey the Host guard", async () => {
    const response = await fetch(`${gateway.url}/docs`)
    assert.strictEqual(response.status, 200)
    assert.match(response.headers.get("content-type") ?? "", /^text\/html/)
    assert.include(response.headers.get("content-security-policy") ?? "", "frame-ancestors 'none'")
    const html = await response.text()
    assert.match(html, /^<!DOCTYPE html>/i)
    assert.include(html, "threads.getThread")
    assert.notMatch(html, /<script[^>]+src=/i)
    for (const path of ["/docs", "/openapi.json"]) {
      assert.strictEqual((await getWithHost(path, "attacker.example")).status, 403, path)
      assert.strictEqual((await getWithHost(path, `127.0.0.1:${new URL(gateway.url).port}`)).status, 200, path)
    }
  })

  it.skipIf(CHROMIUM === undefined)("shows every operation in Chromium, no request leaving the gateway", async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM!,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    })
    try {
      const page = await browser.newPage()
      const requests: Array<string> = []
      const errors: Array<string> = []
      page.on("request", (request) => requests.push(request.url()))
      page.on("pageerror", (error) => errors.push(error.message))
      // (the browser's own request for /favicon.ico, which no page of the gateway names, is not the page's)
      const own = (url: string) => !url.endsWith("/favicon.ico")
      page.on("console", (message) => {
        if (message.type() === "error" && own(message.location().url)) errors.push(message.text())
      })
      page.on("response", (response) => {
        if (response.status() >= 400 && own(response.url())) errors.push(`${response.status()} ${response.url()}`)
      })
      await page.goto(`${gateway.url}/docs`)
      await page.locator(".opblock").first().waitFor({ timeout: 60_000 })
      const operations = Object.values(spec.paths as Json)
        .flatMap((item) => METHODS.filter((method) => item[method] !== undefined)).length
      assert.strictEqual(await page.locator(".opblock").count(), operations)
      assert.include(await page.locator(".info .title").innerText(), "Antler gateway")
      const foreign = requests.filter((url) => !url.startsWith(gateway.url) && !/^(data|blob):/.test(url))
      assert.deepStrictEqual(foreign, [])
      assert.deepStrictEqual(errors, [])
    } finally {
      await browser.close()
    }
  }, 120_000)
})

requireOrWarn("[OpenApi.test] /docs in Chromium skipped: no /usr/bin/chromium (apt-get install -y chromium)")
