/**
 * DeerFlow's test_uploads_router, the cases of `uploads:` values written as text: its gateway reads each limit with
 * `int(value)` and `auto_convert_documents` from a boolean or from text (`"1"`, `"true"`, `"yes"`, `"on"`, any case),
 * so a `config.yaml` with `max_file_size: "1048576"` (or `$UPLOAD_MAX`, which is text once read) loads and is obeyed.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let file = ""
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  file = Path.join(Support.tempDir("antler-df27-uploads-"), "config.yaml")
  gateway = await Support.start({
    script: () => "ok",
    file,
    config: {
      gateway: { auth: { tokens: [{ token: Support.ALICE, user: "alice" }] } },
      uploads: { max_files: 15, max_file_size: "1048576", max_total_size: 2097152, auto_convert_documents: "YES" }
    }
  })
})
afterAll(() => gateway?.stop())

const uploadsOf = (text: string) =>
  Effect.runPromise(Effect.either(ConfigFile.decode(text, "config.yaml"))).then((decoded) =>
    Either.map(decoded, ({ config }) => config.uploads)
  )

describe("DeerFlow's uploads router: uploads values written as text", () => {
  // test_upload_limits_endpoint_reads_uploads_config
  it("the limits endpoint answers a limit written as text as its number", async () => {
    const written = Fs.readFileSync(file, "utf8")
    assert.include(written, "max_file_size: \"1048576\"", "the file has the limit as text")
    const limits = await alice("GET", "/api/threads/any-thread/uploads/limits")
    assert.strictEqual(limits.status, 200, limits.text)
    assert.deepStrictEqual(limits.json(), { max_files: 15, max_file_size: 1048576, max_total_size: 2097152 })
  })

  // test_auto_convert_documents_enabled_accepts_boolean_and_string_truthy_values
  it("auto_convert_documents: \"YES\" converts an uploaded document; \"false\" and false do not", async () => {
    const form = new FormData()
    form.append("files", new Blob(["<h1>Plan</h1><p>Ship it.</p>"], { type: "text/html" }), "plan.html")
    const uploaded = await alice("POST", "/api/threads/convert-yes/uploads", form)
    assert.strictEqual(uploaded.status, 200, uploaded.text)
    assert.strictEqual(uploaded.json().files[0].markdown_file, "plan.md")
    for (const [value, expected] of [["\"false\"", false], ["false", false], ["\"On\"", true], ["1", true]] as const) {
      const uploads = await uploadsOf(`uploads:\n  auto_convert_documents: ${value}\n`)
      assert.isTrue(Either.isRight(uploads), `${value}: ${JSON.stringify(uploads)}`)
      assert.strictEqual(Either.getOrThrow(uploads).auto_convert_documents, expected, value)
    }
  })

  // (what DeerFlow reads as false without a word, Antler refuses, naming the key)
  it("a value that is no boolean and a limit that is no whole number are refused at their key", async () => {
    const maybe = await uploadsOf("uploads:\n  auto_convert_documents: maybe\n")
    assert.isTrue(Either.isLeft(maybe))
    assert.include(JSON.stringify(Either.flip(maybe)), "uploads.auto_convert_documents")
    const size = await uploadsOf("uploads:\n  max_file_size: \"10 MB\"\n")
    assert.isTrue(Either.isLeft(size))
    assert.include(JSON.stringify(Either.flip(size)), "uploads.max_file_size")
  })
})
