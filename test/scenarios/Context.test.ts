/**
 * The context half of the lead agent end to end, as the CLI wires it (App.factoryLayer: the real `openai`
 * client against the loopback scripted server, SQLite, the local sandbox, file memory), checked on the exact
 * bytes of the Chat Completions requests:
 * - prefix-cache stability over three turns crossing midnight on the TestClock, with one summarisation;
 * - `/deep-research <question>` carries that SKILL.md; an active skill's allowed-tools refuses another tool;
 * - memory over two runs: a fact stated in run 1 is in run 2's first request;
 * - plan mode: todos written, shown, kept across a summarisation with the reminder;
 * - a vision model gets the image after view_image; a model without vision has no such tool.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Todo from "../../src/middleware/Todo.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import * as Render from "../../src/programs/cli/Render.js"
import { Memory } from "../../src/services/Memory.js"
import type { RunEndEvent } from "../../src/services/RunEvents.js"
import { threadPaths } from "../../src/services/Sandbox.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as MemoryDoc from "../../src/state/Memory.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const FIXTURE = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/config.example.yaml")
const SLOW = 120_000

type Body = ScriptedChatServer.ChatRequestBody
type WireMessage = Body["messages"][number]

/** A request as sent: its raw text, its body, and each message exactly as serialised in that text. */
interface Wire {
  readonly raw: string
  readonly body: Body
  readonly messages: ReadonlyArray<string>
}

/** The requests a server received, each checked to hold exactly its serialised messages (byte-level views). */
const wireOf = (server: ScriptedChatServer.ScriptedChatServer): ReadonlyArray<Wire> =>
  server.bodies.map((raw) => {
    const body = JSON.parse(raw) as Body
    const messages = body.messages.map((m) => JSON.stringify(m))
    assert.include(raw, `"messages":[${messages.join(",")}]`, "the raw body holds the messages as serialised")
    return { raw, body, messages }
  })

const textOf = (message: WireMessage): string => {
  const content = message.content
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((part: { text?: unknown }) => (typeof part?.text === "string" ? part.text : "")).join("\n")
}

/** A request the agent made (it starts with the system prompt), not an internal one (summary, memory). */
const isAgent = (w: Wire) => w.body.messages[0]?.role === "system"

/** Index of the newest turn: the latest user message framed as user input (only the latest one is). */
const newestTurn = (w: Wire) =>
  w.body.messages.findLastIndex((m) => m.role === "user" && textOf(m).startsWith("--- BEGIN USER INPUT ---"))

const isInternal = (body: Body, marker: string) =>
  body.messages[0]?.role === "user" && textOf(body.messages[0]!).includes(marker)

const MEMORY_PROMPT = "You maintain the long-term memory"
/** The write gate's labels of a fact that is the user's (DeerFlow test_memory_updater's `_DURABLE_USER_FACT`). */
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const
const SUMMARY_PROMPT = "You are compacting the history"

/** The app as the CLI builds it, over a config in config.yaml's shape pointing at the scripted server. */
const appLayer = (
  server: ScriptedChatServer.ScriptedChatServer,
  home: string,
  extra: Record<string, unknown> = {},
  model: Record<string, unknown> = {}
) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const app = yield* ConfigFile.fromObject({
      models: [{ name: "main", model: "scripted", base_url: server.url, api_key: "sk-test-key", ...model }],
      timezone: "UTC",
      ...extra
    }, { home, source: FIXTURE })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    return App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer))
  }))

type AppContext = Context.Context<Factory.AgentFactory | Memory | ThreadStore>

const turn = (app: AppContext, threadId: string, prompt: string, settings: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const factory = Context.get(app, Factory.AgentFactory)
    const events = Chunk.toReadonlyArray(
      yield* Stream.runCollect(factory.run({ threadId, prompt, settings: { model_name: "main", ...settings } }))
    )
    const end = events.at(-1) as RunEndEvent
    assert.strictEqual(end.type, "run_end")
    assert.strictEqual(end.status, end.status === "success" ? "success" : JSON.stringify(end), "the run succeeded")
    return events
  })

const call = (name: string, args: Record<string, unknown>) => ({
  toolCalls: [{ name, arguments: { description: "test", ...args } }]
})

describe("prefix-cache stability", () => {
  it.effect("three turns over midnight, one summary: one system message; each request a prefix of the next", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2026, 4, 8, 23, 40))
      const home = tempDir("antler-prefix-")
      // something remembered before the thread starts: its first turn carries a memory block
      yield* FileMemory.writeDocument(Path.join(home, "users", "default", "memory.json"), MemoryDoc.applyUpdate(
        MemoryDoc.empty(),
        { newFacts: [{ content: "Hikes in the Alps every summer", category: "context", confidence: 0.9, ...USER }] },
        { now: "2026-05-01T00:00:00.000Z", maxFacts: 100, threshold: 0.7, newId: () => "fact_1", source: "earlier" }
      )).pipe(Effect.provide(NodeFileSystem.layer))
      let agent = 0
      const server = yield* ScriptedChatServer.start((body) => {
        if (isInternal(body, SUMMARY_PROMPT)) return "## Session intent\nA packing list for a hike. SUMMARY-MARK"
        if (isInternal(body, MEMORY_PROMPT)) return "{}"
        switch (agent++) {
          case 0:
            return call("write_file", {
              path: "/mnt/user-data/workspace/list.md",
              content: "- water\n- map\n- jacket\n"
            })
          case 1:
            return "Saved the list."
          case 2:
            return call("read_file", { path: "list.md" })
          case 3:
            return "It has 3 items."
          case 4:
            return call("ls", { path: "/mnt/user-data/workspace" })
          default:
            return "Still there."
        }
      })
      const app = yield* Layer.build(appLayer(server, home, {
        summarization: {
          enabled: true,
          trigger: [{ type: "messages", value: 12 }],
          keep: { type: "messages", value: 4 }
        },
        memory: { backend_config: { debounce_seconds: 86400 } }
      }))
      yield* turn(app, "prefix", "Make a packing list for my hike")
      yield* TestClock.adjust("10 minutes")
      yield* turn(app, "prefix", "How many items are on it?")
      yield* TestClock.adjust("20 minutes") // 00:10 the next day
      yield* turn(app, "prefix", "Is the file still there?")

      const all = wireOf(server)
      const agents = all.filter(isAgent)
      const internal = all.filter((w) => !isAgent(w))
      assert.lengthOf(agents, 6)
      // one summarisation (the messages it removed were also read for memory at once: internal calls too)
      assert.lengthOf(internal.filter((w) => isInternal(w.body, SUMMARY_PROMPT)), 1)
      assert.isTrue(internal.every((w) => isInternal(w.body, SUMMARY_PROMPT) || isInternal(w.body, MEMORY_PROMPT)))

      // the system message: byte-identical in every request, and nothing dated in it
      const system = agents[0]!.messages[0]!
      for (const w of agents) assert.strictEqual(w.messages[0], system)
      assert.notMatch(system, /2026-05-0[89]/)

      // the date and memory travel as hidden messages: turn 1 says Friday (and what is remembered), turn 3 Saturday
      const first = agents[0]!.body.messages.map(textOf)
      assert.include(first[1]!, "<current_date>2026-05-08, Friday</current_date>")
      assert.include(first[2]!, "Hikes in the Alps every summer")
      const third = agents[4]!.body.messages.map(textOf)
      const at = newestTurn(agents[4]!)
      assert.include(third[at - 1]!, "<current_date>2026-05-09, Saturday</current_date>")

      // each request's messages before its newest turn are a byte-identical prefix of the next request's,
      // except across the summarisation (between requests 3 and 4), which replaced the start of the history
      const summaryAt = all.findIndex((w) => isInternal(w.body, SUMMARY_PROMPT))
      for (let k = 0; k + 1 < agents.length; k++) {
        const [a, b] = [agents[k]!, agents[k + 1]!]
        const summarisedBetween = all.indexOf(a) < summaryAt && all.indexOf(b) > summaryAt
        if (summarisedBetween) {
          assert.isTrue(b.body.messages.some((m) => textOf(m).includes("SUMMARY-MARK")), "the summary replaced them")
          continue
        }
        const before = a.messages.slice(0, newestTurn(a))
        assert.deepStrictEqual(b.messages.slice(0, before.length), before, `request ${k} → ${k + 1}`)
        // within a turn, the whole request is a prefix of the next
        if (newestTurn(a) === newestTurn(b)) assert.deepStrictEqual(b.messages.slice(0, a.messages.length), a.messages)
      }
    })), SLOW)
})

describe("skills", () => {
  it.scoped("/deep-research <question> sends that SKILL.md; /skill-reviewer's allowed-tools refuses another tool", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-slash-")
      const body = Fs.readFileSync(Path.join(Path.dirname(FIXTURE), "skills/public/deep-research/SKILL.md"), "utf8")
      let agent = 0
      const server = yield* ScriptedChatServer.start((b) => {
        if (isInternal(b, MEMORY_PROMPT)) return "{}"
        switch (agent++) {
          case 0:
            return "Researching."
          case 1:
            return call("bash", { command: "ls" })
          default:
            return "I will use review_skill_package instead."
        }
      })
      const app = yield* Layer.build(appLayer(server, home, { memory: { enabled: false } }))
      yield* turn(app, "slash", "/deep-research what is prompt caching?")
      const events = yield* turn(app, "slash", "/skill-reviewer review /mnt/skills/public/deep-research")
      const [research, reviewer, afterRefusal] = wireOf(server)
      // the whole SKILL.md is in the request (escaped), right before the user's message
      const activation = research!.body.messages.find((m) => textOf(m).startsWith("<slash_skill_activation>"))!
      const escaped = body.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
      assert.include(textOf(activation), escaped)
      assert.include(textOf(activation), "<user_request>\nwhat is prompt caching?\n</user_request>")
      // while skill-reviewer is active the model is offered its allowed-tools (and the framework tools) only
      const offered = (w: Wire) =>
        (w.body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name).sort()
      assert.deepStrictEqual(offered(reviewer!), ["read_file", "review_skill_package"])
      assert.include(offered(research!), "bash")
      const refusal = afterRefusal!.body.messages.at(-1)!
      assert.strictEqual(refusal.role, "tool")
      assert.match(textOf(refusal), /^Error: Tool 'bash' is not allowed by the active skill policy\./)
      assert.include(textOf(refusal), "The active skill skill-reviewer allows only: ")
      assert.isTrue(events.some((e) => e.type === "custom" && e.name === "skill_activation"))
    }), SLOW)
})

describe("skills read with read_file", () => {
  it.live("a SKILL.md the model reads is kept as loaded: its allowed-tools hold from then on, also in the next turn", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-skill-read-")
      let agent = 0
      const server = yield* ScriptedChatServer.start((b) => {
        if (isInternal(b, MEMORY_PROMPT)) return "{}"
        switch (agent++) {
          case 0:
            return call("read_file", { path: "/mnt/skills/public/skill-reviewer/SKILL.md" })
          case 1:
            return call("bash", { command: "ls" })
          case 2:
            return "Reviewing with read_file only."
          default:
            return "Still reviewing."
        }
      })
      const app = yield* Layer.build(appLayer(server, home, { memory: { enabled: false } }))
      yield* turn(app, "skill-read", "Review my skill package")
      yield* turn(app, "skill-read", "Go on")
      const requests = wireOf(server).filter(isAgent)
      const refusal = requests[2]!.body.messages.at(-1)!
      assert.strictEqual(refusal.role, "tool")
      assert.match(textOf(refusal), /^Error: Tool 'bash' is not allowed by the active skill policy\./)
      // the skill is listed as loaded in the durable context, and the next turn is offered its tools only
      assert.isTrue(requests[3]!.body.messages.some((m) =>
        textOf(m).includes("- skill-reviewer: ") && textOf(m).includes("/mnt/skills/public/skill-reviewer/SKILL.md")
      ))
      const offered = (requests[3]!.body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name)
      assert.deepStrictEqual(offered.sort(), ["read_file", "review_skill_package"])
    })), SLOW)
})

describe("memory", () => {
  it.live("a fact stated in run 1 is in run 2's first request (another thread); the update was internal", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-memory-")
      const server = yield* ScriptedChatServer.start((body) => {
        if (isInternal(body, MEMORY_PROMPT)) {
          return JSON.stringify({
            newFacts: [
              { content: "Uses uv, never pip, for Python projects", category: "preference", confidence: 0.95, ...USER }
            ]
          })
        }
        return "Noted."
      })
      const app = yield* Layer.build(appLayer(server, home))
      const memory = Context.get(app, Memory)
      const events = yield* turn(app, "run-1", "For Python I always use uv, never pip.")
      yield* memory.flush
      yield* turn(app, "run-2", "Set up a new Python project for me.")
      const [first, update, second] = wireOf(server)
      assert.isTrue(isAgent(first!))
      assert.isTrue(isInternal(update!.body, MEMORY_PROMPT), "the update is an internal request")
      assert.isUndefined(update!.body.tools)
      assert.include(textOf(update!.body.messages[0]!), "For Python I always use uv, never pip.")
      assert.notInclude(first!.raw, "Uses uv, never pip")
      const injected = second!.body.messages.find((m) =>
        m.role === "user" && textOf(m).startsWith("<memory>\n")
      )
      assert.isDefined(injected)
      assert.include(textOf(injected!), "- [preference | 0.95] Uses uv, never pip, for Python projects")
      // never streamed to the user: run 1's events have no token of the update's answer
      assert.isFalse(events.some((e) => e.type === "token" && (e.text ?? "").includes("newFacts")))
      // counted for the thread under its purpose
      const store = Context.get(app, ThreadStore)
      const thread = yield* store.load("run-1")
      assert.strictEqual(thread._tag === "Some" && thread.value.state.token_usage?.by_purpose?.memory?.calls, 1)
    })), SLOW)
})

describe("plan mode", () => {
  it.scoped("todos are written, shown as they change, and kept across a summarisation with the reminder", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-plan-")
      const todos = (statuses: ReadonlyArray<string>) => ({
        toolCalls: [{
          name: "write_todos",
          arguments: {
            todos: ["Pick a route", "Check the weather", "Pack"].map((content, i) => ({ content, status: statuses[i] }))
          }
        }]
      })
      let agent = 0
      const server = yield* ScriptedChatServer.start((body) => {
        if (isInternal(body, SUMMARY_PROMPT)) return "## Summary\nPlanning a hike; route picked."
        if (isInternal(body, MEMORY_PROMPT)) return "{}"
        switch (agent++) {
          case 0:
            return todos(["in_progress", "pending", "pending"])
          case 1:
            return todos(["completed", "in_progress", "pending"])
          case 2:
            return "Route picked; checking the weather next."
          default:
            return "Sunny on Saturday."
        }
      })
      const app = yield* Layer.build(appLayer(server, home, {
        summarization: {
          enabled: true,
          trigger: [{ type: "messages", value: 8 }],
          keep: { type: "messages", value: 2 }
        },
        memory: { enabled: false }
      }))
      const first = yield* turn(app, "plan", "Plan a hike for Saturday", { is_plan_mode: true })
      const shown = first.map(Render.human({ color: false })).join("")
      assert.include(shown, "todos\n  [~] Pick a route\n  [ ] Check the weather\n  [ ] Pack\n")
      assert.include(shown, "todos\n  [x] Pick a route\n  [~] Check the weather\n  [ ] Pack\n")
      yield* turn(app, "plan", "What's the weather?", { is_plan_mode: true })
      const agents = wireOf(server).filter(isAgent)
      // plan mode: the guidance is part of the (unchanging) system message, and write_todos is offered
      assert.include(textOf(agents[0]!.body.messages[0]!), "<todo_list_system>")
      assert.strictEqual(agents.at(-1)!.messages[0], agents[0]!.messages[0])
      // the summary took the write_todos calls out of the history; the list came back as a reminder
      const last = agents.at(-1)!.body.messages.map(textOf)
      assert.isTrue(last.some((t) => t.includes("Planning a hike; route picked.")))
      assert.isFalse(agents.at(-1)!.raw.includes("\"name\":\"write_todos\",\"arguments\""))
      const reminder = last.find((t) => t.includes("Your todo list from earlier"))
      assert.isDefined(reminder)
      assert.include(reminder!, "- [completed] Pick a route\n- [in_progress] Check the weather\n- [pending] Pack")
      const saved = yield* Context.get(app, ThreadStore).load("plan")
      const state = saved._tag === "Some" ? saved.value.state : undefined
      assert.deepStrictEqual(state?.todos?.map((t) => t.status), ["completed", "in_progress", "pending"])
      assert.isTrue(state!.messages.some((m) => m.name === Todo.REMINDER_NAME))
      // without plan mode the agent has no write_todos
      const factory = Context.get(app, Factory.AgentFactory)
      const plain = yield* Effect.flatMap(factory.resolve({ model_name: "main" }), factory.agent)
      assert.isFalse(plain.tools.some((t) => t.name === "write_todos"))
    })), SLOW)
})

describe("images", () => {
  // A 1x1 PNG.
  const PNG = Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
    "base64"
  )

  it.scoped("a vision model gets the image after view_image, as an image part; without vision, no view_image", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-vision-")
      const workspace = threadPaths(home, "default", "eyes").workspace
      Fs.mkdirSync(workspace, { recursive: true })
      Fs.writeFileSync(Path.join(workspace, "dot.png"), PNG)
      let agent = 0
      const server = yield* ScriptedChatServer.start((body) => {
        if (isInternal(body, MEMORY_PROMPT)) return "{}"
        if (agent++ > 0) return "A single dot."
        return { toolCalls: [{ name: "view_image", arguments: { image_path: "/mnt/user-data/workspace/dot.png" } }] }
      })
      const app = yield* Layer.build(appLayer(server, home, { memory: { enabled: false } }, { supports_vision: true }))
      yield* turn(app, "eyes", "What is in dot.png?")
      const [, after] = wireOf(server)
      const image = after!.body.messages.at(-1)!
      assert.strictEqual(image.role, "user")
      assert.deepInclude(image.content as ReadonlyArray<unknown>, {
        type: "image_url",
        image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` }
      })
      assert.strictEqual(after!.body.messages.at(-2)!.role, "tool")
      const saved = yield* Context.get(app, ThreadStore).load("eyes")
      assert.deepStrictEqual(saved._tag === "Some" && saved.value.state.viewed_images, {})

      const blindServer = yield* ScriptedChatServer.start(["ok"])
      const blind = yield* Layer.build(appLayer(blindServer, tempDir("antler-blind-"), { memory: { enabled: false } }))
      const factory = Context.get(blind, Factory.AgentFactory)
      const agentOf = yield* Effect.flatMap(factory.resolve({ model_name: "main" }), factory.agent)
      assert.isFalse(agentOf.tools.some((t) => t.name === "view_image"))
      assert.notInclude(agentOf.systemPrompt, "view_image")
    }), SLOW)
})

