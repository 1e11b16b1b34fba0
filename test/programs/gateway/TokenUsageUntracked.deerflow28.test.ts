/**
 * DeerFlow's `test_token_usage_by_model.py::test_track_tokens_disabled_keeps_by_model_empty`, through HTTP: with
 * `run_events.track_token_usage: false` its run journal records no usage, neither the run's own calls nor its
 * tasks' records, so the stored run and the thread's `token-usage` count nothing; TokenUsageMiddleware still runs
 * (the answers carry their step attribution, a task's usage is rolled up onto its dispatch message).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { runTask, script } from "./taskUsage.js"

let gateway: TestGateway
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({ script, config: { run_events: { track_token_usage: false } } })
})
afterAll(() => gateway?.stop())

describe("DeerFlow test_token_usage_by_model: run_events.track_token_usage: false", () => {
  it("test_track_tokens_disabled_keeps_by_model_empty: no tokens counted; the messages keep theirs", async () => {
    const run = await runTask(api, "untracked")
    assert.deepInclude(run, {
      total_input_tokens: 0,
      total_output_tokens: 0,
      total_tokens: 0,
      llm_call_count: 0,
      lead_agent_tokens: 0,
      subagent_tokens: 0,
      middleware_tokens: 0
    })
    const usage = (await api("GET", "/api/threads/untracked/token-usage")).json()
    assert.deepInclude(usage, { total_tokens: 0, total_input_tokens: 0, total_output_tokens: 0, total_runs: 1 })
    assert.deepStrictEqual(usage.by_model, {})
    assert.deepStrictEqual(usage.by_caller, { lead_agent: 0, subagent: 0, middleware: 0 })
    // the context still shows what the last answer's call read (DeerFlow's does not depend on the journal either)
    assert.strictEqual(usage.context_usage.token_count, 10)
    // TokenUsageMiddleware still stamps each step and moves the task's usage onto the message that dispatched it
    const state = (await api("GET", "/api/threads/untracked/state")).json()
    assert.isNull(state.values.token_usage ?? null)
    const [dispatch, answer] = state.values.messages.filter((m: any) => m.type === "ai")
    assert.strictEqual(dispatch.additional_kwargs.token_usage_attribution.kind, "subagent_dispatch")
    assert.deepInclude(dispatch.usage_metadata, { input_tokens: 110, output_tokens: 25, total_tokens: 135 })
    assert.strictEqual(answer.additional_kwargs.token_usage_attribution.kind, "final_answer")
    assert.deepInclude(answer.usage_metadata, { input_tokens: 10, output_tokens: 5, total_tokens: 15 })
  }, 20_000)

  it("with token_usage.enabled: false too, the run's journal under the chain books nothing either", async () => {
    const off = await Support.start({
      script,
      config: { token_usage: { enabled: false }, run_events: { track_token_usage: false } }
    })
    try {
      const call = as(() => off)
      const run = await runTask(call, "off")
      assert.deepInclude(run, { total_tokens: 0, llm_call_count: 0, lead_agent_tokens: 0, subagent_tokens: 0 })
      const usage = (await call("GET", "/api/threads/off/token-usage")).json()
      assert.deepInclude(usage, { total_tokens: 0, total_runs: 1 })
      assert.deepStrictEqual(usage.by_model, {})
    } finally {
      await off.stop()
    }
  }, 30_000)
})
