/**
 * DeerFlow's role-based permissions (`authorization`, built-in RBAC provider) through the gateway, for two token
 * users of different roles (DeerFlow's test_authorization_enforcement, test_authorization_route_permissions,
 * test_models_authorization, end to end): a tool the `guest` role may not use is missing from the model's tool
 * list and, called anyway, does not run (the model reads the provider's refusal); a route forbidden to the role is
 * 403 with DeerFlow's detail; a model the role may not use is not listed, and a run asking for it gets an allowed
 * one. The `user` role (alice) is unaffected, and with authorization off the guest token has every tool again.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { toolNames } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { rbac } from "../../support/rbac.js"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const GUEST = "guest-token-0123456789abcdef"

const tools = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "tool")

/** Asked to "save", the model writes a file, then repeats what the tool answered. */
const script = (body: ChatRequestBody): Turn => {
  if (!Support.lastUserText(body).includes("SAVE-NOTE")) return "Nothing to do."
  const done = tools(body)
  if (done.length === 0) {
    return {
      toolCalls: [{
        name: "write_file",
        arguments: { description: "a note", path: "/mnt/user-data/workspace/note.txt", content: "hello" }
      }]
    }
  }
  return `Tool said: ${String(done.at(-1)!.content)}`
}

const config = (authorization: boolean) => (url: string) => ({
  models: [Support.scriptedModel("scripted", url), Support.scriptedModel("deep", url)],
  gateway: {
    heartbeat_seconds: 1,
    auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
  },
  authorization: rbac({
    user: {},
    guest: {
      tools: { allow: "*", deny: ["write_file"] },
      routes: { deny: ["threads:delete"] },
      models: { allow: ["scripted"] }
    }
  }, { enabled: authorization })
})

/** Runs "save" on a new thread as `client`: the run's last answer, and the model requests the run made. */
const save = async (gateway: TestGateway, client: Client, context: Record<string, unknown> = {}) => {
  const before = gateway.scripted.requests.length
  const thread = await client.threads.create()
  const out = await client.runs.wait(thread.thread_id, "lead_agent", { input: Support.userInput("SAVE-NOTE please"), context })
  const requests = gateway.scripted.requests.slice(before).filter((r) => (r.tools ?? []).length > 0)
  return { thread, answer: String(Support.visible((out as any).messages).at(-1).content), requests }
}

/** The notes the user's runs wrote (`{home}/users/{user}/threads/.../workspace/note.txt`). */
const outputFile = (gateway: TestGateway, user: string) => {
  const root = Path.join(gateway.home, "users", user, "threads")
  if (!Fs.existsSync(root)) return []
  return (Fs.readdirSync(root, { recursive: true }) as Array<string>).filter((f) => f.endsWith("note.txt"))
}

describe("authorization: roles decide tools, routes and models", () => {
  it("a guest never sees nor runs a denied tool, is refused a denied route and model; a user is unaffected", async () => {
    const gateway = await Support.start({ script, config: config(true) })
    gateways.push(gateway)
    const alice = new Client({ apiUrl: gateway.url, apiKey: Support.ALICE })
    const guest = new Client({ apiUrl: gateway.url, apiKey: GUEST })

    // the guest's model is never offered write_file; called anyway, it does not run and the model reads why
    const refused = await save(gateway, guest)
    assert.isAbove(refused.requests.length, 0)
    for (const request of refused.requests) {
      assert.notInclude(toolNames(request), "write_file")
      assert.include(toolNames(request), "read_file")
    }
    assert.include(refused.answer, "Guardrail denied")
    assert.include(refused.answer, "(authz.denied)")
    assert.include(refused.answer, "role 'guest' is denied 'write_file' on resource 'tool'")
    assert.deepStrictEqual(outputFile(gateway, "gus"), [])

    // alice (role user, no policy) has the tool, and it runs
    const written = await save(gateway, alice)
    assert.include(toolNames(written.requests[0]!), "write_file")
    assert.notInclude(written.answer, "Guardrail denied")
    assert.lengthOf(outputFile(gateway, "alice"), 1)

    // routes: deleting a thread is threads:delete, which the guest's role denies (DeerFlow's 403 detail)
    const asGuest = Requests.as(() => gateway, GUEST)
    const asAlice = Requests.as(() => gateway, Support.ALICE)
    const denied = await asGuest("DELETE", `/threads/${refused.thread.thread_id}`)
    assert.strictEqual(denied.status, 403)
    assert.strictEqual(denied.json().detail, "Permission denied: threads:delete")
    assert.strictEqual((await asGuest("GET", `/threads/${refused.thread.thread_id}`)).status, 200)
    assert.include([200, 204], (await asAlice("DELETE", `/threads/${written.thread.thread_id}`)).status)

    // models: the guest lists only the one it may use; a run asking for the other gets it, with a warning
    const names = async (ask: typeof asGuest) => (await ask("GET", "/api/models")).json().models.map((m: any) => m.name)
    assert.deepStrictEqual(await names(asGuest), ["scripted"])
    assert.deepStrictEqual(await names(asAlice), ["scripted", "deep"])
    const deep = await save(gateway, guest, { model_name: "deep" })
    assert.isTrue(deep.requests.every((r) => r.model === "model-scripted"))
    const deepAlice = await save(gateway, alice, { model_name: "deep" })
    assert.isTrue(deepAlice.requests.every((r) => r.model === "model-deep"))
  })

  it("off, the same tokens have every tool, route and model (today's behaviour)", async () => {
    const gateway = await Support.start({ script, config: config(false) })
    gateways.push(gateway)
    const guest = new Client({ apiUrl: gateway.url, apiKey: GUEST })
    const ran = await save(gateway, guest, { model_name: "deep" })
    assert.include(toolNames(ran.requests[0]!), "write_file")
    assert.notInclude(ran.answer, "Guardrail denied")
    assert.isTrue(ran.requests.every((r) => r.model === "model-deep"))
    assert.lengthOf(outputFile(gateway, "gus"), 1)
    const asGuest = Requests.as(() => gateway, GUEST)
    assert.include([200, 204], (await asGuest("DELETE", `/threads/${ran.thread.thread_id}`)).status)
  })
})
