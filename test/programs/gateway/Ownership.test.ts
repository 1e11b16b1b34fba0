/**
 * What a gateway user's runs may change on disk (see `Auth.ts`): their own custom agents, never what another
 * user's agent reads. Bob (a token user) tries the bootstrap agent without an agent name (which would write the
 * default agent's SOUL.md that every user's default agent reads), makes and changes an agent of his own, and
 * tries to change an agent of the old shared layout; Alice's model requests (their system prompts, as the
 * SCRIPTED Chat Completions server received them) show none of it, before and after the gateway is started
 * again on the same data directory, and Bob's agent is not Alice's to run. A user id, role or owner a run names
 * in its context or config is ignored: the token says who runs it, and `update_agent` changes that user's agent
 * of the name, not another user's of the same name. A token marked `admin` may still write the default agent's
 * soul. Real HTTP through the gateway; the model is reached with the real `openai`
 * client.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"
const CAROL = "carol-token-0123456789abcdef"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const text = (content: unknown) => (typeof content === "string" ? content : JSON.stringify(content ?? ""))
const lastUser = (body: ChatRequestBody) => text(body.messages.filter((m) => m.role === "user").at(-1)?.content)
const systemOf = (body: ChatRequestBody) =>
  body.messages.filter((m) => m.role === "system").map((m) => text(m.content)).join("\n")

/**
 * The model: `setup <SOUL>` calls `setup_agent` with that soul, `update <SOUL>` calls `update_agent`; once the
 * tool answered, the tool's answer is repeated; anything else is answered "ok".
 */
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages[body.messages.length - 1]
  if (last?.role === "tool") return `tool said: ${text(last.content)}`
  const prompt = lastUser(body)
  const setup = /\bsetup (\S+)/.exec(prompt)
  if (setup !== null) {
    return { toolCalls: [{ name: "setup_agent", arguments: { soul: `${setup[1]} soul`, description: "d" } }] }
  }
  const update = /\bupdate (\S+)/.exec(prompt)
  if (update !== null) return { toolCalls: [{ name: "update_agent", arguments: { soul: `${update[1]} soul` } }] }
  return "ok"
}

const tokens = [
  { token: ALICE, user: "alice" },
  { token: BOB, user: "bob" },
  { token: CAROL, user: "carol", admin: true }
]

const client = (gateway: () => TestGateway, token: string) => {
  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${gateway().url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }
    })
  /** A run (`runs/wait`) on a new thread: its HTTP status and body. */
  const run = async (prompt: string, more: Record<string, unknown> = {}) => {
    const thread = await (await call("/threads", { method: "POST", body: "{}" })).json() as any
    const response = await call(`/threads/${thread.thread_id}/runs/wait`, {
      method: "POST",
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: prompt }] },
        ...more
      })
    })
    return { status: response.status, body: await response.json() as any }
  }
  /** The system prompt of the agent's model request for `prompt` (a run of the lead agent, or of `agent`). */
  const systemPrompt = async (prompt: string, more: Record<string, unknown> = {}) => {
    const out = await run(prompt, more)
    assert.strictEqual(out.status, 200, JSON.stringify(out.body))
    const found = gateway().scripted.requests.filter((r) => lastUser(r).includes(prompt) && (r.tools ?? []).length > 0)
    assert.lengthOf(found, 1, prompt)
    return systemOf(found[0]!)
  }
  return { call, run, systemPrompt }
}

const toolAnswer = (values: any): string =>
  text((values.messages as Array<any> | undefined)?.filter((m) => m.type === "tool").at(-1)?.content ?? values)

describe("what a gateway user's runs may change", () => {
  it("bob's bootstrap and update_agent change nothing alice's agents read, before and after a restart", async () => {
    const home = Support.tempDir("antler-gw-owner-")
    // an agent of the old shared layout (read by every user, written by none)
    Fs.mkdirSync(Path.join(home, "agents", "shared"), { recursive: true })
    Fs.writeFileSync(Path.join(home, "agents", "shared", "config.yaml"), "description: shared\n")
    Fs.writeFileSync(Path.join(home, "agents", "shared", "SOUL.md"), "SHARED-LEGACY-SOUL\n")
    const config = { gateway: { heartbeat_seconds: 1, auth: { tokens } } }
    let gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const alice = client(() => gateway, ALICE)
    const bob = client(() => gateway, BOB)

    const before = await alice.systemPrompt("alice probe 1")
    assert.notInclude(before, "BOB-")

    // the bootstrap agent without a name would write the default agent's soul: refused for a non-admin token
    const global = await bob.run("setup BOB-GLOBAL", { context: { is_bootstrap: true } })
    // bootstrapping an agent of his own is fine, and so is changing it
    const own = await bob.run("setup BOB-HELPER", { context: { is_bootstrap: true, agent_name: "helper" } })
    assert.strictEqual(own.status, 200, JSON.stringify(own.body))
    assert.include(toolAnswer(own.body), "Agent 'helper' created successfully!")
    const updated = await bob.run("update BOB-UPDATED", { assistant_id: "helper" })
    assert.strictEqual(updated.status, 200, JSON.stringify(updated.body))
    assert.include(toolAnswer(updated.body), "Agent 'helper' updated successfully")
    // the shared layout is read-only, through update_agent and the bootstrap agent alike
    const hijack = await bob.run("update BOB-HIJACK", { assistant_id: "shared" })
    assert.match(toolAnswer(hijack.body), /^Error: Agent .shared. only exists in the legacy shared layout/)
    const overwrite = await bob.run("setup BOB-OVERWRITE", { context: { is_bootstrap: true, agent_name: "shared" } })
    assert.match(toolAnswer(overwrite.body), /^Error: .*old shared layout/)
    assert.include(await bob.systemPrompt("bob probe", { assistant_id: "helper" }), "BOB-UPDATED soul")

    const aliceSees = async (n: number) => {
      const prompt = await alice.systemPrompt(`alice probe ${n}`)
      assert.notInclude(prompt, "BOB-")
      const shared = await alice.systemPrompt(`alice shared probe ${n}`, { assistant_id: "shared" })
      assert.include(shared, "SHARED-LEGACY-SOUL")
      assert.notInclude(shared, "BOB-")
      // bob's agent is not alice's: naming it is naming an assistant that does not exist (LangGraph's 404)
      const helper = await alice.run(`alice helper probe ${n}`, { assistant_id: "helper" })
      const nobody = await alice.run(`alice nobody probe ${n}`, { assistant_id: "nobody" })
      assert.strictEqual(helper.status, 404)
      assert.strictEqual(helper.body.detail, nobody.body.detail.replaceAll("nobody", "helper"))
      const assistants = await (await alice.call("/assistants/search", { method: "POST", body: "{}" })).json() as any
      assert.deepStrictEqual(assistants.map((a: any) => a.assistant_id), ["lead_agent", "shared"])
    }
    await aliceSees(2)
    await gateway.stop()
    gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    await aliceSees(3)

    assert.strictEqual(global.status, 400, JSON.stringify(global.body))
    assert.include(global.body.detail, "agent_name")
    assert.include(global.body.detail, "admin")
    assert.isFalse(Fs.existsSync(Path.join(home, "SOUL.md")))
    assert.strictEqual(Fs.readFileSync(Path.join(home, "agents", "shared", "SOUL.md"), "utf8"), "SHARED-LEGACY-SOUL\n")
  })

  it("a user, role or owner a run names in its context or config is not who runs it: bob's agent is his", async () => {
    const home = Support.tempDir("antler-gw-spoof-")
    const config = { gateway: { heartbeat_seconds: 1, auth: { tokens } } }
    const gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const bob = client(() => gateway, BOB)
    const spoof = { user_id: "alice", user_role: "admin", owner: "alice", oauth_provider: "github", oauth_id: "x" }
    const own = await bob.run("setup BOB-SPOOF", {
      context: { is_bootstrap: true, agent_name: "spoofed", ...spoof },
      config: { configurable: spoof, context: spoof, metadata: spoof }
    })
    assert.strictEqual(own.status, 200, JSON.stringify(own.body))
    assert.include(toolAnswer(own.body), "Agent 'spoofed' created successfully!")
    assert.strictEqual(
      Fs.readFileSync(Path.join(home, "users", "bob", "agents", "spoofed", "SOUL.md"), "utf8").trim(),
      "BOB-SPOOF soul"
    )
    assert.isFalse(Fs.existsSync(Path.join(home, "users", "alice")))
    // nor does naming an admin make the run an admin's: the default agent's soul stays unwritten
    const global = await bob.run("setup BOB-GLOBAL", {
      context: { is_bootstrap: true, ...spoof },
      config: { configurable: spoof, context: spoof }
    })
    assert.strictEqual(global.status, 400, JSON.stringify(global.body))
    assert.isFalse(Fs.existsSync(Path.join(home, "SOUL.md")))
  })

  it("update_agent of the agent a run's context.agent_name names changes the user's own, no other's", async () => {
    const home = Support.tempDir("antler-gw-update-")
    for (const user of ["alice", "bob", "default"]) {
      const dir = Path.join(home, "users", user, "agents", "same-name")
      Fs.mkdirSync(dir, { recursive: true })
      Fs.writeFileSync(Path.join(dir, "config.yaml"), "name: same-name\ndescription: old\n")
      Fs.writeFileSync(Path.join(dir, "SOUL.md"), `${user} original\n`)
    }
    const config = { gateway: { heartbeat_seconds: 1, auth: { tokens } } }
    const gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const bob = client(() => gateway, BOB)
    const updated = await bob.run("update BOB-CTX", { context: { agent_name: "same-name", user_id: "alice" } })
    assert.strictEqual(updated.status, 200, JSON.stringify(updated.body))
    assert.include(toolAnswer(updated.body), "Agent 'same-name' updated successfully")
    const soul = (user: string) =>
      Fs.readFileSync(Path.join(home, "users", user, "agents", "same-name", "SOUL.md"), "utf8")
    assert.strictEqual(soul("bob").trim(), "BOB-CTX soul")
    assert.strictEqual(soul("alice"), "alice original\n")
    assert.strictEqual(soul("default"), "default original\n")
  })

  it("an agent bootstrapped as MyAgent is stored as myagent (DeerFlow's): the API and runs find it", async () => {
    const home = Support.tempDir("antler-gw-case-")
    // an agent written before names were kept in lower case is still found under its own name
    const old = Path.join(home, "users", "bob", "agents", "OldCase")
    Fs.mkdirSync(old, { recursive: true })
    Fs.writeFileSync(Path.join(old, "config.yaml"), "name: OldCase\ndescription: old\n")
    Fs.writeFileSync(Path.join(old, "SOUL.md"), "OLD-CASE soul\n")
    const config = { gateway: { heartbeat_seconds: 1, auth: { tokens } } }
    const gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const bob = client(() => gateway, BOB)
    const made = await bob.run("setup BOB-CASED", { context: { is_bootstrap: true, agent_name: "MyAgent" } })
    assert.include(toolAnswer(made.body), "Agent 'MyAgent' created successfully!")
    const dirs = Fs.readdirSync(Path.join(home, "users", "bob", "agents")).sort()
    assert.deepStrictEqual(dirs, ["OldCase", "myagent"])
    for (const name of ["MyAgent", "myagent"]) {
      const got = await bob.call(`/api/agents/${name}`)
      assert.strictEqual(got.status, 200, name)
      assert.deepInclude(await got.json(), { name: "myagent", soul: "BOB-CASED soul" })
    }
    assert.deepInclude(await (await bob.call("/api/agents/check?name=MyAgent")).json(), { available: false })
    for (const name of ["myagent", "MYAGENT"]) {
      assert.include(await bob.systemPrompt(`bob ${name} probe`, { context: { agent_name: name } }), "BOB-CASED soul")
    }
    assert.include(await bob.systemPrompt("bob old probe", { context: { agent_name: "OldCase" } }), "OLD-CASE soul")
    // updating it through a run that names it in another case changes the one agent
    const updated = await bob.run("update BOB-RECASED", { context: { agent_name: "MYAGENT" } })
    assert.include(toolAnswer(updated.body), "updated successfully")
    const soul = Fs.readFileSync(Path.join(home, "users", "bob", "agents", "myagent", "SOUL.md"), "utf8")
    assert.strictEqual(soul.trim(), "BOB-RECASED soul")
  })

  it("an admin token's bootstrap run without an agent name writes the default agent's soul", async () => {
    const home = Support.tempDir("antler-gw-admin-")
    const config = { gateway: { heartbeat_seconds: 1, auth: { tokens } } }
    let gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const carol = client(() => gateway, CAROL)
    const written = await carol.run("setup CAROL-GLOBAL", { context: { is_bootstrap: true } })
    assert.strictEqual(written.status, 200, JSON.stringify(written.body))
    assert.include(toolAnswer(written.body), "The default agent's SOUL.md was saved")
    await gateway.stop()
    gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    assert.include(await client(() => gateway, ALICE).systemPrompt("alice probe"), "CAROL-GLOBAL soul")
  })
})
