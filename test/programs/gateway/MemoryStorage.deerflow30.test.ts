/**
 * DeerFlow's `test_memory_storage.py` and `test_memory_storage_user_isolation.py`, the cases a user reaches, through
 * a real gateway with two token users: each user's memory is `users/{user}/memory.json`, written by their own
 * requests and read back by them only (DeerMem's per-user `FileMemoryStorage`); an agent name DeerMem's
 * `validate_agent_name` refuses is refused before it names anything (`Invalid agent name`). The empty document's
 * shape and a reload of a file edited by hand are `SettingsMemory.test.ts`'s; the rest of both files is DeerMem's
 * Python storage (its cache, its `storage_class`, its per-fact Markdown files), recorded in docs/deerflow.md.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: () => "ok", config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway?.stop())

const alice = as(() => gateway, Support.ALICE)
const bob = as(() => gateway, Support.BOB)
const fileOf = (user: string) => Path.join(gateway.home, "users", user, "memory.json")

describe("test_memory_storage_user_isolation.py", () => {
  it("test_save_and_load_per_user / test_user_memory_file_location / test_cache_isolated_per_user", async () => {
    assert.strictEqual((await alice("POST", "/api/memory/facts", { content: "User A context" })).status, 200)
    assert.strictEqual((await bob("POST", "/api/memory/facts", { content: "User B context" })).status, 200)
    const read = async (call: typeof alice) => (await call("GET", "/api/memory")).json().facts.map((f: any) => f.content)
    assert.deepStrictEqual(await read(alice), ["User A context"])
    assert.deepStrictEqual(await read(bob), ["User B context"])
    // each user's own file, holding only their fact
    assert.include(Fs.readFileSync(fileOf("alice"), "utf8"), "User A context")
    assert.notInclude(Fs.readFileSync(fileOf("alice"), "utf8"), "User B context")
    assert.include(Fs.readFileSync(fileOf("bob"), "utf8"), "User B context")
    // no memory file outside the users' folders (DeerMem's legacy global one)
    assert.isFalse(Fs.existsSync(Path.join(gateway.home, "memory.json")))
  })
})

describe("test_memory_storage.py", () => {
  // DeerMem's validate_agent_name: every one of these is refused, never a folder or a memory file
  for (const name of ["", "../etc/passwd", "agent/name", "agent\\name", "agent name", "agent@123", "agent_name"]) {
    it(`test_validate_agent_name_invalid[${JSON.stringify(name)}]`, async () => {
      const made = await alice("POST", "/api/agents", { name, description: "d", soul: "s" })
      assert.strictEqual(made.status, 422, made.text)
      assert.include(made.json().detail, "Invalid agent name")
      const checked = await alice("GET", `/api/agents/check?name=${encodeURIComponent(name)}`)
      assert.strictEqual(checked.status, 422, checked.text)
      assert.isFalse(Fs.existsSync(Path.join(gateway.home, "users", "alice", "agents", "etc")))
    })
  }
})
