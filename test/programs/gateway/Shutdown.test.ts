/**
 * A gateway stopped (its layer closed, as `antler serve` on SIGTERM) while a run is under way, then started again on
 * the same data directory: the run stopped with the server is `interrupted` (as DeerFlow's drain on shutdown records
 * it), not `error` (`orphan_recovered`, what a process that died leaves); a run that had ended keeps its status; the
 * thread takes a new run. The model is a SCRIPTED Chat Completions server; the gateway reaches it with the real
 * `openai` client.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { until } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const human = (content: string) => ({ messages: [{ type: "human", content }] })

describe("a gateway stopped mid-run", () => {
  it("records the run it stopped as interrupted, keeps an ended run's status, and takes new runs", async () => {
    const home = Support.tempDir("antler-gw-shutdown-")
    const first = await Support.start({ script: Support.echoOrHang, home })
    gateways.push(first)
    const call = as(() => first)
    const thread = (await call("POST", "/threads", {})).json()
    const done = await call("POST", `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: human("hello")
    })
    assert.strictEqual(done.status, 200, done.text)
    const ended = (await call("GET", `/threads/${thread.thread_id}/runs`)).json()[0]
    const run = (await call("POST", `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: human("hang on")
    })).json()
    await until(async () => {
      const now = (await call("GET", `/threads/${thread.thread_id}/runs/${run.run_id}`)).json()
      return now.status === "running" &&
        first.scripted.requests.some((body) => Support.lastUserText(body).includes("hang"))
    }, "the second run waiting for the model")
    await first.stop()

    const second = await Support.start({ script: Support.echoOrHang, home })
    gateways.push(second)
    const again = as(() => second)
    const stopped = (await again("GET", `/threads/${thread.thread_id}/runs/${run.run_id}`)).json()
    assert.strictEqual(stopped.status, "interrupted")
    const kept = (await again("GET", `/threads/${thread.thread_id}/runs/${ended.run_id}`)).json()
    assert.strictEqual(kept.status, "success")
    const threadNow = (await again("GET", `/threads/${thread.thread_id}`)).json()
    assert.notStrictEqual(threadNow.status, "error")
    const next = await again("POST", `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: human("carry on")
    })
    assert.strictEqual(next.status, 200, next.text)
    const answer = next.json().messages.filter((m: any) => m.type === "ai").at(-1)
    assert.match(answer.content, /You said: [\s\S]*carry on/)
  })

  // DeerFlow restores a failed edit replay (test_run_agent_rolls_back_failed_edit_replay_and_publishes_restored_values);
  // one stopped with the server is undone as well
  it("undoes an edited question's run that the server stopped: the thread is as before the edit", async () => {
    const home = Support.tempDir("antler-gw-shutdown-edit-")
    const first = await Support.start({ script: Support.echoOrHang, home })
    gateways.push(first)
    const call = as(() => first)
    const thread = (await call("POST", "/threads", {})).json()
    const path = `/api/threads/${thread.thread_id}`
    for (const question of ["one", "two"]) {
      const done = await call("POST", `${path}/runs/wait`, { assistant_id: "lead_agent", input: human(question) })
      assert.strictEqual(done.status, 200, done.text)
    }
    const texts = async (get: typeof call) =>
      Support.visible((await get("GET", `${path}/state`)).json().values.messages).map((m: any) => m.content)
    const before = await texts(call)
    assert.strictEqual(before.length, 4)
    assert.match(before[3], /You said: [\s\S]*two/)
    const question = Support.visible((await call("GET", `${path}/state`)).json().values.messages)[2]
    const prepared = await call("POST", `${path}/runs/edit-regenerate/prepare`, {
      human_message_id: question.id,
      replacement_text: "hang on, edited"
    })
    assert.strictEqual(prepared.status, 200, prepared.text)
    const run = (await call("POST", `${path}/runs`, {
      assistant_id: "lead_agent",
      input: prepared.json().input,
      checkpoint: prepared.json().checkpoint,
      metadata: prepared.json().metadata
    })).json()
    await until(async () => {
      const now = (await call("GET", `${path}/runs/${run.run_id}`)).json()
      return now.status === "running" &&
        first.scripted.requests.some((body) => Support.lastUserText(body).includes("hang on, edited"))
    }, "the edited question's run waiting for the model")
    await first.stop()

    const second = await Support.start({ script: Support.echoOrHang, home })
    gateways.push(second)
    const again = as(() => second)
    assert.strictEqual((await again("GET", `${path}/runs/${run.run_id}`)).json().status, "interrupted")
    assert.deepStrictEqual(await texts(again), before)
  })
})
