/**
 * `gateway.max_active_runs`: past that many runs executing at once, a run is accepted and waits `pending` (its
 * stream open) until one ends, as LangGraph's server does past `N_JOBS_PER_WORKER`. A waiting run cancelled
 * never reaches the model; without the setting there is no limit. On Effect's TestClock: a run waits as long as
 * its place is taken (its lease meanwhile is its renewer's: RunLease.test.ts); places go first come, first served
 * (one arriving as a place frees does not take it from those waiting), never more at once than the limit. With
 * `gateway.max_active_runs_per_user`, a user past it waits in a line of their own while another user runs.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as Admission from "../../../src/programs/gateway/Admission.js"
import * as Run from "../../../src/programs/Run.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "alice-token-admission-00000"

let gateway: TestGateway

const api = Requests.as(() => gateway, TOKEN)

const lastText = (body: any) => JSON.stringify(body.messages[body.messages.length - 1]?.content ?? "")
const question = (text: string) => ({ input: { messages: [{ type: "human", content: text }] } })
/** The index of the first model request whose last message holds `text` (-1: none). */
const asked = (text: string) => gateway.scripted.requests.findIndex((r) => lastText(r).includes(text))

beforeAll(async () => {
  gateway = await Support.start({
    // a long answer streamed slowly: the first run is still running when the next arrives
    script: (body) => lastText(body).includes("slow") ? `${"word ".repeat(60)}done` : "Quick answer.",
    server: { delayMs: 15 },
    config: {
      gateway: { heartbeat_seconds: 1, max_active_runs: 1, auth: { tokens: [{ token: TOKEN, user: "alice" }] } }
    }
  })
})
afterAll(() => gateway?.stop())

const thread = async (id: string) => assert.strictEqual((await api("POST", "/threads", { thread_id: id })).status, 200)

describe("gateway.max_active_runs", () => {
  it("a run past the limit waits pending, its stream open, and runs once the active run ended", async () => {
    await thread("first")
    await thread("second")
    const first = (await api("POST", "/threads/first/runs", question("slow one"))).json()
    const response = await fetch(`${gateway.url}/threads/second/runs/stream`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ ...question("waiting two"), stream_mode: ["values", "messages-tuple"] })
    })
    assert.strictEqual(response.status, 200)
    const runId = /runs\/([^/?]+)/.exec(response.headers.get("content-location") ?? "")?.[1]
    assert.isDefined(runId)
    // while the first run streams (about a second), the second stays pending, its question kept from the model
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.strictEqual((await api("GET", `/threads/first/runs/${first.run_id}`)).json().status, "running")
    const waiting = (await api("GET", `/threads/second/runs/${runId}`)).json()
    assert.strictEqual(waiting.status, "pending")
    assert.strictEqual(asked("waiting two"), -1)
    const { events } = await Support.readSse(response)
    assert.strictEqual(events.at(-1)!.event, "end")
    const values = events.filter((e) => e.event === "values").at(-1)!.data as any
    assert.strictEqual(Support.visible(values.messages).at(-1).content, "Quick answer.")
    assert.strictEqual((await api("GET", `/threads/first/runs/${first.run_id}`)).json().status, "success")
    assert.isAbove(asked("waiting two"), -1)
    assert.strictEqual((await api("GET", `/threads/second/runs/${runId}`)).json().status, "success")
  })

  it("a waiting run cancelled never reaches the model, and its thread stays as it was", async () => {
    await thread("busy")
    await thread("dropped")
    const busy = (await api("POST", "/threads/busy/runs", question("slow again"))).json()
    const waiting = (await api("POST", "/threads/dropped/runs", question("never asked"))).json()
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.strictEqual((await api("GET", `/threads/dropped/runs/${waiting.run_id}`)).json().status, "pending")
    const cancel = await api("POST", `/threads/dropped/runs/${waiting.run_id}/cancel?wait=1`)
    assert.strictEqual(cancel.status, 204, cancel.text)
    assert.strictEqual((await api("GET", `/threads/dropped/runs/${waiting.run_id}`)).json().status, "interrupted")
    // its stream, joined now, ends at once
    const joined = await fetch(`${gateway.url}/threads/dropped/runs/${waiting.run_id}/stream`, {
      headers: { authorization: `Bearer ${TOKEN}` }
    })
    assert.strictEqual((await Support.readSse(joined)).events.at(-1)!.event, "end")
    assert.strictEqual((await api("GET", `/threads/busy/runs/${busy.run_id}/join`)).status, 200)
    assert.strictEqual(asked("never asked"), -1)
    const state = (await api("GET", "/threads/dropped/state")).json()
    assert.notInclude(JSON.stringify(state.values?.messages ?? []), "never asked")
    // the place it waited for went to nobody: a new run starts at once
    const next = (await api("POST", "/threads/dropped/runs/wait", question("after that"))).json()
    assert.strictEqual(Support.visible(next.messages).at(-1).content, "Quick answer.")
  })

  it("refuses a limit that is not a positive whole number, saying where", async () => {
    const refused = await Support.start({
      script: () => "unused",
      config: { gateway: { max_active_runs: 0 } }
    }).then(
      async (started) => {
        await started.stop()
        return undefined
      },
      (error: unknown) => String(error)
    )
    assert.isDefined(refused)
    assert.include(refused, "max_active_runs")
  })
})

describe("a run waiting for its place, on the TestClock", () => {
  it.effect("waits while its place is taken, for as long as that lasts, and runs when the place frees", () =>
    Effect.gen(function*() {
      const admit = yield* Admission.make(1)
      const release = yield* Deferred.make<void>()
      const first = yield* Effect.fork(admit("t1", "r1", "alice")(Deferred.await(release)))
      yield* Effect.yieldNow()
      let ran = false
      const second = yield* Effect.fork(admit("t2", "r2", "alice")(Effect.sync(() => (ran = true))))
      // (its thread's lease is held meanwhile by the run's renewer: see RunLease.test.ts)
      yield* TestClock.adjust(Run.LEASE_TTL_MS * 3)
      assert.isFalse(ran, "it waits while the place is taken")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.isTrue(ran)
    }))

  it.effect("without a limit, a turn is run as it is, with no place to wait for", () =>
    Effect.gen(function*() {
      const admit = yield* Admission.make(undefined)
      const turn = Effect.succeed("ran")
      assert.strictEqual(admit("t", "r", "alice")(turn), turn)
    }))

  /** Lets the forked fibers run until they wait. */
  const settle = Effect.repeatN(Effect.yieldNow(), 20)

  it.effect("places go in the order the runs asked; one arriving as a place frees waits behind them", () =>
    Effect.gen(function*() {
      const admit = yield* Admission.make(1)
      const release = yield* Deferred.make<void>()
      const order: Array<string> = []
      const turn = (name: string) => admit(name, `run-${name}`, "alice")(Effect.sync(() => order.push(name)))
      const holder = yield* Effect.fork(admit("h", "run-h", "alice")(Deferred.await(release)))
      yield* settle
      const waiting: Array<Fiber.RuntimeFiber<number>> = []
      for (const name of ["a", "b", "c"]) {
        waiting.push(yield* Effect.fork(turn(name)))
        yield* settle
      }
      yield* Deferred.succeed(release, undefined)
      const late = yield* Effect.fork(turn("late"))
      yield* Fiber.join(holder)
      for (const fiber of [...waiting, late]) yield* Fiber.join(fiber)
      assert.deepStrictEqual(order, ["a", "b", "c", "late"])
    }))

  it.effect("a run cancelled in line leaves it: the next one gets the place, and the limit stays what it was", () =>
    Effect.gen(function*() {
      const admit = yield* Admission.make(1)
      const release = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const holder = yield* Effect.fork(admit("h", "run-h", "alice")(Deferred.await(release)))
      yield* settle
      const dropped = yield* Effect.fork(admit("d", "run-d", "alice")(Effect.sync(() => ran.push("dropped"))))
      yield* settle
      const next = yield* Effect.fork(admit("n", "run-n", "alice")(Effect.sync(() => ran.push("next"))))
      yield* settle
      yield* Fiber.interrupt(dropped)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(next)
      assert.deepStrictEqual(ran, ["next"])
      // one place still, neither lost nor doubled: of two turns, the second waits for the first
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(admit("x", "run-x", "alice")(Deferred.await(gate)))
      yield* settle
      const second = yield* Effect.fork(admit("y", "run-y", "alice")(Effect.sync(() => ran.push("second"))))
      yield* settle
      assert.deepStrictEqual(ran, ["next"])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.deepStrictEqual(ran, ["next", "second"])
    }))

  it.effect.prop(
    "never more turns at once than the limit; every turn not cancelled runs, in the order it asked",
    [
      FC.integer({ min: 1, max: 4 }),
      FC.array(FC.record({ ms: FC.integer({ min: 0, max: 50 }), cancelAfterMs: FC.option(FC.integer({ min: 0, max: 80 })) }), {
        minLength: 1,
        maxLength: 12
      })
    ],
    ([limit, turns]) =>
      Effect.gen(function*() {
        const admit = yield* Admission.make(limit)
        let running = 0
        let most = 0
        const started: Array<number> = []
        const fibers: Array<Fiber.RuntimeFiber<void>> = []
        for (const [i, t] of turns.entries()) {
          const body = Effect.sync(() => {
            started.push(i)
            most = Math.max(most, ++running)
          }).pipe(Effect.zipRight(Effect.sleep(t.ms)), Effect.ensuring(Effect.sync(() => running--)))
          fibers.push(yield* Effect.fork(admit(`t${i}`, `r${i}`, "alice")(body)))
          yield* settle
        }
        const cancelled = new Set<number>()
        yield* Effect.forEach(turns, (t, i) =>
          t.cancelAfterMs === null ? Effect.void : Effect.fork(Effect.delay(
            Effect.suspend(() => {
              // cancelled before it started: it must never start
              if (!started.includes(i)) cancelled.add(i)
              return Fiber.interrupt(fibers[i]!)
            }),
            t.cancelAfterMs
          )))
        yield* TestClock.adjust(turns.length * 60 + 100)
        for (const fiber of fibers) yield* Fiber.await(fiber)
        assert.isAtMost(most, limit)
        assert.strictEqual(running, 0)
        const expected = turns.map((_, i) => i).filter((i) => !cancelled.has(i))
        assert.deepStrictEqual(started.filter((i) => !cancelled.has(i)), expected)
        for (const i of cancelled) assert.notInclude(started, i)
      }),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect.prop(
    "max_active_runs_per_user: never more of one user's turns at once than it, nor more in all than the process's; " +
      "every turn runs, each user's in the order asked",
    [
      FC.integer({ min: 1, max: 3 }),
      FC.option(FC.integer({ min: 1, max: 4 }), { nil: undefined }),
      FC.array(FC.record({ user: FC.constantFrom("alice", "bob", "carol"), ms: FC.integer({ min: 0, max: 40 }) }), {
        minLength: 1,
        maxLength: 14
      })
    ],
    ([perUser, limit, turns]) =>
      Effect.gen(function*() {
        const admit = yield* Admission.make(limit, perUser)
        const running = new Map<string, number>()
        let all = 0
        let most = 0
        let mostOfOne = 0
        const started: Array<number> = []
        const fibers = yield* Effect.forEach(turns, (t, i) => {
          const body = Effect.sync(() => {
            started.push(i)
            const mine = (running.get(t.user) ?? 0) + 1
            running.set(t.user, mine)
            mostOfOne = Math.max(mostOfOne, mine)
            most = Math.max(most, ++all)
          }).pipe(
            Effect.zipRight(Effect.sleep(t.ms)),
            Effect.ensuring(Effect.sync(() => (all--, running.set(t.user, running.get(t.user)! - 1))))
          )
          return Effect.zipLeft(Effect.fork(admit(`t${i}`, `r${i}`, t.user)(body)), settle)
        })
        yield* TestClock.adjust(turns.length * 50 + 100)
        for (const fiber of fibers) yield* Fiber.join(fiber)
        assert.isAtMost(mostOfOne, perUser)
        if (limit !== undefined) assert.isAtMost(most, limit)
        assert.strictEqual(all, 0)
        assert.deepStrictEqual([...started].sort((a, b) => a - b), turns.map((_, i) => i))
        for (const user of ["alice", "bob", "carol"]) {
          const mine = turns.flatMap((t, i) => (t.user === user ? [i] : []))
          assert.deepStrictEqual(started.filter((i) => turns[i]!.user === user), mine)
        }
      }),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect("a user past max_active_runs_per_user waits in a line of their own: another user's run goes first", () =>
    Effect.gen(function*() {
      const admit = yield* Admission.make(2, 1)
      const release = yield* Deferred.make<void>()
      const order: Array<string> = []
      const holder = yield* Effect.fork(admit("a1", "run-a1", "alice")(Deferred.await(release)))
      yield* settle
      // alice's second run waits for her own place and takes none of the process's two
      const second = yield* Effect.fork(admit("a2", "run-a2", "alice")(Effect.sync(() => order.push("alice"))))
      yield* settle
      const bob = yield* Effect.fork(admit("b1", "run-b1", "bob")(Effect.sync(() => order.push("bob"))))
      yield* settle
      assert.deepStrictEqual(order, ["bob"])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(second)
      yield* Fiber.join(bob)
      assert.deepStrictEqual(order, ["bob", "alice"])
    }))
})

describe("gateway.max_active_runs_per_user, through the gateway", () => {
  const ALICE = "alice-token-per-user-000000"
  const BOB = "bob-token-per-user-00000000"
  let shared: TestGateway
  const alice = Requests.as(() => shared, ALICE)
  const bob = Requests.as(() => shared, BOB)
  const askedOf = (text: string) => shared.scripted.requests.findIndex((r) => lastText(r).includes(text))

  beforeAll(async () => {
    shared = await Support.start({
      // a long answer streamed slowly: alice's first run is still running when the others arrive
      script: (body) => lastText(body).includes("slow") ? `${"word ".repeat(60)}done` : "Quick answer.",
      server: { delayMs: 15 },
      config: {
        gateway: {
          heartbeat_seconds: 1,
          max_active_runs_per_user: 1,
          auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
        }
      }
    })
  })
  afterAll(() => shared?.stop())

  it("a user's run past the limit waits pending; another user's run does not wait behind it", async () => {
    for (const [api, id] of [[alice, "a1"], [alice, "a2"], [bob, "b1"]] as const) {
      assert.strictEqual((await api("POST", "/threads", { thread_id: id })).status, 200)
    }
    const first = (await alice("POST", "/threads/a1/runs", question("slow one"))).json()
    const second = (await alice("POST", "/threads/a2/runs", question("alice waits"))).json()
    // bob's run completes while alice's first still streams and her second still waits
    const bobs = (await bob("POST", "/threads/b1/runs/wait", question("bob goes"))).json()
    assert.strictEqual(Support.visible(bobs.messages).at(-1).content, "Quick answer.")
    assert.strictEqual((await alice("GET", `/threads/a1/runs/${first.run_id}`)).json().status, "running")
    assert.strictEqual((await alice("GET", `/threads/a2/runs/${second.run_id}`)).json().status, "pending")
    assert.strictEqual(askedOf("alice waits"), -1)
    // once her first run ends, her second runs
    assert.strictEqual((await alice("GET", `/threads/a2/runs/${second.run_id}/join`)).status, 200)
    assert.strictEqual((await alice("GET", `/threads/a1/runs/${first.run_id}`)).json().status, "success")
    assert.isAbove(askedOf("alice waits"), askedOf("bob goes"))
  })

  it("the gateway's own model calls for a user (follow-up questions) wait in that user's line, not another's", async () => {
    for (const [api, id] of [[alice, "s-a"], [bob, "s-b"]] as const) {
      assert.strictEqual((await api("POST", "/threads", { thread_id: id })).status, 200)
    }
    const suggest = (api: typeof alice, id: string, context: string) =>
      api("POST", `/api/threads/${id}/suggestions`, {
        messages: [{ role: "user", content: context }, { role: "assistant", content: "Noted." }],
        n: 2
      })
    const seen = () => shared.scripted.requests.filter((r) => lastText(r).includes("slow-context")).length
    // three of alice's at once, each answered slowly
    const alices = [1, 2, 3].map((i) => suggest(alice, "s-a", `slow-context ${i}`))
    while (seen() === 0) await new Promise((resolve) => setTimeout(resolve, 10))
    // bob's is answered while alice's first still streams: her other two have not reached the model
    assert.strictEqual((await suggest(bob, "s-b", "bob context")).status, 200)
    assert.strictEqual(seen(), 1)
    for (const answer of await Promise.all(alices)) assert.strictEqual(answer.status, 200)
    assert.strictEqual(seen(), 3)
  })
})
