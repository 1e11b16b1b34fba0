/**
 * The LangGraph SDK calls the gateway answered last (assistants count, versions, latest, subgraphs, create,
 * update, delete; threads prune; runs cancelMany, createBatch and joinStream without a thread), driven through
 * the real SDK client by two users, alice and bob: each call's answer, its refusals (a readable 4xx naming what
 * was wrong), and that one user never counts, prunes, cancels or joins the other's. The model is SCRIPTED.
 */
import type { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB, lastUserText, statusOf } = Support

const script = Support.echoOrHang

let gateway: TestGateway
let alice: Client
let bob: Client

beforeAll(async () => {
  ;({ alice, bob, gateway } = await Support.startTwoUsers(script))
  // alice's custom agent, an assistant of hers only
  const made = await raw(ALICE, "POST", "/api/agents", JSON.stringify({ name: "researcher", description: "finds" }))
  assert.strictEqual(made.status, 201, await made.text())
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

const raw = Requests.raw(() => gateway)

/** The status and the problem's detail an SDK call was refused with. */
const refusal = (call: Promise<unknown>): Promise<{ readonly status: number; readonly detail: string }> =>
  call.then(
    (answer) => assert.fail(`expected a refusal, got ${JSON.stringify(answer)}`),
    (error: { status: number; text: string }) => ({
      status: error.status,
      detail: String((JSON.parse(error.text) as { detail?: unknown }).detail)
    })
  )

/** Waits (up to 15 s) until `check` holds. */
const eventually = async (what: string, check: () => Promise<boolean>) => {
  for (let i = 0; i < 150; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.fail(`never: ${what}`)
}

const unfinished = (status: string | undefined) => status === "pending" || status === "running"

const runStatus = (client: Client, threadId: string, runId: string) =>
  client.runs.get(threadId, runId).then((run) => run.status as string)

/** Whether the store has a run of `user`'s that has not ended. */
const hasUnfinishedRun = async (user: string) => {
  const owners = new Map((await Effect.runPromise(gateway.store.list)).map((t) => [t.thread_id, t.owner]))
  const records = [
    ...await Effect.runPromise(gateway.store.runs({ status: "pending" })),
    ...await Effect.runPromise(gateway.store.runs({ status: "running" }))
  ]
  return records.some((record) => owners.get(record.thread_id) === user)
}

describe("assistants.count", () => {
  it("counts the user's assistants by graph, name and metadata, never another user's agents", async () => {
    assert.strictEqual(await alice.assistants.count(), 2)
    assert.strictEqual(await alice.assistants.count({ graphId: "lead_agent" }), 2)
    assert.strictEqual(await alice.assistants.count({ name: "research" }), 1)
    assert.strictEqual(await alice.assistants.count({ graphId: "other" }), 0)
    assert.strictEqual(await alice.assistants.count({ metadata: { team: "x" } }), 0)
    // search filters by metadata as count does (it ignored it)
    assert.deepStrictEqual(await alice.assistants.search({ metadata: { team: "x" } }), [])
    // a name matches in any case, as LangGraph's
    assert.strictEqual(await alice.assistants.count({ name: "RESEARCH" }), 1)
    // sorted by a field when asked (the lead agent first, then the agents by name, otherwise)
    const ids = (all: ReadonlyArray<{ assistant_id: string }>) => all.map((a) => a.assistant_id)
    assert.deepStrictEqual(ids(await alice.assistants.search()), ["lead_agent", "researcher"])
    assert.deepStrictEqual(ids(await alice.assistants.search({ sortBy: "assistant_id", sortOrder: "desc" })), [
      "researcher",
      "lead_agent"
    ])
    assert.deepStrictEqual(ids(await alice.assistants.search({ sortBy: "name", sortOrder: "asc" })), [
      "lead_agent",
      "researcher"
    ])
    const badSort = await raw(ALICE, "POST", "/assistants/search", JSON.stringify({ sort_by: "size" }))
    assert.strictEqual(badSort.status, 422)
    assert.include(await badSort.text(), "sort_by")
    // bob has the lead agent only
    assert.strictEqual(await bob.assistants.count(), 1)
    assert.strictEqual(await bob.assistants.count({ name: "research" }), 0)
    const malformed = await raw(ALICE, "POST", "/assistants/count", JSON.stringify({ name: 5 }))
    assert.strictEqual(malformed.status, 422)
    assert.include(await malformed.text(), "name")
  })
})

describe("assistants versions, latest, subgraphs", () => {
  it("answer the one version (1) and no subgraphs of the user's assistants; another user's are not found", async () => {
    for (const id of ["lead_agent", "researcher"]) {
      const versions = await alice.assistants.getVersions(id)
      assert.deepStrictEqual(versions.map((v) => [v.assistant_id, v.version, v.graph_id]), [[id, 1, "lead_agent"]])
      assert.notProperty(versions[0], "updated_at")
      assert.strictEqual((await alice.assistants.setLatest(id, 1)).assistant_id, id)
      assert.deepStrictEqual(await alice.assistants.getSubgraphs(id), {})
      assert.deepStrictEqual(await alice.assistants.getSubgraphs(id, { namespace: "tools", recurse: true }), {})
    }
    assert.deepStrictEqual(await alice.assistants.getVersions("lead_agent", { metadata: { team: "x" } }), [])
    assert.deepStrictEqual(await alice.assistants.getVersions("lead_agent", { offset: 1 }), [])
    const other = await refusal(alice.assistants.setLatest("lead_agent", 2))
    assert.strictEqual(other.status, 404)
    assert.include(other.detail, "Version 2")
    // bob has no researcher, nobody has "nobody"
    for (const [client, id] of [[bob, "researcher"], [alice, "nobody"]] as const) {
      assert.strictEqual(await statusOf(client.assistants.getVersions(id)), 404)
      assert.strictEqual(await statusOf(client.assistants.setLatest(id, 1)), 404)
      assert.strictEqual(await statusOf(client.assistants.getSubgraphs(id)), 404)
      assert.strictEqual(await statusOf(client.assistants.getSubgraphs(id, { namespace: "tools" })), 404)
    }
    // bodies of the wrong shape
    const limit = await raw(ALICE, "POST", "/assistants/lead_agent/versions", JSON.stringify({ limit: 0 }))
    assert.strictEqual(limit.status, 422)
    const version = await raw(ALICE, "POST", "/assistants/lead_agent/latest", JSON.stringify({ version: "1" }))
    assert.strictEqual(version.status, 422)
  })
})

describe("assistants create, update, delete", () => {
  it("answer a create of an assistant the user has (if_exists: do_nothing), refuse the rest", async () => {
    const existing = (assistantId: string) =>
      alice.assistants.create({ graphId: "lead_agent", assistantId, ifExists: "do_nothing" })
    const lead = await existing("lead_agent")
    assert.strictEqual(lead.assistant_id, "lead_agent")
    assert.strictEqual(lead.version, 1)
    const hers = await existing("researcher")
    assert.strictEqual(hers.assistant_id, "researcher")
    // raise, LangGraph's default: 409
    const exists = await refusal(alice.assistants.create({ graphId: "lead_agent", assistantId: "lead_agent" }))
    assert.strictEqual(exists.status, 409)
    assert.include(exists.detail, "do_nothing")
    // a new assistant is an agent to make
    for (
      const payload of [
        { graphId: "lead_agent" },
        { graphId: "lead_agent", assistantId: "writer", ifExists: "do_nothing" as const },
        { graphId: "lead_agent", assistantId: "researcher", ifExists: "do_nothing" as const }
      ]
    ) {
      const refused = await refusal((payload.assistantId === "researcher" ? bob : alice).assistants.create(payload))
      assert.strictEqual(refused.status, 422, JSON.stringify(payload))
      assert.include(refused.detail, "POST /api/agents")
    }
    assert.strictEqual(await bob.assistants.count(), 1)
    const noGraph = await raw(ALICE, "POST", "/assistants", JSON.stringify({ assistant_id: "lead_agent" }))
    assert.strictEqual(noGraph.status, 422)
    assert.include(await noGraph.text(), "graph_id")

    const update = await refusal(alice.assistants.update("researcher", { name: "renamed" }))
    assert.strictEqual(update.status, 422)
    assert.include(update.detail, "PUT /api/agents/researcher")
    assert.include((await refusal(alice.assistants.update("lead_agent", { name: "x" }))).detail, "config.yaml")
    const deleted = await refusal(alice.assistants.delete("researcher"))
    assert.strictEqual(deleted.status, 422)
    assert.include(deleted.detail, "DELETE /api/agents/researcher")
    assert.include((await refusal(alice.assistants.delete("lead_agent"))).detail, "cannot be deleted")
    assert.strictEqual((await alice.assistants.get("researcher")).name, "researcher")
    // bob has no researcher
    assert.strictEqual(await statusOf(bob.assistants.update("researcher", { name: "x" })), 404)
    assert.strictEqual(await statusOf(bob.assistants.delete("researcher")), 404)
  })
})

describe("threads.prune", () => {
  it("deletes the caller's threads of those ids (a running one too), not another user's", async () => {
    const one = await alice.threads.create()
    await alice.runs.wait(one.thread_id, "lead_agent", { input: human("hello") })
    const two = await alice.threads.create()
    const hanging = await alice.runs.create(two.thread_id, "lead_agent", { input: human("hang on") })
    await eventually("the run runs", async () => (await runStatus(alice, two.thread_id, hanging.run_id)) === "running")
    const his = await bob.threads.create()

    // bob's prune names her threads: only his own goes
    assert.deepStrictEqual(await bob.threads.prune([one.thread_id, two.thread_id, his.thread_id]), { pruned_count: 1 })
    assert.strictEqual(await statusOf(bob.threads.get(his.thread_id)), 404)
    assert.strictEqual((await alice.threads.get(one.thread_id)).thread_id, one.thread_id)
    assert.strictEqual(await runStatus(alice, two.thread_id, hanging.run_id), "running")

    // hers, named twice, with an id of no thread
    assert.deepStrictEqual(
      await alice.threads.prune([one.thread_id, two.thread_id, one.thread_id, "no-such-thread"]),
      { pruned_count: 2 }
    )
    assert.strictEqual(await statusOf(alice.threads.get(one.thread_id)), 404)
    assert.strictEqual(await statusOf(alice.threads.get(two.thread_id)), 404)
    assert.isFalse(await hasUnfinishedRun("alice"))
  })

  it("refuses keep_latest, too many ids and bodies of the wrong shape, pruning nothing", async () => {
    const kept = await alice.threads.create()
    const latest = await refusal(alice.threads.prune([kept.thread_id], { strategy: "keep_latest" }))
    assert.strictEqual(latest.status, 422)
    assert.include(latest.detail, "keep_latest")
    const many = Array.from({ length: 1001 }, (_, i) => (i === 0 ? kept.thread_id : `t-${i}`))
    assert.strictEqual(await statusOf(alice.threads.prune(many)), 422)
    for (const body of [{}, { thread_ids: kept.thread_id }, { thread_ids: [kept.thread_id], strategy: "all" }]) {
      const refused = await raw(ALICE, "POST", "/threads/prune", JSON.stringify(body))
      assert.strictEqual(refused.status, 422, JSON.stringify(body))
    }
    assert.strictEqual((await alice.threads.get(kept.thread_id)).thread_id, kept.thread_id)
  })
})

describe("runs.cancelMany", () => {
  it("cancels the caller's runs by ids or by status, never another user's", async () => {
    const thread = await alice.threads.create()
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    const queued = await alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("after"),
      multitaskStrategy: "enqueue"
    })
    const bobs = await bob.threads.create()
    const bobsRun = await bob.runs.create(bobs.thread_id, "lead_agent", { input: human("hang here") })
    await eventually("the runs run", async () =>
      (await runStatus(alice, thread.thread_id, hanging.run_id)) === "running" &&
      (await runStatus(bob, bobs.thread_id, bobsRun.run_id)) === "running")

    // bob names her runs (by her thread, or through his), or cancels all of his: hers go on
    for (const threadId of [thread.thread_id, bobs.thread_id]) {
      assert.strictEqual(await statusOf(bob.runs.cancelMany({ threadId, runIds: [hanging.run_id] })), 404)
    }
    const otherStatus = await alice.threads.create()
    const idle = await alice.threads.create()
    const aliceElse = await alice.runs.create(otherStatus.thread_id, "lead_agent", { input: human("hang too") })
    await bob.runs.cancelMany({ status: "all" })
    await eventually("bob's run ends", async () => !unfinished(await runStatus(bob, bobs.thread_id, bobsRun.run_id)))
    assert.strictEqual(await runStatus(alice, thread.thread_id, hanging.run_id), "running")
    assert.strictEqual(await runStatus(alice, thread.thread_id, queued.run_id), "pending")

    // hers by ids: the running one and the queued one
    await alice.runs.cancelMany({ threadId: thread.thread_id, runIds: [hanging.run_id, queued.run_id] })
    await eventually("her runs end", async () =>
      !unfinished(await runStatus(alice, thread.thread_id, hanging.run_id)) &&
      !unfinished(await runStatus(alice, thread.thread_id, queued.run_id)))
    assert.strictEqual(await runStatus(alice, otherStatus.thread_id, aliceElse.run_id), "running")
    // cancelling runs that ended is no error
    await alice.runs.cancelMany({ threadId: thread.thread_id, runIds: [hanging.run_id] })
    assert.strictEqual(await statusOf(alice.runs.cancelMany({ threadId: idle.thread_id, runIds: ["nope"] })), 404)

    // hers by status: the one left running
    await alice.runs.cancelMany({ status: "running", action: "interrupt" })
    await eventually("her last run ends", async () =>
      !unfinished(await runStatus(alice, otherStatus.thread_id, aliceElse.run_id)))
    assert.isFalse(await hasUnfinishedRun("alice"))
  })

  it("cancels what it can and refuses (409) a run of another gateway process, naming it", async () => {
    const thread = await alice.threads.create()
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
    const [done] = await alice.runs.list(thread.thread_id)
    const [record] = await Effect.runPromise(gateway.store.runs({ runId: done!.run_id }))
    // the record of a run another process sharing the store runs on her thread
    const other = "run-of-another-process"
    await Effect.runPromise(gateway.store.saveRun({ ...record!, run_id: other, status: "running", ended_at: null }))
    // and a run of hers here, on another thread
    const second = await alice.threads.create()
    const hanging = await alice.runs.create(second.thread_id, "lead_agent", { input: human("hang on") })

    const refused = await refusal(alice.runs.cancelMany({ status: "all" }))
    assert.strictEqual(refused.status, 409)
    assert.include(refused.detail, other)
    await eventually("her own run ends", async () =>
      !unfinished(await runStatus(alice, second.thread_id, hanging.run_id)))
    assert.strictEqual(await runStatus(alice, thread.thread_id, other), "running")
    // (the other process ends it)
    await Effect.runPromise(gateway.store.saveRun({ ...record!, run_id: other }))
  })

  it("refuses a request naming no runs, both ways, run ids without their thread, or a bad action", async () => {
    const thread = await alice.threads.create()
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string, string]> = [
      [{}, "", "one of them"],
      [{ thread_id: thread.thread_id, run_ids: ["x"], status: "all" }, "", "not both"],
      [{ run_ids: ["x"] }, "", "thread_id"],
      [{ status: "done" }, "", "status"],
      [{ status: "all" }, "?action=explode", "action"],
      [{ thread_id: thread.thread_id, run_ids: Array.from({ length: 1001 }, (_, i) => `r${i}`) }, "", "run_ids"]
    ]
    for (const [body, query, named] of cases) {
      const refused = await raw(ALICE, "POST", `/runs/cancel${query}`, JSON.stringify(body))
      assert.strictEqual(refused.status, 422, JSON.stringify(body))
      assert.include(await refused.text(), named)
    }
  })
})

describe("runs.createBatch", () => {
  it("starts stateless runs of the caller's assistants", async () => {
    const tag = crypto.randomUUID()
    const started = await alice.runs.createBatch([
      { assistantId: "lead_agent", input: human(`one ${tag}`) },
      { assistantId: "researcher", input: human(`two ${tag}`) }
    ])
    assert.strictEqual(started.length, 2)
    assert.deepStrictEqual(started.map((run) => run.assistant_id), ["lead_agent", "researcher"])
    assert.notStrictEqual(started[0]!.thread_id, started[1]!.thread_id)
    await eventually("both runs asked the model", async () =>
      [`one ${tag}`, `two ${tag}`].every((text) =>
        gateway.scripted.requests.some((request) => lastUserText(request).includes(text))
      ))
  })

  it("refuses the whole batch for one refused run (another user's agent), cancelling the runs it started", async () => {
    const before = gateway.scripted.requests.length
    const refused = await refusal(bob.runs.createBatch([
      { assistantId: "lead_agent", input: human("hang in the batch") },
      { assistantId: "researcher", input: human("never") }
    ]))
    assert.strictEqual(refused.status, 404)
    assert.include(refused.detail, "[1]")
    await eventually("no run of bob's is left", async () => !(await hasUnfinishedRun("bob")))
    assert.isFalse(gateway.scripted.requests.slice(before).some((request) => lastUserText(request).includes("never")))
  })

  it("refuses an empty batch, one too large, and a body that is not a list", async () => {
    for (
      const body of [[], Array.from({ length: 101 }, () => ({ assistant_id: "lead_agent" })), { assistant_id: "x" }]
    ) {
      const refused = await raw(BOB, "POST", "/runs/batch", JSON.stringify(body))
      assert.strictEqual(refused.status, 422, JSON.stringify(body).slice(0, 40))
    }
  })
})

describe("runs.joinStream without a thread", () => {
  it("streams the user's run by its id alone; another user's, or none, is not found", async () => {
    // (kept after its end, to be joined then: Antler's `on_completion`, which the SDK's type does not know)
    const run = await alice.runs.create(null, "lead_agent", { input: human("stream me"), onCompletion: "keep" as any })
    await eventually("the run ends", async () => !unfinished(await runStatus(alice, run.thread_id, run.run_id)))
    const events: Array<{ event: string; data: any }> = []
    for await (const part of alice.runs.joinStream(null, run.run_id)) events.push(part as any)
    assert.strictEqual(events[0]?.event, "metadata")
    assert.strictEqual(events[0]?.data.run_id, run.run_id)
    const values = events.filter((part) => part.event === "values").at(-1)
    const answer = (values?.data.messages as Array<any>).find((message) => message.type === "ai")
    assert.include(answer?.content, "You said:")
    assert.include(answer?.content, "stream me")

    for (const [client, runId] of [[bob, run.run_id], [alice, "no-such-run"]] as const) {
      const answered = await raw(client === bob ? BOB : ALICE, "GET", `/runs/${runId}/stream`)
      assert.strictEqual(answered.status, 404)
      assert.include(await answered.text(), `Run ${runId} not found`)
    }
    assert.strictEqual(await statusOf(bob.runs.get(run.thread_id, run.run_id)), 404)
  })
})
