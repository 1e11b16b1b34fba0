/**
 * DeerFlow's memory settings screen against the gateway: what its app calls (`src/core/memory/api.ts`) and reads
 * (the memory document: version, lastUpdated, user and history sections, facts with id, content, category,
 * confidence, createdAt, source; `detail` of a refusal), per user: Alice's facts are hers, Bob neither sees nor
 * changes them, and the facts she adds reach her agent's model requests (the SCRIPTED model's requests show it),
 * never Bob's. Real HTTP through the gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"
const CAROL = "carol-token-0123456789abcdef"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: (url) => ({
      ...Support.baseConfig(url),
      gateway: {
        heartbeat_seconds: 1,
        auth: {
          tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }, { token: CAROL, user: "carol" }]
        }
      },
      memory: {
        enabled: true,
        backend_config: { debounce_seconds: 3600, max_facts: 3, max_fact_chars: 200 },
        shutdown_flush_timeout_seconds: 0.1
      }
    })
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const call = Requests.api(() => gateway)

const bodyOf = async (response: Response): Promise<any> => response.json()

const doc = Requests.ok

/** What the model was given (the memory block is injected with the thread's first turn). */
const promptOf = (body: ChatRequestBody) => JSON.stringify(body.messages)

describe("memory settings", () => {
  it("reads an empty memory document in DeerFlow's shape", async () => {
    const memory = await doc(await call(ALICE, "/memory"))
    assert.strictEqual(memory.version, "1.0")
    assert.strictEqual(typeof memory.lastUpdated, "string")
    for (const key of ["workContext", "personalContext", "topOfMind"]) {
      assert.deepStrictEqual(memory.user[key], { summary: "", updatedAt: "" })
    }
    for (const key of ["recentMonths", "earlierContext", "longTermBackground"]) {
      assert.deepStrictEqual(memory.history[key], { summary: "", updatedAt: "" })
    }
    assert.deepStrictEqual(memory.facts, [])
    assert.notProperty(memory, "threads")
  })

  it("adds, changes and deletes facts, per user", async () => {
    const created = await doc(
      await call(ALICE, "/memory/facts", {
        method: "POST",
        body: { content: "Prefers TypeScript", category: "preference", confidence: 0.9 }
      })
    )
    assert.strictEqual(created.facts.length, 1)
    const fact = created.facts[0]
    assert.match(fact.id, /^fact_/)
    assert.strictEqual(fact.content, "Prefers TypeScript")
    assert.strictEqual(fact.category, "preference")
    assert.strictEqual(fact.confidence, 0.9)
    assert.strictEqual(fact.source, "manual")
    assert.isFalse(Number.isNaN(Date.parse(fact.createdAt)))

    // Bob sees none of it, and cannot change or delete it
    assert.deepStrictEqual((await doc(await call(BOB, "/memory"))).facts, [])
    const bobPatch = await call(BOB, `/memory/facts/${fact.id}`, { method: "PATCH", body: { content: "x" } })
    assert.strictEqual(bobPatch.status, 404)
    assert.include((await bodyOf(bobPatch)).detail, fact.id)
    assert.strictEqual((await call(BOB, `/memory/facts/${fact.id}`, { method: "DELETE" })).status, 404)

    const patched = await doc(
      await call(ALICE, `/memory/facts/${fact.id}`, { method: "PATCH", body: { confidence: 0.6 } })
    )
    assert.deepStrictEqual(patched.facts[0], { ...fact, confidence: 0.6 })

    // DeerFlow's FactCreateRequest: `category: str`, `confidence: float` (a PATCH's may be null: left as they are)
    for (const body of [{ content: "Uses Vim", confidence: null }, { content: "Uses Vim", category: null }]) {
      const refused = await call(ALICE, "/memory/facts", { method: "POST", body })
      assert.strictEqual(refused.status, 422)
      assert.include(JSON.stringify(await bodyOf(refused)), Object.keys(body)[1]!)
    }
    assert.deepStrictEqual((await doc(await call(ALICE, "/memory"))).facts.map((f: any) => f.content), [
      "Prefers TypeScript"
    ])

    // the same content twice is refused
    const twice = await call(ALICE, "/memory/facts", { method: "POST", body: { content: " Prefers TypeScript " } })
    assert.strictEqual(twice.status, 409)
    assert.include((await bodyOf(twice)).detail, "same content")
    // DeerFlow test_memory_updater.py::test_create_memory_fact_rejects_duplicate_content: in other case too
    const cased = await call(ALICE, "/memory/facts", { method: "POST", body: { content: "  prefers TYPESCRIPT " } })
    assert.strictEqual(cased.status, 409)

    const deleted = await doc(await call(ALICE, `/memory/facts/${fact.id}`, { method: "DELETE" }))
    assert.deepStrictEqual(deleted.facts, [])
    assert.strictEqual((await call(ALICE, `/memory/facts/${fact.id}`, { method: "DELETE" })).status, 404)
  })

  it("refuses bad facts with a readable detail", async () => {
    const cases: ReadonlyArray<[unknown, number, string]> = [
      // DeerFlow's: spaces only are a 400, an empty string its schema's 422
      [{ content: "   " }, 400, "Memory fact content cannot be empty."],
      [{ content: "" }, 422, "cannot be empty"],
      [{ content: "x", confidence: 2 }, 422, "confidence"],
      [{ content: "x".repeat(201) }, 422, "max_fact_chars"],
      [{}, 422, "content"]
    ]
    for (const [body, status, detail] of cases) {
      const response = await call(ALICE, "/memory/facts", { method: "POST", body })
      assert.strictEqual(response.status, status, JSON.stringify(body))
      assert.include((await bodyOf(response)).detail, detail)
    }
    assert.deepStrictEqual((await doc(await call(ALICE, "/memory"))).facts, [])
  })

  it("keeps max_facts: a fact with no room is refused", async () => {
    for (const content of ["a", "b", "c"]) {
      await doc(await call(BOB, "/memory/facts", { method: "POST", body: { content, confidence: 0.9 } }))
    }
    const full = await call(BOB, "/memory/facts", { method: "POST", body: { content: "d", confidence: 0.1 } })
    assert.strictEqual(full.status, 409)
    assert.include((await bodyOf(full)).detail, "max_facts")
    const cleared = await doc(await call(BOB, "/memory", { method: "DELETE" }))
    assert.deepStrictEqual(cleared.facts, [])
  })

  it("exports and imports a document, redacted and cut to the limits", async () => {
    const imported = await doc(
      await call(ALICE, "/memory/import", {
        method: "POST",
        body: {
          version: "1.0",
          lastUpdated: "2024-01-01T00:00:00Z",
          user: { workContext: { summary: "Works on Antler with sk-test-scripted-key-000000", updatedAt: "t" } },
          history: {},
          facts: [
            {
              id: "f1",
              content: "one",
              category: "correction",
              confidence: 0.9,
              createdAt: "",
              source: "t1",
              sourceError: "The agent previously suggested npm start."
            },
            { id: "f2", content: "two", confidence: 0.8 },
            { id: "f3", content: "three", confidence: 0.7 },
            { id: "f4", content: "four", confidence: 0.1 }
          ],
          threads: { "someone-elses-thread": "m1" }
        }
      })
    )
    assert.deepStrictEqual(imported.facts.map((f: { id: string }) => f.id), ["f1", "f2", "f3"])
    assert.notInclude(imported.user.workContext.summary, "sk-test-scripted-key-000000")
    assert.include(imported.user.workContext.summary, "Works on Antler")
    assert.deepStrictEqual(imported.history.recentMonths, { summary: "", updatedAt: "" })
    // DeerFlow test_memory_router.py::test_*_memory_route_preserves_source_error: a correction keeps its mistake
    assert.strictEqual(imported.facts[0].sourceError, "The agent previously suggested npm start.")
    const exported = await doc(await call(ALICE, "/memory/export"))
    assert.deepStrictEqual(exported, imported)
    // the server's watermarks are its own
    const stored = JSON.parse(Fs.readFileSync(Path.join(gateway.home, "users", "alice", "memory.json"), "utf8"))
    assert.deepStrictEqual(stored.threads, {})
    assert.deepStrictEqual((await doc(await call(BOB, "/memory"))).facts, [])

    const bad = await call(ALICE, "/memory/import", { method: "POST", body: { facts: [{ content: 1 }] } })
    assert.strictEqual(bad.status, 422)
    assert.include((await bodyOf(bad)).detail, "facts")
  })

  // DeerFlow test_memory_staleness_review.py::test_stale_candidate_without_id_does_not_raise, through an import: a
  // fact without an id is kept under one (DeerMem's storage gives it fact_<hex>), the one the app then deletes it by
  it("imports a fact without an id under one, by which it can be deleted", async () => {
    const imported = await doc(await call(CAROL, "/memory/import", {
      method: "POST",
      body: { facts: [{ content: "Carol writes tests first", confidence: 0.9 }, { id: 7, content: "Carol uses vim" }] }
    }))
    const [first, second] = imported.facts as Array<{ id: string; content: string }>
    assert.match(first!.id, /^fact_[0-9a-f]{12}$/)
    assert.strictEqual(second!.id, "7")
    assert.deepStrictEqual((await doc(await call(CAROL, "/memory"))).facts, imported.facts)
    const left = await doc(await call(CAROL, `/memory/facts/${first!.id}`, { method: "DELETE" }))
    assert.deepStrictEqual(left.facts.map((f: { content: string }) => f.content), ["Carol uses vim"])
  })

  it("gives the agent the user's facts, and only theirs", async () => {
    const fact = { content: "Likes-green-tea", confidence: 1 }
    await doc(await call(ALICE, "/memory/facts", { method: "POST", body: fact }))
    const before = gateway.scripted.requests.length
    for (const token of [ALICE, BOB]) {
      const response = await call(token, "/runs/wait", {
        method: "POST",
        body: { assistant_id: "lead-agent", input: { messages: [{ role: "user", content: "hi" }] } }
      })
      assert.strictEqual(response.status, 200, await response.text())
    }
    const [alice, bob] = gateway.scripted.requests.slice(before).map(promptOf)
    assert.include(alice, "Likes-green-tea")
    assert.notInclude(bob, "Likes-green-tea")
  })

  it("reloads the user's own file, edited by hand, and only theirs", async () => {
    const file = Path.join(gateway.home, "users", "alice", "memory.json")
    const edited = await doc(await call(ALICE, "/memory"))
    edited.user.workContext = { summary: "Edited by hand", updatedAt: "2026-01-01T00:00:00Z" }
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify(edited))
    const reloaded = await doc(await call(ALICE, "/memory/reload", { method: "POST" }))
    assert.strictEqual(reloaded.user.workContext.summary, "Edited by hand")
    assert.strictEqual((await doc(await call(ALICE, "/memory"))).user.workContext.summary, "Edited by hand")
    const bobs = await doc(await call(BOB, "/memory/reload", { method: "POST" }))
    assert.notInclude(JSON.stringify(bobs), "Edited by hand")
  })

  // DeerFlow's Fact model shows a merged fact's consolidatedAt and consolidatedFrom
  it("shows a merged fact with when it was merged and the facts it replaced", async () => {
    const file = Path.join(gateway.home, "users", "alice", "memory.json")
    const merged = {
      id: "fact_merged",
      content: "Full-stack: React, Python, PostgreSQL",
      category: "knowledge",
      confidence: 0.9,
      createdAt: "2026-03-15T12:00:00Z",
      source: "consolidation",
      consolidatedAt: "2026-05-08T10:00:00.000Z",
      consolidatedFrom: ["fact_a", "fact_b", "fact_c"]
    }
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify({ facts: [merged] }))
    const reloaded = await doc(await call(ALICE, "/memory/reload", { method: "POST" }))
    assert.deepStrictEqual(reloaded.facts, [merged])
  })

  // DeerFlow's _map_memory_manager_error: a damaged file is its 500 and words, naming nothing of the file
  it("a memory file that is no memory document is a 500 saying so, and is left as it was", async () => {
    const file = Path.join(gateway.home, "users", "carol", "memory.json")
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify({ facts: "not a list" }))
    const read = await call(CAROL, "/memory")
    assert.strictEqual(read.status, 500)
    assert.strictEqual((await bodyOf(read)).detail, "Stored memory data is corrupted.")
    assert.strictEqual(Fs.readFileSync(file, "utf8"), JSON.stringify({ facts: "not a list" }))
  })

  it("needs a token", async () => {
    const response = await fetch(`${gateway.url}/api/memory`)
    assert.strictEqual(response.status, 401)
  })
})
