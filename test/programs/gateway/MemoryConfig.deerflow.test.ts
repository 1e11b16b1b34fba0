/**
 * DeerFlow's `GET /api/memory/config` and `GET /api/memory/status` (its memory router's `MemoryConfigResponse` and
 * `MemoryStatusResponse`), which were 404s: how memory is set up, and that with the user's own memory document.
 * Real HTTP through the gateway, two users.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: {
      gateway: Support.twoUsers,
      memory: {
        enabled: true,
        injection_enabled: false,
        shutdown_flush_timeout_seconds: 12,
        backend_config: {
          debounce_seconds: 3600,
          max_facts: 7,
          model: { model: "memory-model", api_key: "sk-memcfg-secret-0123456789" }
        }
      }
    }
  })
})
afterAll(() => gateway?.stop())

const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)
const anyone = Requests.as(() => gateway)

describe("GET /api/memory/config", () => {
  it("answers DeerFlow's fields with config.yaml's memory section", async () => {
    const answer = await alice("GET", "/api/memory/config")
    assert.strictEqual(answer.status, 200, answer.text)
    const body = answer.json()
    assert.deepStrictEqual(
      Object.keys(body).sort(),
      ["backend_config", "enabled", "injection_enabled", "manager_class", "mode", "shutdown_flush_timeout_seconds"]
    )
    assert.isTrue(body.enabled)
    assert.isFalse(body.injection_enabled)
    assert.strictEqual(body.mode, "middleware")
    assert.strictEqual(body.shutdown_flush_timeout_seconds, 12)
    assert.strictEqual(body.manager_class, "deermem")
    assert.strictEqual(body.backend_config.max_facts, 7)
    assert.strictEqual(body.backend_config.debounce_seconds, 3600)
  })

  it("backend_config is config.yaml's as written, no defaults filled in (DeerFlow's config.backend_config)", async () => {
    const answer = await alice("GET", "/api/memory/config")
    assert.strictEqual(answer.status, 200, answer.text)
    // (a key Antler does not read is there as DeerFlow's; a secret-named value is masked)
    assert.deepStrictEqual(answer.json().backend_config, {
      debounce_seconds: 3600,
      max_facts: 7,
      model: { model: "memory-model", api_key: "***" }
    })
    assert.notInclude(answer.text, "sk-memcfg-secret")
  })

  it("needs a token, as the other memory routes", async () => {
    assert.strictEqual((await anyone("GET", "/api/memory/config")).status, 401)
    assert.strictEqual((await anyone("GET", "/api/memory/status")).status, 401)
  })
})

describe("GET /api/memory/status", () => {
  it("answers the config and the user's own memory, never another user's", async () => {
    const added = await alice("POST", "/api/memory/facts", { content: "Alice prefers tea", category: "preference" })
    assert.strictEqual(added.status, 200, added.text)
    const mine = await alice("GET", "/api/memory/status")
    assert.strictEqual(mine.status, 200, mine.text)
    const body = mine.json()
    assert.deepStrictEqual(Object.keys(body).sort(), ["config", "data"])
    assert.deepStrictEqual(body.config, (await alice("GET", "/api/memory/config")).json())
    assert.deepStrictEqual(body.data, (await alice("GET", "/api/memory")).json())
    assert.deepStrictEqual(body.data.facts.map((fact: any) => fact.content), ["Alice prefers tea"])
    const theirs = await bob("GET", "/api/memory/status")
    assert.strictEqual(theirs.status, 200, theirs.text)
    assert.deepStrictEqual(theirs.json().data.facts, [])
    assert.notInclude(theirs.text, "Alice prefers tea")
  })
})
