/**
 * DeerFlow's `test_app_config_name_indexes.py`, what a user sees of it through a real gateway: a model name given
 * twice in `config.yaml` is the first of them (`GET /api/models/{name}`, and the model a run naming it calls); a
 * name no model has is a 404. Its tool and tool-group lookups are the configuration's own (no route reads them by
 * name); the index against a linear scan is Python's.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: (url) => ({
      models: [
        Support.scriptedModel("m1", url),
        { ...Support.scriptedModel("dup", url), model: "first" },
        { ...Support.scriptedModel("dup", url), model: "second" }
      ]
    })
  })
})
afterAll(() => gateway?.stop())

const call = as(() => gateway)

describe("test_app_config_name_indexes.py", () => {
  it("test_get_config_first_match_wins_on_duplicate_names / test_get_config_returns_none_for_missing", async () => {
    const dup = await call("GET", "/api/models/dup")
    assert.strictEqual(dup.status, 200, dup.text)
    assert.strictEqual(dup.json().model, "first")
    assert.strictEqual((await call("GET", "/api/models/nope")).status, 404)
    const before = gateway.scripted.requests.length
    const run = await call("POST", "/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("hi"),
      context: { model_name: "dup" }
    })
    assert.strictEqual(run.status, 200, run.text)
    assert.strictEqual(gateway.scripted.requests[before]!.model, "first")
  })
})
