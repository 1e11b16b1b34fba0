/**
 * DeerFlow's uploads router (test_uploads_router), through the gateway: a file's `size` is an integer in the upload's
 * answer and in the list, as answered and as `/openapi.json` documents it
 * (test_upload_and_list_response_models_expose_size_as_int, test_upload_openapi_schema_exposes_file_size_as_integer),
 * and the list's `count` too; deleting a file the thread has not is a 404 in DeerFlow's words, and one it has is
 * DeerFlow's answer (test_delete_uploaded_file_*).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: Support.ALICE, user: "alice" }] } } }
  })
})
afterAll(() => gateway?.stop())

describe("DeerFlow's uploads router", () => {
  it("gives each file's size as an integer, and documents it so", async () => {
    const form = new FormData()
    form.append("files", new Blob(["hello uploads"], { type: "text/plain" }), "notes.txt")
    const uploaded = await alice("POST", "/api/threads/sizes/uploads", form)
    assert.strictEqual(uploaded.status, 200, uploaded.text)
    assert.strictEqual(uploaded.json().files[0].size, 13)
    const listed = (await alice("GET", "/api/threads/sizes/uploads/list")).json()
    assert.deepStrictEqual([listed.count, listed.files[0].filename, listed.files[0].size], [1, "notes.txt", 13])

    const spec = await (await fetch(`${gateway.url}/openapi.json`)).json() as any
    const schemas = spec.components.schemas
    // (a property's schema given as a reference, `#/components/schemas/Int`, read through it)
    const typeOf = (schema: any): string =>
      schema.$ref === undefined ? schema.type : typeOf(schemas[String(schema.$ref).split("/").at(-1)!])
    assert.strictEqual(typeOf(schemas.UploadedFile.properties.size), "integer")
    // (the list's files are DeerFlow's UploadedFileInfo too: a reference to it)
    const listed0 = schemas.UploadList.properties.files.items
    const item = listed0.$ref === undefined ? listed0 : schemas[String(listed0.$ref).split("/").at(-1)!]
    assert.strictEqual(typeOf(item.properties.size), "integer")
    assert.strictEqual(typeOf(schemas.UploadList.properties.count), "integer")
  })

  it("deletes a file in DeerFlow's words, and answers one it does not have so", async () => {
    const form = new FormData()
    form.append("files", new Blob(["bye"], { type: "text/plain" }), "gone.txt")
    assert.strictEqual((await alice("POST", "/api/threads/sizes/uploads", form)).status, 200)
    const deleted = await alice("DELETE", "/api/threads/sizes/uploads/gone.txt")
    assert.deepStrictEqual([deleted.status, deleted.json()], [200, { success: true, message: "Deleted gone.txt" }])
    const missing = await alice("DELETE", "/api/threads/sizes/uploads/gone.txt")
    assert.strictEqual(missing.status, 404, missing.text)
    assert.strictEqual(missing.json().detail, "File not found: gone.txt")
  })
})
