/**
 * Runs of the gateway go through the app's agent factory, as `antler run` does: what a LangGraph client puts in
 * `config.configurable` or `context` (model, plan mode, thinking, reasoning effort) reaches the model request,
 * with `context` winning. Long-term memory works as in the CLI: each user's runs are queued for a memory update
 * (never streamed), made when the gateway stops at the latest, and injected into that user's next thread only.
 * Driven by the real `@langchain/langgraph-sdk` Client; the model is SCRIPTED (the real `openai` client against a
 * loopback Chat Completions server).
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const KEY = "sk-test-scripted-key-000000"
const text = (content: unknown) => (typeof content === "string" ? content : JSON.stringify(content ?? ""))
const lastUser = (body: ChatRequestBody) => text(body.messages.filter((m) => m.role === "user").at(-1)?.content)
const toolNames = (body: ChatRequestBody) => (body.tools ?? []).map((t: any) => String(t.function?.name))

describe("run settings from a LangGraph client reach the agent", () => {
  it("configurable and context choose the model, plan mode, thinking and effort; context wins", async () => {
    const gateway = await Support.start({
      script: (body) => `Done: ${lastUser(body)}`,
      config: (url) => ({
        models: [
          { name: "scripted", model: "scripted", base_url: url, api_key: KEY },
          {
            name: "deep",
            model: "deep-model",
            base_url: url,
            api_key: KEY,
            supports_thinking: true,
            supports_reasoning_effort: true,
            when_thinking_enabled: { extra_body: { thinking: { type: "enabled" } } }
          }
        ]
      })
    })
    gateways.push(gateway)
    const client = new Client({ apiUrl: gateway.url, apiKey: null })
    /** The agent's model request of a run (the one with tools, not an internal call such as the title). */
    const requestOf = async (prompt: string, payload: Record<string, unknown>) => {
      const thread = await client.threads.create()
      const out = await client.runs.wait(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: prompt }] },
        ...payload
      }) as any
      assert.include(Support.visible(out.messages).at(-1).content, prompt)
      const found = gateway.scripted.requests.filter((r) => lastUser(r).includes(prompt) && (r.tools ?? []).length > 0)
      assert.lengthOf(found, 1, prompt)
      return found[0]!
    }

    const plain = await requestOf("plain run", {})
    assert.strictEqual(plain.model, "scripted")
    assert.notInclude(toolNames(plain), "write_todos")
    assert.notProperty(plain, "reasoning_effort")

    const planned = await requestOf("context run", {
      context: { model_name: "deep", is_plan_mode: true, reasoning_effort: "high" }
    })
    assert.strictEqual(planned.model, "deep-model")
    assert.include(toolNames(planned), "write_todos")
    assert.strictEqual(planned.reasoning_effort, "high")
    // thinking is on unless a run says otherwise
    assert.deepStrictEqual(planned.thinking, { type: "enabled" })

    const configured = await requestOf("configurable run", {
      config: { configurable: { model_name: "deep", thinking_enabled: false } }
    })
    assert.strictEqual(configured.model, "deep-model")
    assert.deepStrictEqual(configured.thinking, { type: "disabled" })
    assert.notInclude(toolNames(configured), "write_todos")

    const both = await requestOf("both run", {
      config: { configurable: { model_name: "deep" } },
      context: { model_name: "scripted" }
    })
    assert.strictEqual(both.model, "scripted")
  })
})

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"
const MEMORY_PROMPT = "You maintain the long-term memory"

/** The write gate's labels of a fact that is the user's (DeerFlow test_memory_updater's `_DURABLE_USER_FACT`). */
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const
/** The same of a summary. */
const USER_SUMMARY = { scope: "user", authority: "descriptive" } as const

/** The model: a memory update answers with a fact about whoever spoke of uv; anything else is acknowledged. */
const memoryScript = (body: ChatRequestBody): Turn => {
  const first = text(body.messages[0]?.content)
  if (first.startsWith(MEMORY_PROMPT)) {
    return JSON.stringify({
      user: { workContext: { summary: "Data engineer at Acme.", shouldUpdate: true, ...USER_SUMMARY } },
      newFacts: [{ content: "Uses uv, never pip", category: "preference", confidence: 0.95, ...USER }]
    })
  }
  return "Noted."
}

describe("long-term memory in the gateway", () => {
  it("a user's run is remembered (when the gateway stops at the latest), never streamed, for that user only", async () => {
    const home = Support.tempDir("antler-gw-memory-")
    const config = {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
      },
      // the default debounce (30 s) is longer than the test: the update is the one made when the gateway stops
      memory: { enabled: true }
    }
    const first = await Support.start({ script: memoryScript, config, home })
    gateways.push(first)
    const alice = new Client({ apiUrl: first.url, apiKey: ALICE })
    const thread = await alice.threads.create()
    const parts: Array<{ event: string; data: any }> = []
    for await (const part of alice.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "I'm a data engineer at Acme; I use uv, never pip." }] },
      streamMode: ["values", "messages-tuple", "custom", "updates"]
    })) parts.push(part as any)
    const streamed = JSON.stringify(parts)
    assert.include(streamed, "Noted.")
    // the memory update is an internal call: nothing of it reaches the client
    assert.notInclude(streamed, MEMORY_PROMPT)
    assert.notInclude(streamed, "Uses uv, never pip")
    const file = Path.join(home, "users", "alice", "memory.json")
    assert.isFalse(Fs.existsSync(file))
    await first.stop()
    // stopping the gateway made the pending update
    assert.isTrue(first.scripted.requests.some((r) => text(r.messages[0]?.content).startsWith(MEMORY_PROMPT)))
    assert.include(Fs.readFileSync(file, "utf8"), "Uses uv, never pip")

    // a gateway started again over the same data directory: alice's next thread knows; bob's does not
    const again = await Support.start({ script: memoryScript, config, home })
    gateways.push(again)
    const askAs = async (token: string, prompt: string) => {
      const client = new Client({ apiUrl: again.url, apiKey: token })
      const fresh = await client.threads.create()
      const input = { messages: [{ type: "human", content: prompt }] }
      await client.runs.wait(fresh.thread_id, "lead_agent", { input })
      return again.scripted.requests.find((r) => lastUser(r).includes(prompt) && (r.tools ?? []).length > 0)!
    }
    const aliceAgain = await askAs(ALICE, "Start a Python project")
    assert.isTrue(aliceAgain.messages.some((m) => text(m.content).includes("Uses uv, never pip")))
    const bob = await askAs(BOB, "Start a Rust project")
    assert.isFalse(bob.messages.some((m) => text(m.content).includes("Uses uv, never pip")))
  })
})

describe("secrets stay out of the files the agent writes", () => {
  it("the model key and a gateway token, echoed by the memory model and put into a SOUL, are not stored", async () => {
    const home = Support.tempDir("antler-gw-secrets-")
    const echo = `key ${KEY}, token ${ALICE}`
    const script = (body: ChatRequestBody): Turn => {
      if (text(body.messages[0]?.content).startsWith(MEMORY_PROMPT)) {
        return JSON.stringify({
          user: { workContext: { summary: `Their credentials: ${echo}.`, shouldUpdate: true, ...USER_SUMMARY } },
          newFacts: [{ content: `Authenticates with ${echo}`, category: "context", confidence: 0.95, ...USER }]
        })
      }
      const tools = toolNames(body)
      const answered = body.messages.at(-1)?.role === "tool"
      if (tools.includes("setup_agent") && !answered) {
        return {
          toolCalls: [{
            name: "setup_agent",
            arguments: { soul: `# Ada\nUse ${echo} for everything.`, description: `Ada (${echo})` }
          }]
        }
      }
      if (tools.includes("update_agent") && !answered) {
        return {
          toolCalls: [{
            name: "update_agent",
            arguments: { soul: `# Ada\nNow remember ${echo}.`, description: `Ada, updated (${echo})` }
          }]
        }
      }
      return "Done."
    }
    const gateway = await Support.start({
      script,
      home,
      config: {
        // (the token's user is `default`: the gateway resolves a run's custom agent for that user only)
        gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: ALICE, user: "default" }] } },
        memory: { enabled: true }
      }
    })
    gateways.push(gateway)
    const client = new Client({ apiUrl: gateway.url, apiKey: ALICE })
    const ask = async (prompt: string, configurable: Record<string, unknown>) => {
      const thread = await client.threads.create()
      await client.runs.wait(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: prompt }] },
        config: { configurable }
      })
    }
    const soul = Path.join(home, "users", "default", "agents", "ada", "SOUL.md")
    const config = Path.join(home, "users", "default", "agents", "ada", "config.yaml")
    await ask("Create Ada, my research partner", { is_bootstrap: true, agent_name: "ada" })
    assert.include(Fs.readFileSync(soul, "utf8"), "Use key [redacted], token [redacted] for everything.")
    assert.include(Fs.readFileSync(config, "utf8"), "Ada (key [redacted], token [redacted])")
    await ask("Change your soul", { agent_name: "ada" })
    assert.include(Fs.readFileSync(soul, "utf8"), "Now remember key [redacted], token [redacted].")
    assert.include(Fs.readFileSync(config, "utf8"), "Ada, updated (key [redacted], token [redacted])")
    await ask("My key is in the config", {})
    await gateway.stop()
    const memory = Path.join(home, "users", "default", "memory.json")
    assert.include(Fs.readFileSync(memory, "utf8"), "Authenticates with key [redacted], token [redacted]")
    const files = (dir: string): Array<string> =>
      Fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(Path.join(dir, e.name)) : [Path.join(dir, e.name)]
      )
    const written = files(Path.join(home, "users")).filter((f) => /\.(md|json|ya?ml)$/.test(f))
    assert.includeMembers(written.map((f) => Path.basename(f)), ["SOUL.md", "config.yaml", "memory.json"])
    for (const file of written) {
      const content = Fs.readFileSync(file, "utf8")
      assert.notInclude(content, KEY, file)
      assert.notInclude(content, ALICE, file)
    }
  })
})

describe("internal model calls", () => {
  it("a summary of the thread is made by an internal call that is never streamed", async () => {
    const SUMMARY = "SUMMARY-OF-THE-EARLIER-TALK"
    const gateway = await Support.start({
      script: (body) => (body.tools ?? []).length === 0 && lastUser(body).includes("<new_messages>")
        ? SUMMARY
        : `Answer to: ${lastUser(body).slice(-40)}`,
      config: {
        summarization: { enabled: true, trigger: { type: "messages", value: 3 }, keep: { type: "messages", value: 2 } }
      }
    })
    gateways.push(gateway)
    const client = new Client({ apiUrl: gateway.url, apiKey: null })
    const thread = await client.threads.create()
    const summaries = () =>
      gateway.scripted.requests.filter((r) => (r.tools ?? []).length === 0 && lastUser(r).includes("<new_messages>"))
    const streamed: Array<{ event: string; data: any }> = []
    for (const question of ["first question", "second question", "third question"]) {
      for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: question }] },
        streamMode: ["messages-tuple", "custom"]
      })) streamed.push(part as any)
    }
    assert.isAbove(summaries().length, 0)
    // (the answers stream in chunks of a word or two)
    const chunks = streamed.filter((p) => p.event === "messages")
    assert.include(chunks.map((p) => text(p.data[0].content)).join(""), "Answer to")
    assert.notInclude(JSON.stringify(streamed), SUMMARY)
  })

  it("a compaction streams as DeerFlow's summarization update; the next snapshot holds the kept messages", async () => {
    // DeerFlow's test_summarization_middleware::
    // test_summarization_middleware_emits_frontend_update_key_in_agent_stream: its frontend finds the compaction by
    // this key (and keeps showing the summarised messages)
    const SUMMARY = "SUMMARY-FOR-THE-UPDATES-STREAM"
    const gateway = await Support.start({
      script: (body) => (body.tools ?? []).length === 0 && lastUser(body).includes("<new_messages>")
        ? SUMMARY
        : `Answer to: ${lastUser(body).slice(-40)}`,
      config: {
        summarization: { enabled: true, trigger: { type: "messages", value: 4 }, keep: { type: "messages", value: 2 } }
      }
    })
    gateways.push(gateway)
    const client = new Client({ apiUrl: gateway.url, apiKey: null })
    const thread = await client.threads.create()
    const isCompaction = (p: { event: string; data: any }) =>
      p.event === "updates" && "DeerFlowSummarizationMiddleware.before_model" in p.data
    let streamed: Array<{ event: string; data: any }> = []
    for (const question of ["first question", "second question", "third question"]) {
      streamed = []
      for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: question }] },
        streamMode: ["updates", "values"]
      })) streamed.push(part as any)
      if (streamed.some(isCompaction)) break
    }
    const at = streamed.findIndex(isCompaction)
    assert.isAtLeast(at, 0, JSON.stringify(streamed.filter((p) => p.event === "updates")))
    const update = streamed[at]!.data["DeerFlowSummarizationMiddleware.before_model"]
    assert.strictEqual(update.summary_text, SUMMARY)
    assert.deepInclude(update.messages[0], { type: "remove", id: "__remove_all__" })
    const kept = update.messages.slice(1)
    assert.isAbove(kept.length, 0)
    assert.isFalse(kept.some((m: any) => m.type === "human" && m.name === "summary"))
    // the snapshot after the compaction is the compacted thread, not an empty one
    const values = streamed.slice(at).find((p) => p.event === "values")!.data
    assert.deepStrictEqual(values.messages.map((m: any) => m.id), kept.map((m: any) => m.id))
    assert.strictEqual(values.summary_text, SUMMARY)
  })
})
