/**
 * LangGraph's crons through the real `@langchain/langgraph-sdk` Client (`client.crons`) against a gateway with a
 * scripted model: a thread cron and a stateless cron on the shortest schedule five cron fields allow (each
 * minute) run at their tick, as ordinary runs (listed on the thread, the model asked with the cron's input); a
 * cron deleted before its tick never runs; crons are searched, counted, changed; another user neither sees nor
 * deletes them; bodies of the wrong shape are refused with a 422 naming the field; a thread's crons go with it;
 * crons outlive a restart.
 * The timing of ticks across processes and restarts is the scheduler's (Scheduler.test.ts, on TestClock).
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Layer from "effect/Layer"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Support from "./support.js"
import * as MinuteClock from "../../support/minuteClock.js"
import { eventually } from "../../support/poll.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"

const lastUser = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")

const script = (body: ChatRequestBody) => `Done: ${lastUser(body)}`

const gateways: Array<Support.TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop()
})

// the gateways' clock (and the test's): moved to just before a minute's end where a test waits for a tick
const minute = MinuteClock.make()

const start = async (home?: string) => {
  const gateway = await Support.start({
    script,
    references: Layer.setClock(minute.clock),
    ...(home === undefined ? {} : { home }),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        scheduler_poll_seconds: 1,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
      }
    }
  })
  gateways.push(gateway)
  return gateway
}

const clientOf = (gateway: Support.TestGateway, token: string) => new Client({ apiUrl: gateway.url, apiKey: token })

const post = async (gateway: Support.TestGateway, path: string, body: unknown, method = "POST") => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/**
 * Moves the gateways' clock to 12 s before its next minute: what a test makes next shares that tick, which comes
 * within seconds.
 */
const nearTick = () => minute.nearMinuteEnd(12)

const said = (text: string) => ({ messages: [{ role: "user", content: text }] })

/** The status of a failed SDK call. */
const statusOf = async (call: Promise<unknown>) => {
  try {
    await call
    return 200
  } catch (error) {
    return (error as { status?: number }).status
  }
}

const until = <A>(check: () => Promise<A | undefined>, what: string, tries = 4000) => eventually(check, what, { tries })

describe("LangGraph crons through the SDK", () => {
  it("a thread cron and a stateless cron run at their tick; a deleted one never; another user sees none", async () => {
    const gateway = await start()
    const alice = clientOf(gateway, ALICE)
    const bob = clientOf(gateway, BOB)
    const info: any = await (await fetch(`${gateway.url}/info`)).json()
    assert.isTrue(info.flags.crons)

    // all three crons are made within one minute, so that all three are due at the same tick
    nearTick()
    const thread = await alice.threads.create()
    const onThread = await alice.crons.createForThread(thread.thread_id, "lead_agent", {
      schedule: "* * * * *",
      input: said("Water the plants (thread cron)"),
      metadata: { purpose: "plants" }
    })
    assert.strictEqual(onThread.thread_id, thread.thread_id)
    assert.strictEqual(onThread.assistant_id, "lead_agent")
    assert.strictEqual(onThread.schedule, "* * * * *")
    assert.strictEqual(onThread.user_id, "alice")
    assert.deepStrictEqual(onThread.metadata, { purpose: "plants" })
    assert.deepStrictEqual(onThread.payload.input, said("Water the plants (thread cron)"))
    assert.strictEqual(onThread.end_time, null)
    const next = Date.parse(onThread.next_run_date)
    assert.isTrue(next > minute.now() - 1000 && next <= minute.now() + 60_000, onThread.next_run_date)
    assert.strictEqual(next % 60_000, 0)

    const stateless = await alice.crons.create("lead_agent", {
      schedule: "*  *  * * *",
      // half a minute after its first tick: it runs once
      endTime: new Date(next + 30_000).toISOString(),
      input: said("Report the weather (stateless cron)"),
      metadata: { purpose: "weather" },
      onRunCompleted: "keep"
    })
    assert.strictEqual(stateless.thread_id, null)
    assert.strictEqual(stateless.schedule, "* * * * *")

    const doomedThread = await alice.threads.create()
    const doomed = await alice.crons.createForThread(doomedThread.thread_id, "lead_agent", {
      schedule: "* * * * *",
      input: said("Doomed cron")
    })
    await alice.crons.delete(doomed.cron_id)
    assert.strictEqual(await statusOf(alice.crons.delete(doomed.cron_id)), 404)

    // bob: none of alice's crons, to see or delete; alice's thread is not his to schedule on
    assert.deepStrictEqual(await bob.crons.search(), [])
    assert.strictEqual(await bob.crons.count(), 0)
    assert.strictEqual(await statusOf(bob.crons.delete(onThread.cron_id)), 404)
    assert.strictEqual(await statusOf(bob.crons.update(onThread.cron_id, { enabled: false })), 404)
    assert.strictEqual(
      await statusOf(bob.crons.createForThread(thread.thread_id, "lead_agent", { schedule: "* * * * *" })),
      404
    )

    // alice's search and count
    const all = await alice.crons.search()
    assert.sameMembers(all.map((c) => c.cron_id), [onThread.cron_id, stateless.cron_id])
    assert.strictEqual(await alice.crons.count(), 2)
    const ofThread = await alice.crons.search({ threadId: thread.thread_id })
    assert.deepStrictEqual(ofThread.map((c) => c.cron_id), [onThread.cron_id])
    assert.deepStrictEqual(
      (await alice.crons.search({ metadata: { purpose: "weather" } })).map((c) => c.cron_id),
      [stateless.cron_id]
    )
    assert.strictEqual(await alice.crons.count({ metadata: { purpose: "nothing" } }), 0)
    const selected = await alice.crons.search({ select: ["cron_id", "schedule"], sortBy: "cron_id", sortOrder: "asc" })
    assert.deepStrictEqual(
      selected,
      [onThread, stateless].map((c) => ({ cron_id: c.cron_id, schedule: "* * * * *" }))
        .sort((a, b) => (a.cron_id < b.cron_id ? -1 : 1))
    )
    // the gateway's own scheduled tasks do not list the crons
    const tasks = await fetch(`${gateway.url}/api/scheduled-tasks`, { headers: { authorization: `Bearer ${ALICE}` } })
    assert.deepStrictEqual(await tasks.json(), [])

    // the tick: the thread cron's run on its thread, as any run
    const run = await until(async () => {
      const runs = await alice.runs.list(thread.thread_id)
      return runs.find((r) => r.status === "success")
    }, "the thread cron's run")
    assert.strictEqual((run.metadata as Record<string, unknown>).cron_id, onThread.cron_id)
    type Values = { messages: Array<{ type: string; content: unknown }> }
    const state = await alice.threads.getState<Values>(thread.thread_id)
    const messages = Support.visible(state.values.messages)
    assert.deepStrictEqual(messages.slice(0, 2).map((m: any) => m.type), ["human", "ai"])
    assert.strictEqual(messages[0].content, "Water the plants (thread cron)")
    assert.include(messages[1].content, "Done:")

    // the stateless cron's run on a thread of its own, kept (on_run_completed: keep)
    const own = await until(async () => {
      const found = await alice.threads.search({ metadata: { cron_id: stateless.cron_id } })
      return found.length > 0 ? found[0] : undefined
    }, "the stateless cron's thread")
    assert.notStrictEqual(own.thread_id, thread.thread_id)
    await until(async () => {
      const runs = await alice.runs.list(own.thread_id)
      return runs.find((r) => r.status === "success")
    }, "the stateless cron's run")

    // the model was asked each cron's input, the deleted cron's never; its thread has no run
    const asked = gateway.scripted.requests.map(lastUser)
    assert.isTrue(asked.some((text) => text.includes("Water the plants")))
    assert.isTrue(asked.some((text) => text.includes("Report the weather")))
    assert.isFalse(asked.some((text) => text.includes("Doomed cron")))
    assert.deepStrictEqual(await alice.runs.list(doomedThread.thread_id), [])
    assert.strictEqual(await bob.crons.count(), 0)

    // after its tick, the thread cron's next one is a minute on (or more, on a slow machine); the stateless
    // cron, past its end, has none
    const after = await alice.crons.search({ threadId: thread.thread_id })
    assert.isTrue(Date.parse(after[0]!.next_run_date!) >= next + 60_000, after[0]!.next_run_date!)
    assert.strictEqual((await alice.crons.search({ metadata: { purpose: "weather" } }))[0]!.next_run_date, null)
    assert.lengthOf(await alice.threads.search({ metadata: { cron_id: stateless.cron_id } }), 1)

    // paused, and deleted: gone from the search
    const paused = await alice.crons.update(stateless.cron_id, { enabled: false })
    assert.isFalse(paused.enabled)
    assert.deepStrictEqual((await alice.crons.search({ enabled: false })).map((c) => c.cron_id), [stateless.cron_id])
    await alice.crons.delete(onThread.cron_id)
    assert.deepStrictEqual((await alice.crons.search()).map((c) => c.cron_id), [stateless.cron_id])
  }, 180_000)

  it("refuses bodies of the wrong shape with a 422 naming the field", async () => {
    const gateway = await start()
    const thread = await clientOf(gateway, ALICE).threads.create()
    const refused: ReadonlyArray<readonly [string, unknown, string]> = [
      ["/runs/crons", {}, "schedule"],
      ["/runs/crons", { schedule: 5 }, "schedule"],
      ["/runs/crons", { schedule: "every minute" }, "schedule: Cron expression must contain exactly 5 fields"],
      ["/runs/crons", { schedule: "61 * * * *" }, "schedule: Invalid cron expression"],
      ["/runs/crons", { schedule: "* * * * *", timezone: "Mars/Olympus" }, "timezone: Unknown timezone"],
      ["/runs/crons", { schedule: "* * * * *", end_time: "tomorrow" }, "end_time"],
      ["/runs/crons", { schedule: "* * * * *", input: { messages: 5 } }, "input"],
      ["/runs/crons", { schedule: "* * * * *", interrupt_before: ["agent"] }, "interrupt_before"],
      ["/runs/crons", { schedule: "* * * * *", on_run_completed: "forget" }, "on_run_completed"],
      ["/runs/crons", { schedule: "* * * * *", context: { model_name: "no-such-model" } }, "Unknown model"],
      ["/runs/crons", { schedule: "* * * * *", input: said("x".repeat(300_000)) }, "bytes of JSON"],
      [`/threads/${thread.thread_id}/runs/crons`, { schedule: "* * *" }, "schedule"],
      ["/runs/crons/search", { limit: 0 }, "limit"],
      ["/runs/crons/search", { sort_by: "secret" }, "sort_by"],
      ["/runs/crons/count", { metadata: "purpose" }, "metadata"]
    ]
    for (const [path, body, detail] of refused) {
      const answer = await post(gateway, path, body)
      const what = `${path} ${JSON.stringify(body).slice(0, 80)}`
      assert.strictEqual(answer.status, 422, `${what}: ${JSON.stringify(answer.body)}`)
      assert.include(answer.body.detail, detail, what)
    }
    // a change is checked as a creation is; a cron past its end has no next run
    const made = await post(gateway, "/runs/crons", { schedule: "0 9 * * *", end_time: "2020-01-01T00:00:00Z" })
    assert.strictEqual(made.status, 200)
    assert.strictEqual(made.body.next_run_date, null)
    assert.strictEqual(made.body.end_time, "2020-01-01T00:00:00.000Z")
    const changed = await post(gateway, `/runs/crons/${made.body.cron_id}`, { schedule: "0 9 * *" }, "PATCH")
    assert.strictEqual(changed.status, 422)
    assert.include(changed.body.detail, "schedule")
    const cleared = await post(
      gateway,
      `/runs/crons/${made.body.cron_id}`,
      { end_time: null, timezone: "Asia/Shanghai" },
      "PATCH"
    )
    assert.strictEqual(cleared.status, 200)
    assert.strictEqual(cleared.body.end_time, null)
    assert.strictEqual(cleared.body.timezone, "Asia/Shanghai")
    assert.strictEqual(new Date(cleared.body.next_run_date).getUTCHours(), 1)
    // another thread's path: the thread must be the user's
    const missing = await post(gateway, "/threads/no-such-thread/runs/crons", { schedule: "* * * * *" })
    assert.strictEqual(missing.status, 404)
    // an assistant that is no agent of the user's does not exist: a 404, as a run of it is (LangGraph's answer)
    for (const path of ["/runs/crons", `/threads/${thread.thread_id}/runs/crons`]) {
      const unknown = await post(gateway, path, { schedule: "* * * * *", assistant_id: "nobody-here" })
      assert.strictEqual(unknown.status, 404, `${path}: ${JSON.stringify(unknown.body)}`)
      assert.include(unknown.body.detail, `No assistant found for "nobody-here"`)
    }
  })

  it("keeps no request credential: secrets of its contexts are left out, auth_token refused", async () => {
    // as a run's (DeerFlow's test_run_metadata_secret_safety, test_skill_request_scoped_secrets): a cron kept its
    // payload's `context.secrets` and answered it, and its runs' metadata took `auth_token` into their records
    const gateway = await start()
    const token = "request-scoped-token-0123456789"
    const made = await post(gateway, "/runs/crons", {
      schedule: "0 9 * * *",
      context: { secrets: { ERP_TOKEN: token }, thinking_enabled: false },
      config: { context: { secrets: { ERP_TOKEN: token }, model_name: "scripted" } }
    })
    assert.strictEqual(made.status, 200, JSON.stringify(made.body))
    assert.deepStrictEqual(made.body.payload.context, { thinking_enabled: false })
    assert.deepStrictEqual(made.body.payload.config.context, { model_name: "scripted" })
    const changed = await post(
      gateway,
      `/runs/crons/${made.body.cron_id}`,
      { context: { secrets: { ERP_TOKEN: token } } },
      "PATCH"
    )
    assert.strictEqual(changed.status, 200, JSON.stringify(changed.body))
    assert.deepStrictEqual(changed.body.payload.context, {})
    const found = await post(gateway, "/runs/crons/search", {})
    assert.notInclude(JSON.stringify([made.body, changed.body, found.body]), token)
    for (const body of [{ metadata: { auth_token: token } }, { config: { metadata: { auth_token: token } } }]) {
      const refused = await post(gateway, "/runs/crons", { schedule: "0 9 * * *", ...body })
      assert.strictEqual(refused.status, 422, JSON.stringify(body))
      assert.include(refused.body.detail, "'auth_token' is not allowed")
      const patched = await post(gateway, `/runs/crons/${made.body.cron_id}`, body, "PATCH")
      assert.strictEqual(patched.status, 422, JSON.stringify(body))
    }
    assert.notInclude(JSON.stringify((await post(gateway, "/runs/crons/search", {})).body), token)
  })

  it("a thread's crons are deleted with it", async () => {
    const gateway = await start()
    const alice = clientOf(gateway, ALICE)
    const thread = await alice.threads.create()
    const doomed = await alice.threads.create()
    await alice.crons.createForThread(doomed.thread_id, "lead_agent", { schedule: "0 9 * * *" })
    const kept = await alice.crons.createForThread(thread.thread_id, "lead_agent", { schedule: "0 9 * * *" })
    assert.strictEqual(await alice.crons.count({ threadId: doomed.thread_id }), 1)
    await alice.threads.delete(doomed.thread_id)
    assert.strictEqual(await alice.crons.count({ threadId: doomed.thread_id }), 0)
    const left = await alice.crons.search({ threadId: thread.thread_id })
    assert.deepStrictEqual(left.map((c) => c.cron_id), [kept.cron_id])
  })

  it("outlives a restart of the gateway", async () => {
    const home = Support.tempDir("antler-crons-")
    const first = await start(home)
    const made = await clientOf(first, ALICE).crons.create("lead_agent", {
      schedule: "30 8 * * 1",
      timezone: "Europe/Paris",
      input: said("Weekly summary")
    })
    await first.stop()
    const second = await start(home)
    const found = await clientOf(second, ALICE).crons.search()
    assert.deepStrictEqual<unknown>(found, [made])
    assert.deepStrictEqual(await clientOf(second, BOB).crons.search(), [])
  })
})
