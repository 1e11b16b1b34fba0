/**
 * DeerFlow's run events (`GET /api/threads/{id}/runs/{run_id}/events`): each run's journal, recorded by the gateway
 * and kept in the thread store: `run.start`, the messages it wrote (the human input, the model's answers, the tool
 * results), `run.end`; paged by `after_seq` and `limit`, filtered by `event_types`; kept across a restart (SQLite),
 * one user's never readable by another, removed with the thread. It answered `[]` for every run.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-run-events-0000"
const BOB = "bob-token-run-events-000000"

let gateway: TestGateway
let home: string

const lastRole = (body: any) => body.messages[body.messages.length - 1]?.role
const toolCount = (body: any) => body.messages.filter((m: any) => m.role === "tool").length
const asksReport = (body: any) =>
  body.messages.some((m: any) => m.role === "user" && JSON.stringify(m.content).includes("Write the deer report"))
const REPORT = "/mnt/user-data/outputs/deer.md"

// a report: written, then presented with a look at the outputs in the same step, then the answer
const report = (body: any) =>
  toolCount(body) === 0
    ? { toolCalls: [{ name: "write_file", arguments: { description: "report", path: REPORT, content: "# Deer" } }] }
    : toolCount(body) === 1
    ? {
      toolCalls: [
        { name: "ls", arguments: { description: "outputs", path: "/mnt/user-data/outputs" } },
        { name: "present_files", arguments: { filepaths: [REPORT] } }
      ]
    }
    : "Here is the report."

const options = () => ({
  home,
  // a tool the agent does not have: its call is answered with an error result, then the model answers
  script: (body: any) =>
    asksReport(body)
      ? report(body)
      : lastRole(body) === "tool"
      ? "Deer eat grass."
      : { content: "Let me check. ", toolCalls: [{ name: "deer_lookup", arguments: { q: "food" } }] },
  config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
})

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  home = Support.tempDir("antler-run-events-")
  gateway = await Support.start(options())
})
afterAll(() => gateway?.stop())

describe("a run's events, as DeerFlow's app reads them", () => {
  it("records the run's messages between run.start and run.end, pages and filters them, keeps them", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "journal" })).status, 200)
    const ran = await alice("POST", "/api/threads/journal/runs/wait", {
      input: { messages: [{ type: "human", content: "What do deer eat?" }] }
    })
    assert.strictEqual(ran.status, 200, ran.text)
    const runs = (await alice("GET", "/api/threads/journal/runs")).json()
    const runId = runs[0].run_id

    const read = async (query = "") => {
      const answer = await alice("GET", `/api/threads/journal/runs/${runId}/events${query}`)
      assert.strictEqual(answer.status, 200, answer.text)
      return answer.json() as ReadonlyArray<any>
    }
    const events = await read()
    assert.deepStrictEqual(events.map((e) => e.event_type), [
      "run.start",
      "llm.human.input",
      "llm.ai.response",
      "llm.tool.result",
      "llm.ai.response",
      "run.end",
      "run.delivery"
    ])
    assert.deepStrictEqual(events.map((e) => e.seq), [1, 2, 3, 4, 5, 6, 7])
    assert.isTrue(events.every((e) => e.thread_id === "journal" && e.run_id === runId && e.created_at !== ""))
    assert.strictEqual(events[1].content.content, "What do deer eat?")
    assert.strictEqual(events[2].content.tool_calls[0].name, "deer_lookup")
    assert.strictEqual(events[2].category, "message")
    assert.strictEqual(events[4].content.content, "Deer eat grass.")
    assert.deepInclude(events[5].content, { status: "success", stop_reason: "completed" })
    // DeerFlow's run event contract (contracts/run_event_stream_contract.json, test_run_event_stream_contract):
    // run.start names its chain and caller, a model's answer its call index, usage and latency, run.end its status
    assert.deepStrictEqual([events[0].content, events[0].metadata], [{ chain: "lead_agent" }, { caller: "lead_agent" }])
    assert.deepStrictEqual(events.filter((e) => e.event_type === "llm.ai.response").map((e) => e.metadata), [
      { caller: "lead_agent", usage: events[2].metadata.usage, latency_ms: null, llm_call_index: 1 },
      { caller: "lead_agent", usage: events[4].metadata.usage, latency_ms: null, llm_call_index: 2 }
    ])
    assert.isObject(events[2].metadata.usage)
    assert.deepInclude(events[5].metadata, { status: "success" })

    // DeerFlow's paging and filters
    assert.deepStrictEqual((await read("?limit=2")).map((e) => e.seq), [1, 2])
    assert.deepStrictEqual((await read("?limit=2&after_seq=2")).map((e) => e.seq), [3, 4])
    assert.deepStrictEqual((await read("?event_types=llm.ai.response,run.end")).map((e) => e.seq), [3, 5, 6])
    assert.deepStrictEqual(await read("?task_id=nope"), [])
    const refused = await alice("GET", `/api/threads/journal/runs/${runId}/events?limit=0`)
    assert.strictEqual(refused.status, 422)
    assert.include(refused.text, "limit must be an integer from 1 to 2000")

    // kept in the thread store: the same after a restart
    await gateway.stop()
    gateway = await Support.start(options())
    assert.deepStrictEqual(await read(), events)
  })

  // DeerFlow's test_run_journal TestDeliveryTracking: the run's receipt of the files it presented, by tool
  it("ends with run.delivery: what the run presented, by the tool that presented it", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "report" })).status, 200)
    const ran = await alice("POST", "/api/threads/report/runs/wait", {
      input: { messages: [{ type: "human", content: "Write the deer report" }] }
    })
    assert.strictEqual(ran.status, 200, ran.text)
    assert.deepStrictEqual(ran.json().artifacts, [REPORT])
    const runId = (await alice("GET", "/api/threads/report/runs")).json()[0].run_id
    const events = (await alice("GET", `/api/threads/report/runs/${runId}/events`)).json() as ReadonlyArray<any>
    const last = events.at(-1)
    assert.deepInclude(last, { event_type: "run.delivery", category: "outputs" })
    // (it wrote the report it presented: DeerFlow's verdict on its delivery too)
    assert.deepStrictEqual(last.content, {
      presented: 1,
      paths: [REPORT],
      by_tool: { present_files: [REPORT] },
      verification: { source: "outputs_changed", requirement: "present_files_matches_produced_output" },
      produced_paths: [REPORT],
      presented_paths: [REPORT],
      matched_paths: [REPORT],
      stage: "presented",
      satisfied: true
    })
    const only = await alice("GET", `/api/threads/report/runs/${runId}/events?event_types=run.delivery`)
    assert.deepStrictEqual(only.json(), [last])

    // a run that presented nothing: its receipt says so
    await alice("POST", "/api/threads", { thread_id: "no-report" })
    await alice("POST", "/api/threads/no-report/runs/wait", { input: { messages: [{ type: "human", content: "hi" }] } })
    const other = (await alice("GET", "/api/threads/no-report/runs")).json()[0].run_id
    const receipt = await alice("GET", `/api/threads/no-report/runs/${other}/events?event_types=run.delivery`)
    assert.deepStrictEqual(receipt.json().map((e: any) => e.content), [{ presented: 0, paths: [], by_tool: {} }])
  })

  it("bob cannot read alice's run events, by her thread or by his", async () => {
    await alice("POST", "/api/threads", { thread_id: "alice-own" })
    const ran = await alice("POST", "/api/threads/alice-own/runs/wait", {
      input: { messages: [{ type: "human", content: "A secret of alice's" }] }
    })
    assert.strictEqual(ran.status, 200, ran.text)
    const runId = (await alice("GET", "/api/threads/alice-own/runs")).json()[0].run_id
    assert.isAbove((await alice("GET", `/api/threads/alice-own/runs/${runId}/events`)).json().length, 0)

    const direct = await bob("GET", `/api/threads/alice-own/runs/${runId}/events`)
    assert.strictEqual(direct.status, 404)
    assert.notInclude(direct.text, "secret")
    await bob("POST", "/api/threads", { thread_id: "bob-own" })
    const crossed = await bob("GET", `/api/threads/bob-own/runs/${runId}/events`)
    assert.strictEqual(crossed.status, 404)
    assert.notInclude(crossed.text, "secret")
  })

  it("a thread's run events go with it", async () => {
    await alice("POST", "/api/threads", { thread_id: "short-lived" })
    await alice("POST", "/api/threads/short-lived/runs/wait", {
      input: { messages: [{ type: "human", content: "hello" }] }
    })
    const runId = (await alice("GET", "/api/threads/short-lived/runs")).json()[0].run_id
    const stored = (await Effect.runPromise(gateway.store.runs({ runId })))[0]!
    const kept = await Effect.runPromise(gateway.store.runEvents(stored.thread_id, runId))
    assert.isAbove(kept.length, 0)
    assert.include([200, 204], (await alice("DELETE", "/api/threads/short-lived")).status)
    const after = await Effect.runPromise(gateway.store.runEvents(stored.thread_id, runId))
    assert.deepStrictEqual(after, [])
  })
})
