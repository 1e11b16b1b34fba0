/**
 * Names in the paths of the uploads and artifacts routes are URL-decoded exactly once: `%2520` is a literal
 * `%20` in a name, never a space, and double-encoded traversal (`%252e%252e%252f`) is a literal name that is not
 * there, or refused, never a `..`. Requests are sent raw (node:http), as written, since `fetch` would normalise
 * the dots. Files outside the thread's directory stay untouched and unread.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { threadPaths } from "../../../src/services/Sandbox.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let threadId = ""
let otherThread = ""

/** A raw request, its path sent exactly as given. */
const raw = (method: string, path: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const url = new URL(gateway.url)
    const request = Http.request({ host: url.hostname, port: url.port, method, path }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (body += chunk))
      response.on("end", () => resolve({ status: response.statusCode!, body }))
    })
    request.on("error", reject)
    request.end()
  })

const upload = async (name: string, text: string) => {
  const form = new FormData()
  form.append("files", new Blob([text]), name)
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/uploads`, { method: "POST", body: form })
  assert.strictEqual(response.status, 200, await response.clone().text())
}

const uploadNames = async () => {
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/uploads/list`)
  return ((await response.json()) as { files: Array<{ filename: string }> }).files.map((f) => f.filename).sort()
}

const newThread = async () => {
  const response = await fetch(`${gateway.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })
  return ((await response.json()) as { thread_id: string }).thread_id
}

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  threadId = await newThread()
  otherThread = await newThread()
})
afterAll(async () => {
  await gateway?.stop()
})

describe("upload names", () => {
  it("DELETE .../uploads/a%2520b.txt deletes the file named a%20b.txt, not a b.txt", async () => {
    await upload("a%20b.txt", "percent")
    await upload("a b.txt", "space")
    assert.deepStrictEqual(await uploadNames(), ["a b.txt", "a%20b.txt"])
    const deleted = await raw("DELETE", `/api/threads/${threadId}/uploads/a%2520b.txt`)
    assert.strictEqual(deleted.status, 200, deleted.body)
    assert.deepStrictEqual(await uploadNames(), ["a b.txt"])
    assert.strictEqual((await raw("DELETE", `/api/threads/${threadId}/uploads/a%20b.txt`)).status, 200)
    assert.deepStrictEqual(await uploadNames(), [])
  })

  it("double-encoded traversal in a delete: a literal name not found, or refused; nothing outside hit", async () => {
    const paths = threadPaths(gateway.home, "default", threadId)
    const other = threadPaths(gateway.home, "default", otherThread)
    Fs.mkdirSync(paths.outputs, { recursive: true })
    Fs.mkdirSync(other.uploads, { recursive: true })
    const victims = [
      Path.join(paths.outputs, "keep.txt"),
      Path.join(other.uploads, "keep.txt"),
      Path.join(gateway.home, "keep.txt")
    ]
    for (const file of victims) Fs.writeFileSync(file, "keep me\n")
    await upload("mine.txt", "mine")
    const attempts = [
      "%252e%252e%252foutputs%252fkeep.txt",
      "%252e%252e%252f%252e%252e%252f%252e%252e%252f" + `${otherThread}%252fuser-data%252fuploads%252fkeep.txt`,
      "%252e%252e",
      "%25252e%25252e%25252fkeep.txt",
      "..%252f..%252f..%252f..%252f..%252f..%252fkeep.txt",
      "%2e%2e",
      "..%2foutputs%2fkeep.txt"
    ]
    for (const name of attempts) {
      const answer = await raw("DELETE", `/api/threads/${threadId}/uploads/${name}`)
      assert.oneOf(answer.status, [400, 404], `${name}: ${answer.body}`)
    }
    for (const file of victims) assert.strictEqual(Fs.readFileSync(file, "utf8"), "keep me\n", file)
    assert.deepStrictEqual(await uploadNames(), ["mine.txt"])
  })

  it("a double-encoded thread id lists nothing", async () => {
    for (const id of ["%252e%252e", `%252e%252e%252f${otherThread}`, `${threadId}%252f%252e%252e`]) {
      const answer = await raw("GET", `/api/threads/${id}/uploads/list`)
      assert.strictEqual(answer.status, 404, `${id}: ${answer.body}`)
      assert.notInclude(answer.body, "mine.txt")
    }
  })
})

describe("artifact paths", () => {
  it("a%2520b.md is the artifact named a%20b.md, not a b.md", async () => {
    const outputs = threadPaths(gateway.home, "default", threadId).outputs
    Fs.mkdirSync(outputs, { recursive: true })
    Fs.writeFileSync(Path.join(outputs, "a%20b.md"), "the percent one\n")
    Fs.writeFileSync(Path.join(outputs, "a b.md"), "the space one\n")
    const base = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs`
    const percent = await raw("GET", `${base}/a%2520b.md`)
    assert.strictEqual(percent.status, 200, percent.body)
    assert.strictEqual(percent.body, "the percent one\n")
    assert.strictEqual((await raw("GET", `${base}/a%20b.md`)).body, "the space one\n")
  })

  it("double-encoded traversal reads nothing outside the thread's files", async () => {
    const other = threadPaths(gateway.home, "default", otherThread)
    Fs.mkdirSync(other.outputs, { recursive: true })
    Fs.writeFileSync(Path.join(other.outputs, "secret.md"), "another thread's secret\n")
    Fs.writeFileSync(Path.join(gateway.home, "secret.md"), "the server's secret\n")
    const base = `/api/threads/${threadId}/artifacts/mnt/user-data`
    const attempts = [
      `outputs/%252e%252e/%252e%252e/%252e%252e/%252e%252e/${otherThread}/user-data/outputs/secret.md`,
      "outputs/%252e%252e%252f%252e%252e%252f%252e%252e%252f%252e%252e%252f" +
      `${otherThread}%252fuser-data%252foutputs%252fsecret.md`,
      "outputs/%252e%252e/%252e%252e/%252e%252e/%252e%252e/%252e%252e/%252e%252e/secret.md",
      "%252e%252e/%252e%252e/%252e%252e/%252e%252e/%252e%252e/%252e%252e/%252e%252e/secret.md",
      "outputs/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.md",
      "outputs/..%2f..%2f..%2f..%2f..%2f..%2fsecret.md"
    ]
    for (const path of attempts) {
      const answer = await raw("GET", `${base}/${path}`)
      assert.oneOf(answer.status, [400, 404], `${path}: ${answer.body}`)
      assert.notInclude(answer.body, "secret\n")
    }
  })
})
