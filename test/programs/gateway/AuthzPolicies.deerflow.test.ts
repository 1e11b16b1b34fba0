/**
 * DeerFlow's `skills`, `sandbox` and `mcp_servers` policies of the built-in RBAC provider (its RFC's resource map:
 * `skill` / `activate`, `sandbox` / `execute`, `mcp_server` / `use`), through the gateway for users of three roles:
 * a skill the role may not load is not in the prompt's skill list and its files are refused; an MCP server the
 * role may not use contributes no tools (`tool_search` finds none, a call is refused), in a subagent too; a role
 * denied the sandbox is offered no sandbox tool and a call of one is refused. The `user` role (alice) has all.
 * The model is SCRIPTED (the real `openai` client against a loopback Chat Completions server); the MCP servers are
 * real stdio processes.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { toolNames } from "../../support/modelRequests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { rbac } from "../../support/rbac.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const GUEST = "guest-token-0123456789abcdef"
const SANDLESS = "sandless-token-0123456789abc"

/** A stdio MCP server whose one tool answers `called <name>`. */
const mcpServer = (tool: string) => {
  const sdk = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
  const script = `
    import { Server } from ${JSON.stringify(`${sdk}/server/index.js`)}
    import { StdioServerTransport } from ${JSON.stringify(`${sdk}/server/stdio.js`)}
    import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${sdk}/types.js`)}
    const server = new Server({ name: "t", version: "1.0.0" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [{ name: ${JSON.stringify(tool)}, description: "Query internal data", inputSchema: { type: "object" } }]
    }))
    server.setRequestHandler(CallToolRequestSchema, async (request) => ({
      content: [{ type: "text", text: "called " + request.params.name }]
    }))
    await server.connect(new StdioServerTransport())
  `
  return { type: "stdio", command: process.execPath, args: ["--input-type=module", "-e", script] }
}

const toolResults = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "tool")
const echo = (body: ChatRequestBody) => `Tools said: ${toolResults(body).map((m) => String(m.content)).join(" | ")}`
const call = (name: string, args: Record<string, unknown>): Turn => ({ toolCalls: [{ name, arguments: args }] })

/** The model: each task is named by a word of the user's message (a subagent's is its task prompt). */
const script = (body: ChatRequestBody): Turn => {
  const user = Support.lastUserText(body)
  const done = toolResults(body).length
  if (user.includes("READ-SKILL")) {
    const path = "/mnt/skills/public/vault-skill/SKILL.md"
    return done === 0 ? call("read_file", { description: "skill", path }) : echo(body)
  }
  if (user.includes("LIST-SKILLS")) {
    if (done === 0) return call("ls", { description: "skills", path: "/mnt/skills/public" })
    if (done === 1) {
      return call("bash", { description: "read", command: "cat /mnt/skills/public/vault-skill/SKILL.md" })
    }
    return echo(body)
  }
  if (user.includes("USE-MCP")) {
    if (done === 0) return call("tool_search", { query: "select:open_lookup,secret_vault" })
    if (done === 1) return call("secret_vault", {})
    return echo(body)
  }
  if (user.includes("SUB-SEARCH")) {
    return done === 0 ? call("tool_search", { query: "select:open_lookup,secret_vault" }) : echo(body)
  }
  if (user.includes("DELEGATE")) {
    if (done === 0) {
      return call("task", { description: "search", prompt: "SUB-SEARCH now", subagent_type: "general-purpose" })
    }
    return echo(body)
  }
  if (user.includes("LIST-FILES")) {
    return done === 0 ? call("ls", { description: "look", path: "/mnt/user-data" }) : echo(body)
  }
  return "Nothing to do."
}

let gateway: TestGateway
let dir: string

beforeAll(async () => {
  dir = Support.tempDir("antler-authz-policies-")
  for (const name of ["open-skill", "vault-skill"]) {
    Fs.mkdirSync(Path.join(dir, "skills", "public", name), { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, "skills", "public", name, "SKILL.md"),
      `---\nname: ${name}\ndescription: The ${name} way of working\n---\n# ${name} body text\n`
    )
  }
  Fs.writeFileSync(
    Path.join(dir, "extensions_config.json"),
    JSON.stringify({
      mcpServers: {
        open: mcpServer("lookup"),
        // (its routing hint names its tool in the prompt, for the roles that may use it)
        secret: { ...mcpServer("vault"), routing: { mode: "prefer", keywords: ["vault"] } }
      },
      skills: {}
    })
  )
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      tool_search: { enabled: true },
      // (bash on the host, or under bubblewrap where there is one)
      sandbox: { allow_host_bash: true },
      gateway: {
        heartbeat_seconds: 1,
        auth: {
          tokens: [
            { token: Support.ALICE, user: "alice" },
            { token: GUEST, user: "gus", role: "guest" },
            { token: SANDLESS, user: "sam", role: "sandless" }
          ]
        }
      },
      authorization: rbac({
        user: {},
        guest: { skills: { allow: ["open-skill"] }, mcp_servers: { deny: ["secret"] } },
        sandless: { sandbox: { allow: false } }
      })
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

/** Runs `text` on a new thread as the token's user: the last answer, and the model requests of the run. */
const ask = async (token: string, text: string, context: Record<string, unknown> = {}) => {
  const client = new Client({ apiUrl: gateway.url, apiKey: token })
  const before = gateway.scripted.requests.length
  const thread = await client.threads.create()
  const out = await client.runs.wait(thread.thread_id, "lead_agent", { input: Support.userInput(text), context })
  const requests = gateway.scripted.requests.slice(before)
  return { answer: String(Support.visible((out as any).messages).at(-1).content), requests }
}

const systemText = (body: ChatRequestBody) =>
  body.messages.filter((m) => m.role === "system").map((m) => String(m.content)).join("\n")

describe("authorization: the skills, sandbox and mcp_servers policies", () => {
  it("a skill the role may not load is not listed, and its files are refused", async () => {
    const guest = await ask(GUEST, "READ-SKILL please")
    const prompt = systemText(guest.requests[0]!)
    assert.include(prompt, "open-skill")
    assert.notInclude(prompt, "vault-skill")
    assert.include(guest.answer, "role 'guest' is denied 'vault-skill' on resource 'skill'")
    assert.notInclude(guest.answer, "vault-skill body text")
    // a listing from above leaves it out; bash naming it is refused with the role's words
    const listed = await ask(GUEST, "LIST-SKILLS please")
    const [ls, cat] = listed.answer.split(" | ")
    assert.include(ls, "open-skill")
    assert.notInclude(ls, "vault-skill")
    assert.include(cat, "role 'guest' is denied 'vault-skill' on resource 'skill'")
    assert.notInclude(cat, "body text")
    const aliceListed = await ask(Support.ALICE, "LIST-SKILLS please")
    assert.include(aliceListed.answer.split(" | ")[0], "vault-skill")
    assert.include(aliceListed.answer, "# vault-skill body text")
    // nor activated by its slash command
    const slash = await ask(GUEST, "/vault-skill READ-SKILL")
    assert.include(slash.answer, "Skill `/vault-skill` is not available for this agent.")

    const alice = await ask(Support.ALICE, "READ-SKILL please")
    assert.include(systemText(alice.requests[0]!), "vault-skill")
    assert.include(alice.answer, "# vault-skill body text")
  }, 30_000)

  it("an MCP server the role may not use contributes no tools: tool_search finds none, a call is refused", async () => {
    const guest = await ask(GUEST, "USE-MCP please")
    assert.include(guest.answer, "open_lookup")
    assert.notInclude(guest.answer.split(" | ")[0]!, "secret_vault")
    for (const request of guest.requests) assert.notInclude(toolNames(request), "secret_vault")
    assert.notInclude(systemText(guest.requests[0]!), "secret_vault")
    assert.include(guest.answer, "role 'guest' is denied 'secret' on resource 'mcp_server'")
    assert.notInclude(guest.answer, "called vault")

    const alice = await ask(Support.ALICE, "USE-MCP please")
    assert.include(alice.answer.split(" | ")[0]!, "secret_vault")
    assert.include(alice.answer, "called vault")
  }, 30_000)

  it("in a subagent, tool_search does not name a deferred tool the parent's role may not use", async () => {
    const guest = await ask(GUEST, "DELEGATE it", { subagent_enabled: true })
    const sub = guest.requests.filter((r) => Support.lastUserText(r).includes("SUB-SEARCH"))
    assert.isAbove(sub.length, 1)
    const found = toolResults(sub.at(-1)!).map((m) => String(m.content)).join("\n")
    assert.include(found, "open_lookup")
    assert.notInclude(found, "secret_vault")
    assert.notInclude(systemText(sub[0]!), "secret_vault")

    const alice = await ask(Support.ALICE, "DELEGATE it", { subagent_enabled: true })
    const aliceSub = alice.requests.filter((r) => Support.lastUserText(r).includes("SUB-SEARCH"))
    assert.include(systemText(aliceSub[0]!), "secret_vault")
    assert.include(systemText(alice.requests[0]!), "secret_vault")
    assert.include(toolResults(aliceSub.at(-1)!).map((m) => String(m.content)).join("\n"), "secret_vault")
  }, 30_000)

  it("a role denied the sandbox is offered no sandbox tool, and a call of one is refused", async () => {
    const sam = await ask(SANDLESS, "LIST-FILES please")
    for (const request of sam.requests) {
      const names = toolNames(request)
      for (const tool of ["bash", "ls", "read_file", "write_file", "str_replace", "glob", "grep"]) {
        assert.notInclude(names, tool)
      }
      assert.include(names, "present_files")
    }
    assert.include(sam.answer, "role 'sandless' is denied 'default' on resource 'sandbox'")

    const alice = await ask(Support.ALICE, "LIST-FILES please")
    assert.include(toolNames(alice.requests[0]!), "ls")
    assert.notInclude(alice.answer, "denied")
    assert.include(alice.answer, "workspace")
  }, 30_000)
})
