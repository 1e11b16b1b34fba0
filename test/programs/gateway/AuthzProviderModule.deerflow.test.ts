/**
 * An operator's own authorization provider (DeerFlow's `authorization.provider.use`, a class loaded by path), as
 * a JavaScript module `module:Export` found beside `config.yaml`: the gateway asks it for each role's tools (a
 * provider without `filter_resources` is asked per tool), a tool it denies is not offered and a call is refused
 * with its reason; a module that is missing or gives no provider stops the start with a readable error naming
 * the key; a Python class path other than the built-in RBAC one is a configuration error. The model is SCRIPTED.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as ConfiguredAuthorization from "../../../src/layers/ConfiguredAuthorization.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Authz from "../../../src/services/Authorization.js"
import { toolNames } from "../../support/modelRequests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const GUEST = "guest-token-0123456789abcdef"

const PROVIDER = `
export class RoleBook {
  constructor(config) { this.name = "rolebook"; this.denied = config.denied }
  async authorize(request) {
    const denied = this.denied[request.principal.role] ?? []
    if (!denied.includes(request.target)) return { allow: true, reasons: [{ code: "rolebook.allowed" }] }
    return {
      allow: false,
      reasons: [{ code: "rolebook.denied", message: request.principal.role + " may not use " + request.target }]
    }
  }
}
export const notAProvider = () => ({ evaluate() { return { allow: true } } })
export const badFilter = { authorize: () => ({ allow: true }), filter_resources: () => "everything" }
`

const script = (body: ChatRequestBody): Turn => {
  if (!Support.lastUserText(body).includes("SAVE-NOTE")) return "Nothing to do."
  const done = body.messages.filter((m) => m.role === "tool")
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

const setup = (use: string) => {
  const dir = Support.tempDir("antler-authz-module-")
  Fs.writeFileSync(Path.join(dir, "rolebook.mjs"), PROVIDER)
  return {
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      authorization: { enabled: true, provider: { use, config: { denied: { guest: ["write_file"] } } } }
    }
  }
}

const save = async (gateway: TestGateway, token: string) => {
  const client = new Client({ apiUrl: gateway.url, apiKey: token })
  const before = gateway.scripted.requests.length
  const thread = await client.threads.create()
  const out = await client.runs.wait(thread.thread_id, "lead_agent", { input: Support.userInput("SAVE-NOTE please") })
  const requests = gateway.scripted.requests.slice(before).filter((r) => (r.tools ?? []).length > 0)
  return { answer: String(Support.visible((out as any).messages).at(-1).content), requests }
}

describe("authorization: a provider module of the operator's", () => {
  it("decides the tools of each role: hidden, and refused with its reason; the other role is unaffected", async () => {
    const gateway = await Support.start(setup("./rolebook.mjs:RoleBook"))
    gateways.push(gateway)
    const guest = await save(gateway, GUEST)
    assert.isAbove(guest.requests.length, 0)
    for (const request of guest.requests) {
      assert.notInclude(toolNames(request), "write_file")
      assert.include(toolNames(request), "read_file")
    }
    assert.include(guest.answer, "(rolebook.denied)")
    assert.include(guest.answer, "guest may not use write_file")

    const alice = await save(gateway, Support.ALICE)
    assert.include(toolNames(alice.requests[0]!), "write_file")
    assert.notInclude(alice.answer, "denied")
  }, 30_000)

  it("a missing module or an export that is no provider stops the start, naming the key and why", async () => {
    const missing = await Support.start(setup("./nowhere.mjs:RoleBook")).then(() => undefined, (e) => String(e))
    assert.include(missing, "authorization.provider.use")
    assert.include(missing, "no module at")
    assert.include(missing, "nowhere.mjs")
    const wrong = await Support.start(setup("./rolebook.mjs:notAProvider")).then(() => undefined, (e) => String(e))
    assert.include(wrong, "is not an authorization provider: it gave an object without an authorize method")
  }, 30_000)

  it.effect("a Python class path is a configuration error; a malformed filter answer fails closed", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(ConfigFile.fromObject({
        models: [],
        authorization: { enabled: true, provider: { use: "my_company.authz:Provider" } }
      }, { home: Support.tempDir("antler-authz-home-") }))
      assert.include(String(error), "authorization.provider.use")
      assert.include(String(error), "\"./my-authz.mjs:MyAuthz\"")
      assert.include(String(error), "Antler cannot load Python classes")

      const dir = Support.tempDir("antler-authz-module-")
      Fs.writeFileSync(Path.join(dir, "rolebook.mjs"), PROVIDER)
      const provider = yield* ConfiguredAuthorization.load("./rolebook.mjs:badFilter", {}, dir)
      const authz = { provider, failClosed: true, defaultRole: "user" }
      const principal = Authz.principalOf({ role: "user" }, "user")
      assert.deepStrictEqual(yield* Authz.visible(authz, principal, "tool", ["bash"]), [])
      const failure = yield* Effect.flip(provider.filterResources(principal, "tool", ["bash"]))
      assert.include(failure.message, "filter_resources must answer a list of names")
      const open = { ...authz, failClosed: false }
      assert.deepStrictEqual(yield* Authz.visible(open, principal, "tool", ["bash"]), ["bash"])
    }))
})
