/**
 * Attacks on the gateway by another token user and a hostile client, each found to work once: a user filling the
 * disk every user shares with custom agents (no bound on how many), and a `Last-Event-ID` that is no event id
 * (`0x10`, `1e3`) read as one. The model is SCRIPTED; the clients speak HTTP as a hostile one would.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CustomAgents from "../../../src/programs/CustomAgents.js"
import * as ThreadStream from "../../../src/programs/gateway/ThreadStream.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB } = Support

let gateway: TestGateway

beforeAll(async () => {
  ;({ gateway } = await Support.startTwoUsers(Support.echoOrHang))
})
afterAll(() => gateway?.stop())

const call = (token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })

const detail = async (response: Response) => ((await response.json()) as { detail: string }).detail

describe("custom agents of one user", () => {
  it(`are at most ${CustomAgents.MAX_AGENTS_PER_USER}: the next is a 409 naming the bound`, async () => {
    const soul = "s".repeat(CustomAgents.MAX_SOUL_BYTES - 16)
    for (let i = 0; i < CustomAgents.MAX_AGENTS_PER_USER; i++) {
      const made = await call(BOB, "POST", "/api/agents", { name: `filler-${i}`, soul })
      assert.strictEqual(made.status, 201, `agent ${i}: ${await made.text()}`)
    }
    const refused = await call(BOB, "POST", "/api/agents", { name: "one-too-many", soul })
    assert.strictEqual(refused.status, 409)
    assert.strictEqual(
      await detail(refused),
      `The agent one-too-many was not created: a user has at most ${CustomAgents.MAX_AGENTS_PER_USER} agents; ` +
        "delete one first."
    )
    const bobs = Path.join(gateway.home, "users", "bob", "agents")
    assert.isFalse(Fs.existsSync(Path.join(bobs, "one-too-many")))
    assert.strictEqual(Fs.readdirSync(bobs).length, CustomAgents.MAX_AGENTS_PER_USER)
    // an agent he has is still changed; alice's bound is hers
    assert.strictEqual((await call(BOB, "PUT", "/api/agents/filler-0", { description: "changed" })).status, 200)
    assert.strictEqual((await call(ALICE, "POST", "/api/agents", { name: "mine", soul: "hers" })).status, 201)
    // one deleted makes room for one
    assert.strictEqual((await call(BOB, "DELETE", "/api/agents/filler-1")).status, 204)
    assert.strictEqual((await call(BOB, "POST", "/api/agents", { name: "one-too-many", soul })).status, 201)
    assert.strictEqual((await call(BOB, "POST", "/api/agents", { name: "two-too-many", soul })).status, 409)
  }, 120_000)
})

describe("a Last-Event-ID that is no event id", () => {
  const NOT_IDS = ["0x10", "1e3", "0b1", "1.0", "+1", "99999999999999999999", "-5"]

  it("joining a run is a 400 naming the header, for each spelling Number would read", async () => {
    const thread = (await (await call(ALICE, "POST", "/threads", {})).json()) as { thread_id: string }
    const run = (await (await call(ALICE, "POST", `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("hello")
    })).json()) as unknown
    assert.isDefined(run)
    const runs = (await (await call(ALICE, "GET", `/threads/${thread.thread_id}/runs`)).json()) as Array<any>
    const path = `/threads/${thread.thread_id}/runs/${runs[0].run_id}/stream`
    for (const id of NOT_IDS) {
      const answer = await call(ALICE, "GET", path, undefined, { "last-event-id": id })
      assert.strictEqual(answer.status, 400, id)
      assert.strictEqual(
        await detail(answer),
        `Last-Event-ID must be an event id of this run, got ${JSON.stringify(id)}.`
      )
    }
    // an id, and the SDK's -1, still rejoin
    for (const id of ["1", "-1", "007"]) {
      const answer = await call(ALICE, "GET", path, undefined, { "last-event-id": id })
      assert.strictEqual(answer.status, 200, id)
      await answer.body?.cancel()
    }
  })

  it("the thread stream's cursor (run:id) reads digits only", () => {
    for (const id of NOT_IDS) assert.isUndefined(ThreadStream.parseCursor(`run-1:${id}`), id)
    assert.deepStrictEqual(ThreadStream.parseCursor("run-1:16"), { _tag: "after", runId: "run-1", id: 16 })
  })
})
