/**
 * DeerFlow's runs router (test_runs_api_endpoints), through the gateway: a run whose `config.configurable` is JSON
 * `null` (a client's way of saying none) runs, on a thread of its own or on the thread named by the path, with or
 * without a `context` (test_resolve_thread_id_handles_null_configurable, test_build_run_config_handles_null_
 * configurable: a 500 there once).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Done.",
    config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: Support.ALICE, user: "alice" }] } } }
  })
})
afterAll(() => gateway?.stop())

const lastAnswer = (values: any) => values.messages.at(-1).content

describe("DeerFlow's runs router", () => {
  it("runs with config.configurable null, stateless or on a thread, with or without a context", async () => {
    const input = Support.userInput("hi")
    const stateless = await alice("POST", "/api/runs/wait", {
      assistant_id: "lead_agent",
      input,
      config: { configurable: null }
    })
    assert.strictEqual(stateless.status, 200, stateless.text)
    assert.strictEqual(lastAnswer(stateless.json()), "Done.")
    const withContext = await alice("POST", "/api/runs/wait", {
      assistant_id: "lead_agent",
      input,
      config: { configurable: null },
      context: {}
    })
    assert.strictEqual(withContext.status, 200, withContext.text)
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "null-config" })).status, 200)
    const onThread = await alice("POST", "/api/threads/null-config/runs/wait", {
      assistant_id: "lead_agent",
      input,
      config: { configurable: null },
      context: { thinking_enabled: false }
    })
    assert.strictEqual(onThread.status, 200, onThread.text)
    assert.strictEqual(lastAnswer(onThread.json()), "Done.")
    const [run] = (await alice("GET", "/api/threads/null-config/runs")).json()
    assert.strictEqual(run.status, "success")
  })
})
