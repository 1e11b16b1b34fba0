/**
 * Every model call `antler serve` makes for a user is on a model that user's role may use (`authorization.enabled`).
 * Before, the gateway's own calls that named no model (follow-up questions, a draft polished, a manual compaction),
 * the goal evaluator (the run's raw `model_name`), and a run's internal calls on a model the configuration names
 * (`title.model_name`, `summarization.model_name`, `memory.model_name`) ran on that model or on the default, though
 * the role may not use it. Here the default model is `deep` (A), which a `guest` may not use: it may use `scripted`
 * (B) only, and a `mute` user's role may use no model at all.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { isEvaluator, verdict } from "../../support/goalScript.js"
import { messageText } from "../../support/modelRequests.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { rbac } from "../../support/rbac.js"

const GUEST = "guest-token-modelrole-000000"
const MUTE = "mute-token-modelrole-0000000"
const SLOW = 60_000
const NO_MODEL = "No models are authorized for the current role."

const A = "model-deep"
const B = "model-scripted"

const systemOf = (body: ChatRequestBody) => messageText(body.messages.find((m) => m.role === "system") ?? {})
const firstText = (body: ChatRequestBody) => messageText(body.messages[0] ?? {})
const lastUser = (body: ChatRequestBody) => Support.lastUserText(body)

const isSuggestions = (body: ChatRequestBody) => systemOf(body).includes("follow-up questions")
const isPolish = (body: ChatRequestBody) => systemOf(body).includes("prompt optimizer")
const isSummary = (body: ChatRequestBody) => lastUser(body).includes("You are compacting the history")
const isTitle = (body: ChatRequestBody) => firstText(body).startsWith("Generate a concise title")
const isMemory = (body: ChatRequestBody) => firstText(body).startsWith("You maintain the long-term memory")

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      if (isEvaluator(body)) return verdict(true)
      if (isSuggestions(body)) return JSON.stringify(["What next?"])
      if (isPolish(body)) return "A clearer draft."
      if (isSummary(body)) return "## Session intent\nSUMMARY-MODELROLE"
      if (isMemory(body)) return JSON.stringify({ newFacts: [] })
      if (isTitle(body)) return "A Model Title"
      return "Answered."
    },
    config: (url: string) => ({
      // (the first, the default, is the one the guest may not use)
      models: [Support.scriptedModel("deep", url), Support.scriptedModel("scripted", url)],
      title: { model_name: "deep" },
      input_polish: { model_name: "deep" },
      summarization: {
        enabled: true,
        model_name: "deep",
        trigger: { type: "messages", value: 5 },
        keep: { type: "messages", value: 2 }
      },
      memory: { enabled: true, model_name: "deep", backend_config: { debounce_seconds: 0 } },
      gateway: {
        auth: {
          tokens: [
            { token: Support.ALICE, user: "alice" },
            { token: GUEST, user: "gus", role: "guest" },
            { token: MUTE, user: "mo", role: "mute" }
          ]
        }
      },
      authorization: rbac({
        user: {},
        guest: { models: { allow: ["scripted"] } },
        mute: { models: { allow: false } }
      })
    })
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const alice = Requests.as(() => gateway, Support.ALICE)
const guest = Requests.as(() => gateway, GUEST)
const mute = Requests.as(() => gateway, MUTE)

const conversation = [{ role: "user", content: "Where is the tower?" }, { role: "assistant", content: "In Paris." }]

/** The model requests made since `mark` that `which` tells apart. */
const since = (mark: number, which: (body: ChatRequestBody) => boolean) =>
  gateway.scripted.requests.slice(mark).filter(which)

/** A thread of the caller's with one run of `text`, joined. */
const threadWithRun = async (as: typeof guest, text: string, context: Record<string, unknown> = {}) => {
  const thread = (await as("POST", "/threads", {})).json().thread_id as string
  const ran = await as("POST", `/threads/${thread}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context
  })
  assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
  return thread
}

describe("the gateway's own model calls, naming no model", () => {
  it("follow-up questions: on the model the role may use (B), never the default it may not (A)", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const mark = gateway.scripted.requests.length
    const asked = await guest("POST", `/api/threads/${thread}/suggestions`, { messages: conversation })
    assert.strictEqual(asked.status, 200, asked.text)
    assert.deepStrictEqual(asked.json().suggestions, ["What next?"])
    const calls = since(mark, isSuggestions)
    assert.strictEqual(calls.length, 1)
    assert.strictEqual(calls[0]!.model, B)
    // a role with no model policy: the default, as before
    const own = (await alice("POST", "/threads", {})).json().thread_id as string
    const hers = gateway.scripted.requests.length
    assert.strictEqual((await alice("POST", `/api/threads/${own}/suggestions`, { messages: conversation })).status, 200)
    assert.deepStrictEqual(since(hers, isSuggestions).map((r) => r.model), [A])
  }, SLOW)

  it("a draft polished: `input_polish.model_name` the role may not use is passed over for one it may", async () => {
    const mark = gateway.scripted.requests.length
    const polished = await guest("POST", "/api/input-polish", { text: "write about towers" })
    assert.strictEqual(polished.status, 200, polished.text)
    assert.strictEqual(polished.json().rewritten_text, "A clearer draft.")
    assert.deepStrictEqual(since(mark, isPolish).map((r) => r.model), [B])
    const hers = gateway.scripted.requests.length
    assert.strictEqual((await alice("POST", "/api/input-polish", { text: "write about towers" })).status, 200)
    assert.deepStrictEqual(since(hers, isPolish).map((r) => r.model), [A])
  }, SLOW)

  it("a compaction: the summary on B, never on the default or `summarization.model_name` (A)", async () => {
    const thread = await threadWithRun(guest, "first question")
    const second = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("second question")
    })
    assert.strictEqual(second.status, 200, second.text.slice(0, 300))
    const mark = gateway.scripted.requests.length
    const compacted = await guest("POST", `/api/threads/${thread}/compact`, { force: true })
    assert.strictEqual(compacted.status, 200, compacted.text)
    assert.isTrue(compacted.json().compacted)
    const summaries = since(mark, isSummary)
    assert.isAbove(summaries.length, 0)
    for (const request of summaries) assert.strictEqual(request.model, B)
    // (memory's flush of the summarised messages: not on A either)
    const memory = await eventually(async () => {
      const found = since(mark, isMemory)
      return found.length > 0 ? found : undefined
    }, "the memory update of the compaction", { tries: 200, everyMs: 25 })
    for (const request of memory) assert.strictEqual(request.model, B)
    assert.isFalse(gateway.scripted.requests.slice(mark).some((r) => r.model === A))
  }, SLOW)

  it("a role that may use no model: each is refused (403) with the runs' refusal, and no model is asked", async () => {
    const thread = (await mute("POST", "/threads", {})).json().thread_id as string
    const mark = gateway.scripted.requests.length
    const asked = await mute("POST", `/api/threads/${thread}/suggestions`, { messages: conversation })
    assert.strictEqual(asked.status, 403, asked.text)
    assert.strictEqual(asked.json().detail, NO_MODEL)
    const polished = await mute("POST", "/api/input-polish", { text: "write about towers" })
    assert.strictEqual(polished.status, 403, polished.text)
    assert.strictEqual(polished.json().detail, NO_MODEL)
    const compacted = await mute("POST", `/api/threads/${thread}/compact`, { force: true })
    assert.strictEqual(compacted.status, 403, compacted.text)
    assert.strictEqual(compacted.json().detail, NO_MODEL)
    // (the earlier cases' runs may still update memory or a title in the background: those are not the mute user's)
    const background = (r: ChatRequestBody) => (isMemory(r) || isTitle(r)) && !JSON.stringify(r).includes("tower")
    assert.deepStrictEqual(since(mark, (r) => !background(r)), [])
  }, SLOW)
})

describe("a run's internal model calls", () => {
  it("a guest's title and memory update never use the model the configuration names for them (A)", async () => {
    const mark = gateway.scripted.requests.length
    const thread = await threadWithRun(guest, "TITLE-MARK tell me about towers")
    // `title.model_name` the role may not use: the local title, no title call
    assert.lengthOf(since(mark, isTitle), 0)
    const state = (await guest("GET", `/threads/${thread}/state`)).json()
    assert.include(state.values.title, "TITLE-MARK")
    // the memory update of the run: on the run's model (B), not `memory.model_name`
    const memory = await eventually(async () => {
      const found = since(mark, isMemory)
      return found.length > 0 ? found : undefined
    }, "the memory update of the run", { tries: 200, everyMs: 25 })
    for (const request of memory) assert.strictEqual(request.model, B)
    assert.isFalse(gateway.scripted.requests.slice(mark).some((r) => r.model === A))
    // alice's role may use A: her title is asked of it (what the guest's would have been)
    const hers = gateway.scripted.requests.length
    await threadWithRun(alice, "TITLE-MARK tell me about towers")
    assert.deepStrictEqual(since(hers, isTitle).map((r) => r.model), [A])
    // (her memory update, on A, is let through before the next test counts requests on A)
    await eventually(async () => since(hers, isMemory).length > 0 ? true : undefined, "alice's memory update", {
      tries: 200,
      everyMs: 25
    })
  }, SLOW)

  it("a summary a guest's run makes when its trigger fires is asked of B, not `summarization.model_name`", async () => {
    const thread = await threadWithRun(guest, "one")
    const mark = gateway.scripted.requests.length
    for (const text of ["two", "three"]) {
      const ran = await guest("POST", `/threads/${thread}/runs/wait`, {
        assistant_id: "lead_agent",
        input: Support.userInput(text)
      })
      assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
    }
    // (the third run's request holds five messages: the trigger fired)
    const summaries = since(mark, isSummary)
    assert.isAbove(summaries.length, 0)
    for (const request of summaries) assert.strictEqual(request.model, B)
    // (none of the guest's on A; a late background call of alice's, about her towers, may land here: it is hers)
    const onA = gateway.scripted.requests.slice(mark).filter((r) => r.model === A)
    assert.deepStrictEqual(onA.filter((r) => !JSON.stringify(r.messages).includes("tell me about towers")), [])
  }, SLOW)

  it("the goal evaluator of a guest's run that names A is asked on B", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const put = await guest("PUT", `/api/threads/${thread}/goal`, { objective: "Describe the tower" })
    assert.strictEqual(put.status, 200, put.text)
    const mark = gateway.scripted.requests.length
    const ran = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("describe it"),
      context: { model_name: "deep" }
    })
    assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
    const judged = since(mark, isEvaluator)
    assert.strictEqual(judged.length, 1)
    assert.strictEqual(judged[0]!.model, B)
    assert.isFalse(gateway.scripted.requests.slice(mark).some((r) => r.model === A))
  }, SLOW)
})
