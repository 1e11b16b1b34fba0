/**
 * DeerFlow's test_uploads_manager.py, the case where Antler differed, through HTTP as DeerFlow's app deletes an
 * upload: a name in the uploads directory that is a link leading out of it is refused as a traversal (400
 * `Invalid path`), as `delete_file_safe`'s `validate_path_traversal` refuses it, and nothing is deleted.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-uploads-manager-27"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }] } } }
  })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "files" })).status, 200)
})
afterAll(() => gateway?.stop())

const uploadsDir = () => threadPaths(gateway.home, "alice", `files${ThreadIds.tagOf("alice")}`).uploads

describe("DeerFlow's uploads manager", () => {
  // DeerFlow: TestValidatePathTraversal::test_symlink_escape (delete_file_safe validates the resolved path)
  it("deleting a name that is a link leading out of the uploads is a 400 'Invalid path'; nothing is deleted", async () => {
    const form = new FormData()
    form.append("files", new Blob(["kept"], { type: "text/plain" }), "kept.txt")
    assert.strictEqual((await alice("POST", "/api/threads/files/uploads", form)).status, 200)
    const secret = Path.join(Support.tempDir("antler-outside-"), "secret.txt")
    Fs.writeFileSync(secret, "secret")
    Fs.symlinkSync(secret, Path.join(uploadsDir(), "escape"))
    Fs.symlinkSync(Path.join(Path.dirname(secret), "gone.txt"), Path.join(uploadsDir(), "dangling"))
    for (const name of ["escape", "dangling"]) {
      const refused = await alice("DELETE", `/api/threads/files/uploads/${name}`)
      assert.strictEqual(refused.status, 400, refused.text)
      assert.strictEqual(refused.json().detail, "Invalid path")
      assert.isTrue(Fs.lstatSync(Path.join(uploadsDir(), name)).isSymbolicLink())
    }
    assert.strictEqual(Fs.readFileSync(secret, "utf8"), "secret")
    // a file of the uploads is deleted as before
    const deleted = await alice("DELETE", "/api/threads/files/uploads/kept.txt")
    assert.deepStrictEqual(deleted.json(), { success: true, message: "Deleted kept.txt" })
  })
})
