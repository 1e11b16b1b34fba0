/**
 * DeerFlow's `test_agent_model_settings.py` and `test_agents_router_model_settings.py`, through `/api/agents` of a
 * real gateway: an agent's `model_settings`, `thinking_enabled` and `reasoning_effort` are kept and read back (none
 * of them set: `null`); a temperature out of 0-2, a `max_tokens` of 0 or past 200,000, an unknown or `minimal`
 * effort, and a model not configured, made or changed, are a 422 naming what was wrong, with nothing written.
 * The merge of an update's sub-fields is `SettingsAgents.test.ts`'s.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: (url) => ({ models: [Support.scriptedModel("agent-model", url)] })
  })
})
afterAll(() => gateway?.stop())

const call = as(() => gateway)

describe("test_agents_router_model_settings.py / test_agent_model_settings.py", () => {
  it("test_create_persists_model_settings / test_model_settings_parse_full_shape", async () => {
    const made = await call("POST", "/api/agents", {
      name: "researcher",
      model: "agent-model",
      model_settings: { temperature: 0.2, max_tokens: 12000 },
      thinking_enabled: true,
      reasoning_effort: "high",
      soul: "You are a researcher."
    })
    assert.strictEqual(made.status, 201, made.text)
    const read = (await call("GET", "/api/agents/researcher")).json()
    assert.strictEqual(read.model, "agent-model")
    assert.deepStrictEqual(read.model_settings, { temperature: 0.2, max_tokens: 12000 })
    assert.strictEqual(read.thinking_enabled, true)
    assert.strictEqual(read.reasoning_effort, "high")
  })

  it("test_model_settings_default_to_none", async () => {
    assert.strictEqual((await call("POST", "/api/agents", { name: "solo" })).status, 201)
    const read = (await call("GET", "/api/agents/solo")).json()
    assert.isNull(read.model_settings ?? null)
    assert.isNull(read.thinking_enabled ?? null)
    assert.isNull(read.reasoning_effort ?? null)
  })

  const refused: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
    ["test_temperature_out_of_range_rejected[-0.1]", { model_settings: { temperature: -0.1 } }, "temperature"],
    ["test_temperature_out_of_range_rejected[2.1]", { model_settings: { temperature: 2.1 } }, "temperature"],
    ["test_max_tokens_must_be_positive", { model_settings: { max_tokens: 0 } }, "max_tokens"],
    ["test_max_tokens_has_sane_upper_bound", { model_settings: { max_tokens: 200_001 } }, "max_tokens"],
    ["test_reasoning_effort_rejects_unknown_value", { reasoning_effort: "turbo" }, "reasoning_effort"],
    ["test_reasoning_effort_rejects_codex_unsupported_minimal", { reasoning_effort: "minimal" }, "reasoning_effort"],
    ["test_create_rejects_unknown_model", { model: "ghost-model" }, "ghost-model"]
  ]
  for (const [name, fields, named] of refused) {
    it(`${name}: made or changed, a 422 naming it`, async () => {
      const agent = `a-${name.length}-${Math.abs(JSON.stringify(fields).length)}`
      const made = await call("POST", "/api/agents", { name: agent, ...fields })
      assert.strictEqual(made.status, 422, made.text)
      assert.include(made.text, named)
      assert.strictEqual((await call("GET", `/api/agents/${agent}`)).status, 404)
      // test_update_rejects_unknown_model and the rest on an update
      assert.strictEqual((await call("POST", "/api/agents", { name: agent })).status, 201)
      const changed = await call("PUT", `/api/agents/${agent}`, fields)
      assert.strictEqual(changed.status, 422, changed.text)
      assert.include(changed.text, named)
      const read = (await call("GET", `/api/agents/${agent}`)).json()
      assert.isNull(read.model_settings ?? null)
      assert.isNull(read.reasoning_effort ?? null)
      assert.isNull(read.model ?? null)
    })
  }
})
