/**
 * Attacks on the gateway's newest surfaces by a hostile client, each found to work once: a made-up key of a
 * megabyte (a state update's field, a store search's filter field) echoed whole in the 422 that refused it. The
 * model is SCRIPTED; the client speaks HTTP as a hostile one would.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Problem from "../../../src/programs/gateway/api/Problem.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const api = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Done." })
})
afterAll(() => gateway?.stop())

describe("a refusal of a request with a huge key", () => {
  it("names the place without echoing the key whole: the 422 stays small", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "keyed" })).status, 200)
    const key = "K".repeat(1_000_000)
    const refusals = [
      await api("POST", "/threads/keyed/state", { values: { [key]: 1 } }),
      await api("POST", "/store/items/search", { namespace_prefix: [], filter: { [key]: { $gt: 1 } } })
    ]
    for (const refused of refusals) {
      assert.strictEqual(refused.status, 422, refused.text.slice(0, 300))
      assert.include(refused.json().detail, "KKKK")
      assert.isBelow(refused.text.length, 5 * (2 * Problem.MAX_ISSUE_CHARS + 100))
    }
    assert.include(refusals[0]!.json().detail, "is unexpected")
    assert.include(refusals[1]!.json().detail, "filter operators")
  })
})
