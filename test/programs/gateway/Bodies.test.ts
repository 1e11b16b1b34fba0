/**
 * Request bodies a client may send to break the gateway: JSON nested 100,000 deep, a body over the 16 MiB limit
 * (with a length, or chunked), a multipart upload without a boundary, JSON sent as `text/plain` or as a form.
 * Each gets a JSON problem answer (400, 413 or 415) saying what was wrong, never a 500 or a cut connection, and
 * the gateway serves the next request as before.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Body from "../../../src/programs/gateway/Body.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let threadId = ""

const post = (path: string, body: RequestInit["body"], headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}${path}`, { method: "POST", ...(body == null ? {} : { body }), headers })
const postJson = (path: string, text: string) => post(path, text, { "content-type": "application/json" })

/** The problem a refused request got: its status and detail. */
const problem = async (response: Response) => {
  const contentType = response.headers.get("content-type")
  const body = await response.json() as { status: number; detail: string }
  assert.strictEqual(contentType, "application/problem+json")
  assert.strictEqual(body.status, response.status)
  return { status: response.status, detail: body.detail }
}

/** The user's threads' ids, through the API. */
const threadIds = async () => {
  const response = await postJson("/threads/search", JSON.stringify({ limit: 1000 }))
  assert.strictEqual(response.status, 200)
  return ((await response.json()) as Array<{ thread_id: string }>).map((t) => t.thread_id).sort()
}

/** Still serving: a thread is made and read back. */
const stillServing = async () => {
  const created = await postJson("/threads", JSON.stringify({ metadata: { probe: "alive" } }))
  assert.strictEqual(created.status, 200)
  const id = ((await created.json()) as { thread_id: string }).thread_id
  assert.strictEqual((await fetch(`${gateway.url}/threads/${id}`)).status, 200)
  assert.strictEqual((await fetch(`${gateway.url}/threads/${id}`, { method: "DELETE" })).status, 204)
}

const nested = (depth: number, open: string, close: string, inner = "1") =>
  `${open.repeat(depth)}${inner}${close.repeat(depth)}`

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  const created = await postJson("/threads", JSON.stringify({ metadata: { owner: "me" } }))
  threadId = ((await created.json()) as { thread_id: string }).thread_id
})
afterAll(async () => {
  await gateway?.stop()
})

describe("JSON nested too deeply", () => {
  it("a body nested 100,000 deep is a 400 saying so, as array, object or with a __proto__ key", async () => {
    const before = await threadIds()
    const bodies = [
      nested(100_000, "[", "]"),
      `{"metadata": ${nested(100_000, "{\"a\": ", "}")}}`,
      `{"__proto__": {}, "metadata": ${nested(100_000, "{\"a\": ", "}")}}`
    ]
    for (const text of bodies) {
      for (const path of ["/threads", `/threads/${threadId}/runs/wait`, "/threads/search"]) {
        const refused = await problem(await postJson(path, text))
        assert.strictEqual(refused.status, 400, `${path}: ${refused.detail}`)
        assert.include(refused.detail, `more than ${Body.MAX_JSON_DEPTH} levels deep`)
      }
    }
    assert.deepStrictEqual(await threadIds(), before)
    await stillServing()
  })

  it(`takes a body nested ${Body.MAX_JSON_DEPTH} deep and refuses one level more`, async () => {
    // the body's own object is the first level
    const at = (depth: number) => `{"metadata": {"deep": ${nested(depth - 2, "[", "]")}}}`
    const taken = await postJson("/threads", at(Body.MAX_JSON_DEPTH))
    assert.strictEqual(taken.status, 200)
    const thread = (await taken.json()) as { thread_id: string; metadata: { deep: unknown } }
    assert.strictEqual(JSON.stringify(thread.metadata.deep), nested(Body.MAX_JSON_DEPTH - 2, "[", "]"))
    assert.strictEqual((await problem(await postJson("/threads", at(Body.MAX_JSON_DEPTH + 1)))).status, 400)
  })
})

describe("a body over the limit", () => {
  const over = Body.MAX_JSON_BYTES + 1024

  it("with a Content-Length, is a 413 saying the limit", async () => {
    const text = `{"metadata": {"pad": "${"x".repeat(over)}"}}`
    const refused = await problem(await postJson("/threads", text))
    assert.strictEqual(refused.status, 413)
    assert.include(refused.detail, "larger than 16 MiB")
    await stillServing()
  })

  it("chunked, without a length, is a 413 too", async () => {
    const chunk = new TextEncoder().encode(" ".repeat(1024 * 1024))
    let sent = 0
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent * chunk.length > over) return controller.close()
        sent++
        controller.enqueue(chunk)
      }
    })
    const response = await fetch(`${gateway.url}/threads`, {
      method: "POST",
      body: stream,
      headers: { "content-type": "application/json" },
      duplex: "half"
    } as RequestInit)
    const refused = await problem(response)
    assert.strictEqual(refused.status, 413)
    await stillServing()
  })
})

describe("content types", () => {
  it("refuses JSON sent as text/plain, a form or without a content type (415), and makes nothing", async () => {
    const before = await threadIds()
    const json = JSON.stringify({ metadata: { via: "simple request" } })
    const cases: Array<[string, RequestInit["body"], Record<string, string>]> = [
      ["text/plain", json, { "content-type": "text/plain;charset=UTF-8" }],
      ["application/x-www-form-urlencoded", `${json}=`, { "content-type": "application/x-www-form-urlencoded" }],
      ["multipart/form-data", (() => {
        const form = new FormData()
        form.append(json, "")
        return form
      })(), {}],
      ["no content type", new Blob([json]), {}]
    ]
    for (const [name, body, headers] of cases) {
      for (const path of ["/threads", `/threads/${threadId}/runs/wait`, "/runs/wait", `/threads/${threadId}/runs`]) {
        const refused = await problem(await post(path, body, headers))
        assert.strictEqual(refused.status, 415, `${name} to ${path}: ${refused.detail}`)
        assert.include(refused.detail, "Content-Type: application/json")
      }
    }
    // chunked, so without a length, and without a type: refused once read
    const chunked = await fetch(`${gateway.url}/threads`, {
      method: "POST",
      body: new Blob([json]).stream(),
      duplex: "half"
    } as RequestInit)
    assert.strictEqual((await problem(chunked)).status, 415)
    assert.deepStrictEqual(await threadIds(), before)
    const runs = await fetch(`${gateway.url}/threads/${threadId}/runs`)
    assert.deepStrictEqual(await runs.json(), [])
    assert.strictEqual(gateway.scripted.requests.length, 0)
  })

  it("takes application/json with a charset, and an empty body without a content type", async () => {
    const created = await post("/threads", JSON.stringify({ metadata: { a: 1 } }), {
      "content-type": "Application/JSON; charset=utf-8"
    })
    assert.strictEqual(created.status, 200)
    assert.deepStrictEqual(((await created.json()) as { metadata: unknown }).metadata, { a: 1 })
    const empty = await post("/threads", undefined)
    assert.strictEqual(empty.status, 200)
  })
})

describe("uploads", () => {
  it("a multipart form without a boundary is a 400 saying so; a non-multipart body a 415", async () => {
    const path = `/api/threads/${threadId}/uploads`
    const form = "--x\r\n\r\n--x--\r\n"
    const noBoundary = await problem(await post(path, form, { "content-type": "multipart/form-data" }))
    assert.strictEqual(noBoundary.status, 400)
    assert.include(noBoundary.detail, "boundary")
    const plain = await problem(await post(path, "hello", { "content-type": "text/plain" }))
    assert.strictEqual(plain.status, 415)
    assert.include(plain.detail, "multipart/form-data")
    const list = await fetch(`${gateway.url}/api/threads/${threadId}/uploads/list`)
    assert.strictEqual(((await list.json()) as { count: number }).count, 0)
    await stillServing()
  })

  it("a form whose body ends before its closing boundary is a 400 saying so (it was never answered)", async () => {
    const path = `/api/threads/${threadId}/uploads`
    const head = "--bb\r\nContent-Disposition: form-data; name=\"files\"; filename=\"cut.txt\"\r\n"
    const cut = [
      ["ended in a file", `${head}Content-Type: text/plain\r\n\r\nhello\r\n`],
      ["ended in a part's headers", head],
      ["ended after a boundary", `${head}\r\nhello\r\n--bb\r\n`],
      ["empty", ""]
    ]
    for (const [name, form] of cut) {
      for (const type of ["multipart/form-data; boundary=bb", "multipart/form-data; boundary=\"bb\""]) {
        const response = await fetch(`${gateway.url}${path}`, {
          method: "POST",
          body: form,
          headers: { "content-type": type },
          // (without the fix no answer ever came)
          signal: AbortSignal.timeout(10_000)
        })
        const refused = await problem(response)
        assert.strictEqual(refused.status, 400, `${name}: ${refused.detail}`)
        assert.include(refused.detail, "closing boundary")
      }
    }
    const closed = `${head}\r\nhello\r\n--bb--\r\n`
    const taken = await post(path, closed, { "content-type": "multipart/form-data; boundary=bb" })
    assert.strictEqual(taken.status, 200)
    const list = await fetch(`${gateway.url}/api/threads/${threadId}/uploads/list`)
    const files = ((await list.json()) as { files: Array<{ filename: string }> }).files
    assert.deepStrictEqual(files.map((f) => f.filename), ["cut.txt"])
    await stillServing()
  })

  it("takes a form whatever way its Content-Type spells the boundary; refuses one no form may have (400)", async () => {
    const path = `/api/threads/${threadId}/uploads`
    const form = (name: string) =>
      `--bb\r\nContent-Disposition: form-data; name="files"; filename="${name}"\r\n\r\nhello\r\n--bb--\r\n`
    const spellings = [
      "multipart/form-data; boundary=bb;",
      "multipart/form-data;;boundary=bb",
      "multipart/form-data ; boundary=bb",
      "Multipart/Form-Data; BOUNDARY=bb",
      "multipart/form-data; boundary=\"bb\"x",
      "multipart/form-data; boundary= bb",
      "multipart/form-data; charset=utf-8; boundary=bb; boundary=other"
    ]
    for (const [i, type] of spellings.entries()) {
      const response = await post(path, form(`spelled-${i}.txt`), { "content-type": type })
      assert.strictEqual(response.status, 200, `${type}: ${await response.text()}`)
    }
    const impossible = [
      "multipart/form-data; boundary=\"b\\\"b\"",
      "multipart/form-data; boundary=b{b}",
      "multipart/form-data; boundary=\"bb \""
    ]
    for (const type of impossible) {
      const refused = await problem(await post(path, form("never.txt"), { "content-type": type }))
      assert.strictEqual(refused.status, 400, `${type}: ${refused.detail}`)
      assert.include(refused.detail, "boundary")
    }
    const list = await fetch(`${gateway.url}/api/threads/${threadId}/uploads/list`)
    const names = ((await list.json()) as { files: Array<{ filename: string }> }).files.map((f) => f.filename)
    const spelled = names.filter((n) => n.startsWith("spelled-")).sort()
    assert.deepStrictEqual(spelled, spellings.map((_, i) => `spelled-${i}.txt`))
    assert.notInclude(names, "never.txt")
    await stillServing()
  })
})
