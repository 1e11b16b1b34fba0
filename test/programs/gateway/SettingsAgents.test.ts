/**
 * DeerFlow's custom agents screens against the gateway: what its app calls (`src/core/agents/api.ts`) and reads
 * (`agents[]` and each agent's name, description, model, tool_groups, skills, model_settings, thinking_enabled,
 * reasoning_effort, soul; `available` and `name` of a check; `detail` of a refusal), per user: Bob neither sees,
 * reads, changes nor deletes Alice's agent, and a run of Alice's agent gets the SOUL she wrote (the SCRIPTED
 * model's requests show it). Real HTTP through the gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"
const KEY = "sk-test-scripted-key-000000"

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
      }
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const call = Requests.api(() => gateway)

const bodyOf = async (response: Response): Promise<any> => response.json()

describe("custom agents settings", () => {
  it("creates, lists, reads, changes and deletes an agent, per user", async () => {
    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents")), { agents: [] })
    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents/check?name=Researcher")), {
      available: true,
      name: "researcher"
    })

    const created = await call(ALICE, "/agents", {
      method: "POST",
      body: {
        name: "Researcher",
        description: "Finds papers",
        model: "scripted",
        tool_groups: ["web"],
        skills: [],
        model_settings: { temperature: 0.3 },
        thinking_enabled: false,
        reasoning_effort: "low",
        soul: `You are a careful researcher. Never say ${KEY}.`
      }
    })
    const agent = await bodyOf(created)
    assert.strictEqual(created.status, 201, JSON.stringify(agent))
    assert.deepStrictEqual({ ...agent, soul: undefined }, {
      name: "researcher",
      description: "Finds papers",
      model: "scripted",
      tool_groups: ["web"],
      skills: [],
      model_settings: { temperature: 0.3 },
      thinking_enabled: false,
      reasoning_effort: "low",
      soul: undefined
    })
    // the server's secrets never reach the agent's files
    assert.include(agent.soul, "careful researcher")
    assert.notInclude(agent.soul, KEY)
    const dir = Path.join(gateway.home, "users", "alice", "agents", "researcher")
    assert.notInclude(Fs.readFileSync(Path.join(dir, "SOUL.md"), "utf8"), KEY)

    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents/check?name=RESEARCHER")), {
      available: false,
      name: "researcher"
    })
    const again = await call(ALICE, "/agents", { method: "POST", body: { name: "researcher" } })
    assert.strictEqual(again.status, 409)
    assert.include((await bodyOf(again)).detail, "already exists")

    const listed = await bodyOf(await call(ALICE, "/agents"))
    assert.deepStrictEqual(listed.agents.map((a: { name: string }) => a.name), ["researcher"])
    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents/researcher")), agent)

    // Bob: none of it
    assert.deepStrictEqual(await bodyOf(await call(BOB, "/agents")), { agents: [] })
    assert.isTrue((await bodyOf(await call(BOB, "/agents/check?name=researcher"))).available)
    assert.strictEqual((await call(BOB, "/agents/researcher")).status, 404)
    assert.strictEqual((await call(BOB, "/agents/researcher", { method: "PUT", body: { soul: "x" } })).status, 404)
    assert.strictEqual((await call(BOB, "/agents/researcher", { method: "DELETE" })).status, 404)

    // an update changes what it names and keeps the rest (null clears)
    const updated = await bodyOf(
      await call(ALICE, "/agents/researcher", {
        method: "PUT",
        body: { description: "Finds and reads papers", tool_groups: null, soul: "Be brief." }
      })
    )
    assert.deepStrictEqual(updated, {
      ...agent,
      description: "Finds and reads papers",
      tool_groups: null,
      soul: "Be brief."
    })

    // the agent's runs get its SOUL
    const before = gateway.scripted.requests.length
    const run = await call(ALICE, "/runs/wait", {
      method: "POST",
      body: {
        assistant_id: "lead-agent",
        input: { messages: [{ role: "user", content: "hi" }] },
        config: { configurable: { agent_name: "researcher" } }
      }
    })
    assert.strictEqual(run.status, 200, await run.text())
    assert.include(JSON.stringify(gateway.scripted.requests.slice(before)), "Be brief.")

    const deleted = await call(ALICE, "/agents/researcher", { method: "DELETE" })
    assert.strictEqual(deleted.status, 204)
    assert.isFalse(Fs.existsSync(dir))
    assert.strictEqual((await call(ALICE, "/agents/researcher")).status, 404)
    assert.deepStrictEqual(Fs.readdirSync(Path.dirname(dir)), [])
  })

  // DeerFlow's test_agents_router_model_settings: test_update_model_settings_merges_omitted_subfields and
  // test_update_model_settings_null_subfield_clears_only_that_subfield
  it("merges model_settings sub-field by sub-field on an update", async () => {
    const created = await call(ALICE, "/agents", {
      method: "POST",
      body: { name: "tuned", model_settings: { temperature: 0.2, max_tokens: 12000 }, thinking_enabled: true }
    })
    assert.strictEqual(created.status, 201)
    const put = async (body: unknown) => bodyOf(await call(ALICE, "/agents/tuned", { method: "PUT", body }))
    const described = await put({ description: "updated" })
    assert.deepStrictEqual(described.model_settings, { temperature: 0.2, max_tokens: 12000 })
    assert.isTrue(described.thinking_enabled)
    assert.deepStrictEqual((await put({ model_settings: { temperature: 0.9 } })).model_settings, {
      temperature: 0.9,
      max_tokens: 12000
    })
    assert.deepStrictEqual((await put({ model_settings: { max_tokens: null } })).model_settings, { temperature: 0.9 })
    assert.deepStrictEqual((await put({ model_settings: { temperature: null } })).model_settings, null)
    assert.deepStrictEqual((await put({ model_settings: { max_tokens: 2048 } })).model_settings, { max_tokens: 2048 })
    assert.deepStrictEqual((await put({ model_settings: null })).model_settings, null)
    assert.strictEqual((await call(ALICE, "/agents/tuned", { method: "DELETE" })).status, 204)
  })

  it("refuses bad names, unknown models and bad settings with a readable detail", async () => {
    const cases: ReadonlyArray<[string, string, unknown, number, string]> = [
      ["GET", "/agents/check?name=..%2Fbob", undefined, 422, "letters, digits and '-'"],
      ["GET", "/agents/check?name=lead-agent", undefined, 422, "reserved"],
      ["GET", "/agents/check", undefined, 422, "name"],
      ["POST", "/agents", { name: "a/b" }, 422, "letters, digits and '-'"],
      ["POST", "/agents", { name: "default" }, 422, "reserved"],
      ["POST", "/agents", { name: "x".repeat(65) }, 422, "at most"],
      ["POST", "/agents", { name: "ok", model: "gpt-nope" }, 422, "Unknown model 'gpt-nope'"],
      ["POST", "/agents", { name: "ok", model: "g".repeat(50_000) }, 422, "model: Expected a string at most 128"],
      ["POST", "/agents", { name: "ok", model_settings: { temperature: 9 } }, 422, "temperature"],
      // DeerFlow's test_agent_model_settings: test_model_settings_forbids_unknown_keys
      ["POST", "/agents", { name: "ok", model_settings: { top_p: 0.9 } }, 422, "top_p"],
      ["POST", "/agents", { name: "ok", soul: "x".repeat(200 * 1024) }, 422, "SOUL.md holds at most"],
      ["GET", "/agents/a.b", undefined, 422, "letters, digits and '-'"]
    ]
    for (const [method, path, body, status, detail] of cases) {
      const response = await call(ALICE, path, { method, body })
      const problem = await bodyOf(response)
      assert.strictEqual(response.status, status, `${method} ${path}: ${JSON.stringify(problem)}`)
      assert.include(problem.detail, detail, `${method} ${path}`)
    }
    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents")), { agents: [] })
  })

  // DeerFlow's test_custom_agent: test_delete_rejects_memory_only_directory_without_removing_facts
  it("deleting lead-agent keeps the memory kept under its name (409), and is a 404 when there is none", async () => {
    assert.strictEqual((await call(ALICE, "/agents/lead-agent", { method: "DELETE" })).status, 404)
    const facts = Path.join(gateway.home, "users", "alice", "agents", "lead-agent", "facts")
    Fs.mkdirSync(facts, { recursive: true })
    Fs.writeFileSync(Path.join(facts, "fact_keep.md"), "memory data")
    const refused = await call(ALICE, "/agents/lead-agent", { method: "DELETE" })
    assert.strictEqual(refused.status, 409)
    assert.include((await bodyOf(refused)).detail, "not a custom agent")
    assert.strictEqual(Fs.readFileSync(Path.join(facts, "fact_keep.md"), "utf8"), "memory data")
    Fs.rmSync(Path.dirname(facts), { recursive: true })
  })

  it("an agent's directory made before names were kept in lower case is listed, read, changed and deleted", async () => {
    const agents = Path.join(gateway.home, "users", "alice", "agents")
    const old = Path.join(agents, "OldAgent")
    Fs.mkdirSync(old, { recursive: true })
    Fs.writeFileSync(Path.join(old, "config.yaml"), "name: OldAgent\ndescription: made long ago\n")
    Fs.writeFileSync(Path.join(old, "SOUL.md"), "Old but gold.")
    const listed = await bodyOf(await call(ALICE, "/agents"))
    assert.deepStrictEqual(listed.agents.map((a: { name: string }) => a.name), ["OldAgent"])
    // read by the name listed, and by the name in lower case, as DeerFlow stores names
    for (const name of ["OldAgent", "oldagent"]) {
      const read = await call(ALICE, `/agents/${name}`)
      const agent = await bodyOf(read)
      assert.strictEqual(read.status, 200, `${name}: ${JSON.stringify(agent)}`)
      assert.strictEqual(agent.soul, "Old but gold.")
    }
    const put = await call(ALICE, "/agents/oldagent", { method: "PUT", body: { description: "still here" } })
    assert.strictEqual(put.status, 200, await put.text())
    assert.include(Fs.readFileSync(Path.join(old, "config.yaml"), "utf8"), "still here")
    assert.deepStrictEqual(await bodyOf(await call(ALICE, "/agents/check?name=OLDAGENT")), {
      available: false,
      name: "oldagent"
    })
    // another user's agent of that name stays another user's; the validation of names is unchanged
    assert.strictEqual((await call(BOB, "/agents/OldAgent", { method: "DELETE" })).status, 404)
    assert.strictEqual((await call(ALICE, "/agents/Old.Agent", { method: "DELETE" })).status, 422)
    const deleted = await call(ALICE, "/agents/OldAgent", { method: "DELETE" })
    assert.strictEqual(deleted.status, 204, await deleted.text())
    assert.isFalse(Fs.existsSync(old))
    assert.deepStrictEqual(Fs.readdirSync(agents), [])
    assert.strictEqual((await call(ALICE, "/agents/oldagent")).status, 404)
  })

  it("an agent whose config.yaml is broken is a 422 naming the file and the key, not where the server keeps data", async () => {
    const dir = Path.join(gateway.home, "users", "alice", "agents", "broken")
    Fs.mkdirSync(dir, { recursive: true })
    Fs.writeFileSync(Path.join(dir, "config.yaml"), "name: broken\nmodel_settings: 5\n")
    for (const [method, body] of [["GET", undefined], ["PUT", { description: "fixed?" }]] as const) {
      const answer = await call(ALICE, "/agents/broken", { method, ...(body === undefined ? {} : { body }) })
      const detail = String((await bodyOf(answer)).detail)
      assert.strictEqual(answer.status, 422, `${method}: ${detail}`)
      assert.include(detail, "agents/broken/config.yaml", method)
      assert.include(detail, "model_settings", method)
      assert.notInclude(detail, gateway.home, method)
    }
    Fs.rmSync(dir, { recursive: true })
  })

  it("lists the old shared agents but never changes or deletes them", async () => {
    const shared = Path.join(gateway.home, "agents", "shared-one")
    Fs.mkdirSync(shared, { recursive: true })
    Fs.writeFileSync(Path.join(shared, "config.yaml"), "name: shared-one\ndescription: everyone's\n")
    const listed = await bodyOf(await call(BOB, "/agents"))
    assert.deepStrictEqual(listed.agents.map((a: { name: string }) => a.name), ["shared-one"])
    const put = await call(BOB, "/agents/shared-one", { method: "PUT", body: { soul: "mine now" } })
    assert.strictEqual(put.status, 409)
    assert.include((await bodyOf(put)).detail, "old shared layout")
    assert.strictEqual((await call(BOB, "/agents/shared-one", { method: "DELETE" })).status, 409)
    assert.isTrue(Fs.existsSync(Path.join(shared, "config.yaml")))
    assert.isFalse(Fs.existsSync(Path.join(shared, "SOUL.md")))
  })
})
