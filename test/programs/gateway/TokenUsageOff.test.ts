/**
 * `token_usage.enabled: false` through HTTP: DeerFlow builds no TokenUsageMiddleware then (no step attribution on
 * the messages), but its run journal still records every call's usage (`run_events.track_token_usage`, on by
 * default), so the stored run and the thread's `token-usage` count the lead's calls and its tasks.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { runTask, script } from "./taskUsage.js"

let gateway: TestGateway
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({ script, config: { token_usage: { enabled: false } } })
})
afterAll(() => gateway?.stop())

describe("token_usage.enabled: false", () => {
  it("the run's calls and its task are still counted in its stored run and the thread's token usage", async () => {
    const run = await runTask(api, "off")
    assert.deepInclude(run, {
      total_input_tokens: 120,
      total_output_tokens: 30,
      total_tokens: 150,
      llm_call_count: 2,
      lead_agent_tokens: 30,
      subagent_tokens: 120,
      middleware_tokens: 0
    })
    const usage = (await api("GET", "/api/threads/off/token-usage")).json()
    assert.strictEqual(usage.total_tokens, 150)
    assert.deepStrictEqual(usage.by_caller, { lead_agent: 30, subagent: 120, middleware: 0 })
    assert.deepStrictEqual(usage.by_model, { scripted: { tokens: 150, runs: 1 } })
    // no TokenUsageMiddleware: the answers carry no step attribution
    const state = (await api("GET", "/api/threads/off/state")).json()
    const answers = state.values.messages.filter((m: any) => m.type === "ai")
    assert.lengthOf(answers, 2)
    for (const answer of answers) assert.notProperty(answer.additional_kwargs ?? {}, "token_usage_attribution")
  }, 20_000)
})
