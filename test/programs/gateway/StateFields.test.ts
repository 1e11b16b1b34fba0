/**
 * `POST /threads/{id}/state` cannot set the state fields that are the server's own because they name host
 * resources: `viewed_images` (host paths, whose files the ViewImage middleware reads and sends to the model with
 * the next run), `sandbox` (the sandbox a run's large tool outputs are written to) and `thread_data` (host
 * directories). Bob, with a token of his own, pointed `viewed_images` at alice's upload, at the gateway's
 * `config.yaml` and at `/etc/passwd`, and his next run sent their bytes to the model; he bound his thread to
 * alice's sandbox. Each such update is now a 422 naming the field; the thread is unchanged, and his next run's
 * model call carries none of those files. Other fields (title, todos, messages) are still a client's to set.
 *
 * An update that does not apply to the thread (removing a message it does not have) is a 422 too; it was stored,
 * and every later read of the thread was a 500.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-statefields-0000"
const BOB = "bob-token-statefields-000000"
const SECRET = "alice's upload: the vault code is 4242"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

/** Whatever the model was sent, in the requests from `from` on, as one text. */
const sentFrom = (from: number) => JSON.stringify(gateway.scripted.requests.slice(from))

let aliceFile = ""

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Looked.",
    config: (url) => ({
      // a model with vision: the agent has the ViewImage middleware, which reads `viewed_images` from disk
      models: [{
        name: "scripted",
        model: "scripted",
        base_url: url,
        api_key: "sk-test-scripted-key-000000",
        supports_vision: true
      }],
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } }
    })
  })
  assert.strictEqual((await alice("POST", "/threads", { thread_id: "plans" })).status, 200)
  const form = new FormData()
  form.append("files", new Blob([SECRET]), "vault.txt")
  assert.strictEqual((await alice("POST", "/api/threads/plans/uploads", form)).status, 200)
  aliceFile = `${threadPaths(gateway.home, "alice", `plans${ThreadIds.tagOf("alice")}`).uploads}/vault.txt`
  assert.strictEqual(Fs.readFileSync(aliceFile, "utf8"), SECRET)
  assert.strictEqual((await bob("POST", "/threads", { thread_id: "mine" })).status, 200)
})
afterAll(() => gateway?.stop())

describe("state fields that name host resources", () => {
  it("bob cannot point viewed_images at files: 422, and his next run sends the model none of them", async () => {
    const before = (await bob("GET", "/threads/mine/state")).json()
    const files = [
      aliceFile,
      `${gateway.home}/config.yaml`,
      "/etc/passwd"
    ].filter((file) => Fs.existsSync(file))
    for (const file of files) {
      const size = Fs.statSync(file).size
      const image = { mime_type: "image/png", size, actual_path: file }
      const refused = await bob("POST", "/threads/mine/state", {
        values: { viewed_images: { "/mnt/user-data/outputs/x.png": image } }
      })
      assert.strictEqual(refused.status, 422, `${file}: ${refused.text}`)
      assert.include(refused.json().detail, "viewed_images")
    }
    assert.deepStrictEqual((await bob("GET", "/threads/mine/state")).json(), before)
    const from = gateway.scripted.requests.length
    const ran = await bob("POST", "/threads/mine/runs/wait", {
      input: { messages: [{ type: "human", content: "what do you see?" }] }
    })
    assert.strictEqual(ran.status, 200, ran.text)
    const sent = sentFrom(from)
    assert.isAbove(gateway.scripted.requests.length, from)
    for (const file of files) {
      const base64 = Fs.readFileSync(file).toString("base64")
      assert.notInclude(sent, base64.slice(0, 40), `the model was sent ${file}`)
    }
    assert.notInclude(sent, "vault code")
  })

  it("bob cannot bind his thread to a sandbox, alice's or any other, nor set its host directories", async () => {
    const before = (await bob("GET", "/threads/mine/state")).json()
    const aliceSandbox = `local:alice:plans${ThreadIds.tagOf("alice")}`
    for (const values of [
      { sandbox: { sandbox_id: aliceSandbox } },
      { sandbox: { sandbox_id: "local:bob:mine" } },
      { sandbox: null },
      { thread_data: { outputs_path: threadPaths(gateway.home, "alice", `plans${ThreadIds.tagOf("alice")}`).outputs } }
    ]) {
      const refused = await bob("POST", "/threads/mine/state", { values })
      const field = Object.keys(values)[0]!
      assert.strictEqual(refused.status, 422, `${field}: ${refused.text}`)
      assert.include(refused.json().detail, `values.${field}`)
    }
    assert.deepStrictEqual((await bob("GET", "/threads/mine/state")).json(), before)
  })

  it("the fields that are a client's to set are still set", async () => {
    const updated = await bob("POST", "/threads/mine/state", {
      values: { title: "My plans", todos: [{ content: "pack", status: "pending" }] }
    })
    assert.strictEqual(updated.status, 200, updated.text)
    const state = (await bob("GET", "/threads/mine/state")).json()
    assert.strictEqual(state.values.title, "My plans")
    assert.deepStrictEqual(state.values.todos, [{ content: "pack", status: "pending" }])
  })
})

describe("updates that do not apply to the thread", () => {
  it("removing a message the thread lacks is a 422, the thread stays readable; real removals work", async () => {
    assert.strictEqual((await bob("POST", "/threads", { thread_id: "notes" })).status, 200)
    const added = await bob("POST", "/threads/notes/state", {
      values: {
        messages: [{ type: "human", content: "keep me", id: "m1" }, { type: "human", content: "drop me", id: "m2" }]
      }
    })
    assert.strictEqual(added.status, 200, added.text)
    const before = (await bob("GET", "/threads/notes/state")).json()
    for (const messages of [[{ type: "remove", id: "nope" }], [{ type: "human", content: "x", id: "m3" }, {
      type: "remove",
      id: "missing"
    }]]) {
      const refused = await bob("POST", "/threads/notes/state", { values: { messages } })
      assert.strictEqual(refused.status, 422, refused.text)
      assert.include(refused.json().detail, "does not exist in the thread")
    }
    const after = await bob("GET", "/threads/notes/state")
    assert.strictEqual(after.status, 200, after.text)
    assert.deepStrictEqual(after.json(), before)
    assert.strictEqual((await bob("GET", "/threads/notes/history")).status, 200)
    const removed = await bob("POST", "/threads/notes/state", { values: { messages: [{ type: "remove", id: "m2" }] } })
    assert.strictEqual(removed.status, 200, removed.text)
    const state = (await bob("GET", "/threads/notes/state")).json()
    assert.deepStrictEqual(state.values.messages.map((m: { id: string }) => m.id), ["m1"])
  })
})
