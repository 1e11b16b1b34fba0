/**
 * Mirrors DeerFlow's test_memory_updater_user_isolation.py, test_memory_storage_user_isolation.py and the scope of
 * test_memory_search.py: each user's memory is their own file (`users/{user}/memory.json`), and what one user
 * does to memory never reaches another's: clearing or importing memory through the settings API, and the memory
 * tools their agent calls in tool mode (`memory_search` finds only the user's facts, `memory_add` writes only the
 * user's file). Real HTTP through the gateway; the SCRIPTED model is reached with the real `openai` client.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { messageText } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB } = Support

/** What the user typed (InputSanitization marks where it begins and ends). */
const said = (body: ChatRequestBody): string =>
  Support.lastUserText(body).replace(/^--- BEGIN USER INPUT ---\n/, "").replace(/\n--- END USER INPUT ---$/, "")

/** The model: `search X` calls memory_search, `remember X` memory_add; a tool's answer is repeated. */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") return `tool said: ${messageText(last)}`
  const text = said(body)
  const search = /^search (.+)$/.exec(text)
  if (search !== null) return { toolCalls: [{ name: "memory_search", arguments: { query: search[1] } }] }
  const remember = /^remember (.+)$/.exec(text)
  if (remember !== null) {
    return { toolCalls: [{ name: "memory_add", arguments: { content: remember[1], category: "preference" } }] }
  }
  return "ok"
}

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: {
      gateway: Support.twoUsers,
      memory: {
        enabled: true,
        mode: "tool",
        backend_config: { debounce_seconds: 3600 },
        shutdown_flush_timeout_seconds: 0.1
      }
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const call = Requests.api(() => gateway)
const doc = Requests.ok
const fileOf = (user: string) => Path.join(gateway.home, "users", user, "memory.json")
const contents = (memory: any): ReadonlyArray<string> => memory.facts.map((f: any) => f.content)

/** The tool result the model was given after the run that sent `prompt` (the answer repeats it). */
const runAs = async (token: string, prompt: string): Promise<string> => {
  const response = await fetch(`${gateway.url}/runs/wait`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "lead-agent", input: Support.userInput(prompt) })
  })
  assert.strictEqual(response.status, 200, await response.clone().text())
  const answered = gateway.scripted.requests.filter((r) => said(r) === prompt).at(-1)!
  return messageText(answered.messages.at(-1)!)
}

describe("one user's memory is theirs (DeerFlow's per-user memory storage)", () => {
  // test_memory_updater_user_isolation.py::test_clear_memory_data_passes_user_id / test_save_memory_passes_user_id
  it("bob clearing or importing memory changes only his; alice's file and facts stay", async () => {
    await doc(await call(ALICE, "/memory/facts", { method: "POST", body: { content: "Alice drinks green tea" } }))
    await doc(await call(BOB, "/memory/facts", { method: "POST", body: { content: "Bob drinks coffee" } }))
    const aliceFile = Fs.readFileSync(fileOf("alice"), "utf8")
    assert.include(aliceFile, "Alice drinks green tea")
    assert.notInclude(Fs.readFileSync(fileOf("bob"), "utf8"), "Alice")

    const cleared = await doc(await call(BOB, "/memory", { method: "DELETE" }))
    assert.deepStrictEqual(cleared.facts, [])
    assert.deepStrictEqual(contents(await doc(await call(ALICE, "/memory"))), ["Alice drinks green tea"])

    const imported = { ...cleared, facts: [{ id: "fact_bob1", content: "Bob imported this", confidence: 0.9 }] }
    await doc(await call(BOB, "/memory/import", { method: "POST", body: imported }))
    assert.deepStrictEqual(contents(await doc(await call(BOB, "/memory"))), ["Bob imported this"])
    assert.deepStrictEqual(contents(await doc(await call(ALICE, "/memory"))), ["Alice drinks green tea"])
    assert.strictEqual(Fs.readFileSync(fileOf("alice"), "utf8"), aliceFile)
  })

  // test_memory_storage_user_isolation.py::test_save_and_load_per_user, through the tools of memory.mode: tool
  it("an agent's memory_search finds only its user's facts, and memory_add writes only its user's file", async () => {
    await doc(await call(ALICE, "/memory/facts", { method: "POST", body: { content: "Alice brews oolong" } }))
    const found = async (token: string, query: string) =>
      JSON.parse((await runAs(token, `search ${query}`)).replace(/^tool said: /, "")).results.map((f: any) => f.content)
    assert.deepStrictEqual(await found(BOB, "oolong"), [])
    assert.deepStrictEqual(await found(ALICE, "oolong"), ["Alice brews oolong"])

    const added = await runAs(BOB, "remember Bob likes jasmine")
    assert.match(added, /"status":\s*"added"/)
    assert.include(Fs.readFileSync(fileOf("bob"), "utf8"), "Bob likes jasmine")
    assert.notInclude(Fs.readFileSync(fileOf("alice"), "utf8"), "jasmine")
    assert.deepStrictEqual(await found(BOB, "jasmine"), ["Bob likes jasmine"])
    assert.deepStrictEqual(await found(ALICE, "jasmine"), [])
  })
})
