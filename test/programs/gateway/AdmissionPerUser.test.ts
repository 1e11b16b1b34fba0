/**
 * `gateway.max_active_runs_per_user`: past that many of one user's runs executing at once, the user's next run is
 * accepted and waits `pending` in a line of the user's own, while another user's run starts at once (one user's
 * hanging runs never hold the others' places). The model is SCRIPTED (a loopback server, the real `openai` client).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-per-user-000000"
const BOB = "bob-token-per-user-00000000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const lastText = (body: any) => JSON.stringify(body.messages[body.messages.length - 1]?.content ?? "")
const question = (text: string) => ({ input: { messages: [{ type: "human", content: text }] } })
const asked = (text: string) => gateway.scripted.requests.findIndex((r) => lastText(r).includes(text))

beforeAll(async () => {
  gateway = await Support.start({
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
afterAll(() => gateway?.stop())

describe("gateway.max_active_runs_per_user", () => {
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
    assert.strictEqual(asked("alice waits"), -1)
    // once her first run ends, her second runs
    assert.strictEqual((await alice("GET", `/threads/a2/runs/${second.run_id}/join`)).status, 200)
    assert.strictEqual((await alice("GET", `/threads/a1/runs/${first.run_id}`)).json().status, "success")
    assert.isAbove(asked("alice waits"), asked("bob goes"))
  })
})
