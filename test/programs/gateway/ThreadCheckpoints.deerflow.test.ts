/**
 * DeerFlow's tests of how a thread's checkpoints are kept and read, against `antler serve`. Mirrors
 * test_threads_checkpoint_mode.py (its `full` and `delta` modes must read the same: Antler has one way, each
 * checkpoint its step's updates, so DeerFlow's checkpoint settings are named as not used and change nothing of
 * what a thread reads), test_checkpointer_none_fix.py (a thread with no checkpoint lists an empty history, not an
 * error) and test_checkpoint_state.py (history bounded by its limit, newest first; a state written at an older
 * checkpoint branches there and leaves the caller's later turns in history).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Yaml from "yaml"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const FIXTURE = new URL("../../fixtures/deerflow/config.example.yaml", import.meta.url)

const DELTA = {
  checkpoint_channel_mode: "delta",
  checkpoint_delta: { snapshot_frequency: 2 },
  checkpoint_graph_cache: { accessor_graph_max: 4 }
}

let gateway: TestGateway
const api = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    // (the user's words reach the model inside InputSanitization's markers)
    script: (body) => `Answer to ${/question-\d|after-branch/.exec(Support.lastUserText(body))?.[0]}`,
    config: { database: { backend: "sqlite", ...DELTA } }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const texts = (values: any): ReadonlyArray<string> => Support.visible(values.messages).map((m: any) => m.content)

describe("DeerFlow's checkpoint settings", () => {
  it("are named among the keys not used, in DeerFlow's own config.example.yaml and in delta mode", () => {
    const example = Yaml.parse(Fs.readFileSync(FIXTURE, "utf8"))
    const ignored = ConfigFile.ignoredKeys(example)
    assert.includeMembers([...ignored], ["database.checkpoint_channel_mode", "database.checkpoint_delta"])
    assert.includeMembers([...ConfigFile.ignoredKeys({ database: DELTA })], [
      "database.checkpoint_channel_mode",
      "database.checkpoint_delta",
      "database.checkpoint_graph_cache"
    ])
  })
})

describe("a thread's checkpoints", () => {
  it("none yet: an empty history and an empty state, not an error", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "fresh" })).status, 200)
    const history = await api("POST", "/threads/fresh/history", { limit: 10 })
    assert.deepStrictEqual([history.status, history.json()], [200, []])
    const got = await api("GET", "/threads/fresh/history")
    assert.deepStrictEqual([got.status, got.json()], [200, []])
    const state = await api("GET", "/threads/fresh/state")
    assert.strictEqual(state.status, 200, state.text)
    assert.deepStrictEqual(state.json().values.messages ?? [], [])
  })

  it("three turns: the latest state, history bounded and newest first, a branch at an older one", async () => {
    assert.strictEqual((await api("POST", "/threads", { thread_id: "turns" })).status, 200)
    for (const question of ["question-0", "question-1", "question-2"]) {
      const run = await api("POST", "/threads/turns/runs/wait", { input: Support.userInput(question) })
      assert.strictEqual(run.status, 200, run.text)
    }
    const latest = (await api("GET", "/threads/turns/state")).json()
    assert.deepStrictEqual(texts(latest.values), [
      "question-0", "Answer to question-0", "question-1", "Answer to question-1", "question-2", "Answer to question-2"
    ])
    const history = (await api("POST", "/threads/turns/history", { limit: 2 })).json() as Array<any>
    assert.strictEqual(history.length, 2)
    assert.deepStrictEqual(texts(history[0].values), texts(latest.values))
    assert.strictEqual(history[1].checkpoint.checkpoint_id, history[0].parent_checkpoint.checkpoint_id)

    // the state after the first turn, written on: a branch there (the regenerate flow)
    const all = (await api("POST", "/threads/turns/history", { limit: 100 })).json() as Array<any>
    const afterFirst = all.find((h) => texts(h.values).join("|") === "question-0|Answer to question-0")
    assert.isDefined(afterFirst)
    const branched = await api("POST", "/threads/turns/state", {
      checkpoint_id: afterFirst.checkpoint.checkpoint_id,
      values: { messages: [{ type: "human", content: "retry", id: "h-retry" }] }
    })
    assert.strictEqual(branched.status, 200, branched.text)
    const head = (await api("GET", "/threads/turns/state")).json()
    assert.deepStrictEqual(texts(head.values), ["question-0", "Answer to question-0", "retry"])
    // the turns after the branch point stay in history, at their checkpoints
    const after = (await api("POST", "/threads/turns/history", { limit: 100 })).json() as Array<any>
    assert.isTrue(after.some((h) => texts(h.values).at(-1) === "Answer to question-2"))

    // and the thread goes on from the branch
    const next = await api("POST", "/threads/turns/runs/wait", { input: Support.userInput("after-branch") })
    assert.strictEqual(next.status, 200, next.text)
    assert.deepStrictEqual(texts(next.json()), [
      "question-0", "Answer to question-0", "retry", "after-branch", "Answer to after-branch"
    ])
  })
})
