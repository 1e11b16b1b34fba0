/**
 * Attack round 22 on roles (`authorization.enabled`), as a user of a narrow role: a run the gateway starts later
 * for them (a scheduled task's, a cron's) must be their role's, not `default_role`'s. Before, the scheduler
 * started those runs with no role, so they ran as `default_role`: a `guest` denied `write_file` and the `deep`
 * model made a scheduled task or a cron, and its run was offered `write_file` and used `deep`.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as MinuteClock from "../../support/minuteClock.js"
import { toolNames } from "../../support/modelRequests.js"
import { eventually } from "../../support/poll.js"
import * as OwnerRole from "../../../src/programs/gateway/OwnerRole.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { rbac } from "../../support/rbac.js"

const GUEST = "guest-token-0123456789abcdef"
const SLOW = 60_000

// the gateway's clock, moved to just before a minute's end for the cron's tick
const minute = MinuteClock.make()

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    references: Layer.setClock(minute.clock),
    script: (body: ChatRequestBody) => {
      const text = Support.lastUserText(body)
      if (!text.includes("DELEGATE-MARK") || body.messages.at(-1)?.role === "tool") return "Done."
      const args = { description: "look", prompt: "SUBTASK-MARK list the workspace", subagent_type: "general-purpose" }
      return { toolCalls: [{ name: "task", arguments: args }] }
    },
    config: (url: string) => ({
      models: [Support.scriptedModel("deep", url), Support.scriptedModel("scripted", url)],
      // (a subagent type on a model the guest may not use)
      subagents: { agents: { "general-purpose": { model: "deep" } } },
      gateway: {
        scheduler_poll_seconds: 1,
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      authorization: rbac({
        user: {},
        guest: { tools: { allow: "*", deny: ["write_file"] }, models: { allow: ["scripted"] } }
      })
    })
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const guest = Requests.as(() => gateway, GUEST)

/** The model requests with `marker` in their last user message, once there is one. */
const requestsWith = (marker: string, tries = 400) =>
  eventually(async () => {
    const found = gateway.scripted.requests.filter((r: ChatRequestBody) =>
      (r.tools ?? []).length > 0 && Support.lastUserText(r).includes(marker)
    )
    return found.length > 0 ? found : undefined
  }, `a model request of ${marker}`, { tries, everyMs: 50 })

describe("a narrow role's later runs keep the role", () => {
  it("a guest's scheduled task runs as the guest: no denied tool, no denied model", async () => {
    const created = await guest("POST", "/api/scheduled-tasks", {
      context_mode: "fresh_thread_per_run",
      title: "Notes",
      prompt: "SCHEDULED-MARK write a note",
      schedule_type: "cron",
      schedule_spec: { cron: "0 9 * * *" },
      timezone: "UTC"
    })
    assert.strictEqual(created.status, 200, created.text)
    const triggered = await guest("POST", `/api/scheduled-tasks/${created.json().id}/trigger`)
    assert.strictEqual(triggered.status, 200, triggered.text)
    for (const request of await requestsWith("SCHEDULED-MARK")) {
      assert.notInclude(toolNames(request), "write_file")
      assert.include(toolNames(request), "read_file")
      assert.strictEqual(request.model, "model-scripted")
    }
  }, SLOW)

  it("a guest's cron runs as the guest, with the model the guest may use", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    minute.nearMinuteEnd(10)
    const made = await guest("POST", `/threads/${thread}/runs/crons`, {
      assistant_id: "lead_agent",
      schedule: "* * * * *",
      input: { messages: [{ role: "user", content: "CRON-MARK write a note" }] },
      config: { configurable: { model_name: "deep" } }
    })
    assert.strictEqual(made.status, 200, made.text)
    // (its first tick is at the clock's next minute, seconds away)
    for (const request of await requestsWith("CRON-MARK", 1600)) {
      assert.notInclude(toolNames(request), "write_file")
      assert.strictEqual(request.model, "model-scripted")
    }
  }, 120_000)
})

describe("a narrow role's subagents", () => {
  it("run on a model the role may use, never on their type's model the role may not use", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const ran = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("DELEGATE-MARK please"),
      context: { subagent_enabled: true }
    })
    assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
    const requests = await requestsWith("SUBTASK-MARK")
    for (const request of requests) assert.strictEqual(request.model, "model-scripted")
    const alice = Requests.as(() => gateway, Support.ALICE)
    const own = (await alice("POST", "/threads", {})).json().thread_id as string
    const before = gateway.scripted.requests.length
    await alice("POST", `/threads/${own}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("DELEGATE-MARK please"),
      context: { subagent_enabled: true }
    })
    // (alice's role has no model policy: the type's model)
    const hers = gateway.scripted.requests.slice(before).filter((r) => Support.lastUserText(r).includes("SUBTASK-MARK"))
    assert.isAbove(hers.length, 0)
    for (const request of hers) assert.strictEqual(request.model, "model-deep")
  }, SLOW)
})

describe("a narrow role named otherwise in a request", () => {
  it("a role, user or internal flag in a request's context, config or headers, or an agent's model: held", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const spoof = { user_role: "user", role: "user", system_role: "admin", is_internal: true, user_id: "alice" }
    const before = gateway.scripted.requests.length
    const raw = Requests.raw(() => gateway)
    const ran = await raw(GUEST, "POST", `/threads/${thread}/runs/wait`, JSON.stringify({
      assistant_id: "lead_agent",
      input: Support.userInput("SPOOF-MARK hello"),
      context: { ...spoof, model_name: "deep" },
      config: { configurable: spoof, context: spoof, metadata: spoof }
    }), { "x-user-role": "user", "x-deerflow-role": "admin", "x-internal-auth": "1" })
    assert.strictEqual(ran.status, 200, await ran.text())
    const requests = gateway.scripted.requests.slice(before).filter((r) => (r.tools ?? []).length > 0)
    assert.isAbove(requests.length, 0)
    for (const request of requests) {
      assert.notInclude(toolNames(request), "write_file")
      assert.strictEqual(request.model, "model-scripted")
    }
    // nor a custom agent (an assistant) of the guest's on a model the guest may not use
    const made = await guest("POST", "/api/agents", { name: "spoofy", model: "deep", soul: "A helper." })
    assert.strictEqual(made.status, 201, made.text)
    const mark = gateway.scripted.requests.length
    const onAssistant = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "spoofy",
      input: Support.userInput("SPOOF-MARK again")
    })
    assert.strictEqual(onAssistant.status, 200, onAssistant.text.slice(0, 300))
    const later = gateway.scripted.requests.slice(mark).filter((r) => (r.tools ?? []).length > 0)
    assert.isAbove(later.length, 0)
    for (const request of later) {
      assert.notInclude(toolNames(request), "write_file")
      assert.strictEqual(request.model, "model-scripted")
    }
  }, SLOW)
})

describe("a narrow role's gateway model calls", () => {
  it("follow-up questions and a compaction asking for a model the role may not use are refused (403)", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const before = gateway.scripted.requests.length
    const asked = await guest("POST", `/api/threads/${thread}/suggestions`, {
      messages: [{ role: "user", content: "hello" }, { role: "assistant", content: "hi" }],
      model_name: "deep"
    })
    assert.strictEqual(asked.status, 403, asked.text)
    assert.strictEqual(asked.json().detail, "model_name: the model \"deep\" is not available for your role.")
    const compacted = await guest("POST", `/api/threads/${thread}/compact`, { model_name: "deep", force: true })
    assert.strictEqual(compacted.status, 403, compacted.text)
    assert.strictEqual(compacted.json().detail, "model_name: the model \"deep\" is not available for your role.")
    // nor through a custom agent of the guest's on that model
    const agent = await guest("POST", "/api/agents", { name: "compactor", model: "deep", soul: "A helper." })
    assert.strictEqual(agent.status, 201, agent.text)
    const byAgent = await guest("POST", `/api/threads/${thread}/compact`, { agent_name: "compactor", force: true })
    assert.strictEqual(byAgent.status, 403, byAgent.text)
    assert.strictEqual(byAgent.json().detail, "agent_name: the model \"deep\" is not available for your role.")
    assert.isFalse(gateway.scripted.requests.slice(before).some((r) => r.model === "model-deep"))
    // a model the role may use is used
    const allowed = await guest("POST", `/api/threads/${thread}/suggestions`, {
      messages: [{ role: "user", content: "hello" }, { role: "assistant", content: "hi" }],
      model_name: "scripted"
    })
    assert.strictEqual(allowed.status, 200, allowed.text)
  }, SLOW)
})

describe("OwnerRole: the role a scheduled run is given", () => {
  const roles = rbac({ user: {}, guest: {} })
  const lookup = async (gateway: Record<string, unknown>, authorization: unknown = roles) => {
    const home = Support.tempDir("antler-owner-role-")
    const app = await Effect.runPromise(ConfigFile.fromObject({ gateway, authorization }, { home }))
    return OwnerRole.make(app.config, (id) => Effect.succeed(id === "acct-1" ? Option.some("admin") : Option.none()))
  }
  const roleOf = (find: OwnerRole.Lookup, user: string) => Effect.runPromise(find(user))

  it("is the user's token's role or account's, none on an open gateway, and never a guess", async () => {
    const tokens = [
      { token: "t".repeat(24), user: "gus", role: "guest" },
      { token: "u".repeat(24), user: "ann" },
      { token: "v".repeat(24), user: "max", role: "guest" },
      { token: "w".repeat(24), user: "max", admin: true }
    ]
    const find = await lookup({ auth: { tokens, accounts: true } })
    assert.deepStrictEqual(await roleOf(find, "gus"), Either.right("guest"))
    assert.deepStrictEqual(await roleOf(find, "ann"), Either.right("user"))
    assert.deepStrictEqual(await roleOf(find, "acct-1"), Either.right("admin"))
    const several = await roleOf(find, "max")
    assert.isTrue(Either.isLeft(several) && several.left.includes("several roles (guest, admin)"))
    const gone = await roleOf(find, "zed")
    assert.isTrue(Either.isLeft(gone) && gone.left.includes("no token or account"))
    // the open gateway's local user: as its requests, no role (default_role); without authorization, no change
    assert.deepStrictEqual(await roleOf(await lookup({}), "default"), Either.right(undefined))
    const off = await lookup({ auth: { tokens } }, { enabled: false })
    assert.deepStrictEqual(await roleOf(off, "zed"), Either.right(undefined))
  })
})
