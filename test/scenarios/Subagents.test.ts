/**
 * Delegation end to end: the lead agent built by the factory (subagents enabled), the real `openai` client
 * against the loopback SCRIPTED Chat Completions server, SQLite under a temporary data directory, the real
 * sandbox tools. The script answers each request by who sent it (the lead agent, a subagent by the tag in its
 * task prompt, or a summary request) and by how many answers that sender already had.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { threadPaths } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { Message, ToolMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import * as TS from "../../src/state/ThreadState.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const SLOW = 120_000

// ---------------------------------------------------------------------------------------------------------
// The script

const textOf = (m: { readonly [key: string]: unknown }): string =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")

/** Who sent a request: "summary", "lead", or the tag (`TASK-x`) of a subagent's task prompt. */
const sender = (body: ChatRequestBody): string => {
  const users = body.messages.filter((m) => m.role === "user").map(textOf)
  if (users.some((t) => t.includes("You are compacting the history"))) return "summary"
  const system = body.messages[0]?.role === "system" ? textOf(body.messages[0]) : ""
  // (general-purpose's DeerFlow prompt, or the custom types' of these tests)
  const subagent = system.startsWith("You are a general-purpose subagent working on a delegated task.") ||
    system.includes("The lead agent gave you one task")
  if (!subagent) return "lead"
  const tag = users.join("\n").match(/TASK-[A-Z0-9]+/)
  return tag?.[0] ?? "unknown-subagent"
}

/** How many answers the sender already got in this conversation. */
const stepOf = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "assistant").length

type Plan = Record<string, (step: number, body: ChatRequestBody) => Turn | undefined>

const routed = (plan: Plan) => (body: ChatRequestBody): Turn | undefined => {
  const who = sender(body)
  const answer = plan[who]
  if (answer === undefined) throw new Error(`no script for ${who}`)
  return answer(stepOf(body), body)
}

const task = (id: string, tag: string, description: string, type = "general-purpose") => ({
  id,
  name: "task",
  arguments: { description, prompt: `${tag}: ${description}. Report what you did.`, subagent_type: type }
})

const write = (id: string, file: string, content: string) => ({
  id,
  name: "write_file",
  arguments: { description: "save", path: `/mnt/user-data/workspace/${file}`, content }
})

// ---------------------------------------------------------------------------------------------------------
// The app

const setup = (plan: Plan, config: Record<string, unknown> = {}, tools: ReadonlyArray<Tool.Tool> = []) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(routed(plan))
    const home = tempDir("antler-subagents-")
    const app = yield* ConfigFile.fromObject({
      models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-subagents" }],
      // memory off: its update would be one more model call the script does not expect
      memory: { enabled: false },
      ...config
    }, { home })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    const context = yield* Layer.build(
      App.factoryLayer(app, choice, { agent: { tools } }).pipe(Layer.provide(NodeFileSystem.layer))
    )
    return {
      server,
      home,
      factory: Context.get(context, Factory.AgentFactory),
      store: Context.get(context, ThreadStore)
    }
  })

const settings = { model_name: "scripted", subagent_enabled: true }

const collect = (stream: Stream.Stream<RunEvent>) =>
  Effect.map(Stream.runCollect(stream), (chunk) => Array.from(chunk))

const customs = (events: ReadonlyArray<RunEvent>, name: string) =>
  events.flatMap((e) => (e.type === "custom" && e.name === name ? [e.data as Record<string, any>] : []))

const byTask = (events: ReadonlyArray<RunEvent>, name: string, taskId: string) =>
  customs(events, name).filter((d) => d.task_id === taskId)

const loadState = (store: ThreadStore["Type"], threadId: string) =>
  Effect.map(store.load(threadId), (loaded) => Option.getOrThrow(loaded).state)

const taskResults = (messages: ReadonlyArray<Message>) =>
  messages.filter((m): m is ToolMessage => m.type === "tool" && m.name === "task")

/** A tool two subagents call to meet: each waits (up to 20 s) for the other to arrive. */
const rendezvous = (arrived: Record<string, Deferred.Deferred<void>>) =>
  Tool.make({
    name: "rendezvous",
    description: "Wait for the other subagent",
    parameters: Schema.Struct({ who: Schema.String, other: Schema.String }),
    handler: ({ other, who }) =>
      Effect.gen(function*() {
        yield* Deferred.succeed(arrived[who]!, undefined)
        const met = yield* Deferred.await(arrived[other]!).pipe(Effect.timeoutOption(Duration.seconds(20)))
        return Option.isSome(met) ? `met ${other}` : `${other} never came`
      })
  })

// ---------------------------------------------------------------------------------------------------------

describe("delegation through task", () => {
  it.live("three task calls with a limit of 2: two run concurrently in the shared workspace, the third is refused", () =>
    Effect.scoped(Effect.gen(function*() {
      const arrived = { A: yield* Deferred.make<void>(), B: yield* Deferred.make<void>() }
      const subagent = (who: "A" | "B", other: string) => (step: number): Turn =>
        step === 0
          ? {
            toolCalls: [
              { id: `meet_${who}`, name: "rendezvous", arguments: { who, other } },
              write(`write_${who}`, `${who.toLowerCase()}.md`, `written by ${who}`)
            ]
          }
          : `${who} wrote ${who.toLowerCase()}.md.`
      const { factory, home, server, store } = yield* setup({
        lead: (step) =>
          step === 0
            ? {
              content: "I will split this in three.",
              toolCalls: [
                task("call_A", "TASK-A", "Write part A"),
                task("call_B", "TASK-B", "Write part B"),
                task("call_C", "TASK-C", "Write part C")
              ]
            }
            : "Parts A and B are written; I will do part C next.",
        "TASK-A": subagent("A", "B"),
        "TASK-B": subagent("B", "A"),
        "TASK-C": () => "C should never run"
      }, {}, [rendezvous(arrived)])

      const events = yield* collect(factory.run({
        threadId: "deleg",
        prompt: "Write parts A, B and C",
        settings: { ...settings, max_concurrent_subagents: 2 }
      }))
      const end = events.at(-1)!
      assert.deepInclude(end, { type: "run_end", status: "success", stop_reason: "completed" })

      // the third call was cut from the message, the model was told why, and the user saw it
      const state = yield* loadState(store, "deleg")
      const dispatch = state.messages.find((m) => m.type === "ai" && M.toolCalls(m).length > 0)!
      assert.deepStrictEqual(M.toolCalls(dispatch).map((c) => c.id), ["call_A", "call_B"])
      const [limit] = customs(events, "subagent_limit")
      assert.deepStrictEqual(limit!.dropped.map((d: { id: string }) => d.id), ["call_C"])
      assert.include(limit!.message, "at most 2 task calls run per response")
      // the prompt stated the same limits and the subagent types
      const prompt = textOf(server.requests.find((b) => sender(b) === "lead")!.messages[0]!)
      assert.include(prompt, "MAXIMUM 2 `task` CALLS PER RESPONSE")
      assert.include(prompt, "MAXIMUM 6 `task` CALLS PER RUN")
      assert.match(prompt, /<subagent_system>[\s\S]*- \*\*general-purpose\*\*: [\s\S]*<\/subagent_system>/)
      const followUp = server.requests.filter((b) => sender(b) === "lead")[1]!
      const told = followUp.messages.map(textOf).find((t) => t.includes("Not run:"))
      assert.include(told, `"Write part C" (general-purpose)`)
      assert.isFalse(server.requests.some((b) => sender(b) === "TASK-C"))
      assert.lengthOf(customs(events, "task_started"), 2)

      // the two subagents ran at the same time: each met the other, and their spans overlap
      const span = (id: string) => ({
        start: byTask(events, "task_started", id)[0]!.timestamp as string,
        end: byTask(events, "task_completed", id)[0]!.timestamp as string
      })
      const a = span("call_A")
      const b = span("call_B")
      assert.isTrue(a.start <= b.end && b.start <= a.end, JSON.stringify({ a, b }))
      const met = customs(events, "task_running").filter(
        (d) => d.message.type === "tool" && d.message.name === "rendezvous"
      )
      assert.sameMembers(met.map((d) => M.text(d.message)), ["met B", "met A"])

      // their tool calls landed in the parent thread's workspace
      const workspace = threadPaths(home, "default", "deleg").workspace
      assert.strictEqual(Fs.readFileSync(Path.join(workspace, "a.md"), "utf8"), "written by A")
      assert.strictEqual(Fs.readFileSync(Path.join(workspace, "b.md"), "utf8"), "written by B")

      // each result carries the status contract
      const results = taskResults(state.messages)
      assert.deepStrictEqual(results.map((r) => r.tool_call_id), ["call_A", "call_B"])
      const resultA = results[0]!
      assert.strictEqual(M.text(resultA), "Task Succeeded. Result: A wrote a.md.")
      const kwargs = resultA.additional_kwargs!
      assert.strictEqual(kwargs.subagent_status, "completed")
      assert.strictEqual(kwargs.subagent_result_brief, "A wrote a.md.")
      assert.strictEqual(kwargs.subagent_result_sha256, SubagentStatus.sha256("A wrote a.md."))
      assert.strictEqual(kwargs.subagent_model_name, "scripted")
      assert.isTrue(Schema.is(SubagentStatus.TokenUsage)(kwargs.subagent_token_usage))
      assert.isAbove((kwargs.subagent_token_usage as SubagentStatus.TokenUsage).total_tokens, 0)
      assert.isUndefined(kwargs.subagent_error)

      // the ledger knows both, finished, for this run
      assert.deepStrictEqual(
        state.delegations.map((d) => [d.id, d.status, d.subagent_type, d.description]),
        [
          ["call_A", "completed", "general-purpose", "Write part A"],
          ["call_B", "completed", "general-purpose", "Write part B"]
        ]
      )
      assert.isTrue(Schema.is(TS.ThreadState)(state))
    })), SLOW)

  it.live("a subagent that loops is stopped by its own LoopDetection (completed, capped); a slow one times out", () =>
    Effect.scoped(Effect.gen(function*() {
      const { factory, home, store } = yield* setup({
        lead: (step) =>
          step === 0
            ? {
              toolCalls: [task("call_loop", "TASK-LOOP", "Read the data"), task("call_slow", "TASK-SLOW", "Think long", "slow")]
            }
            : "One looped, one timed out.",
        "TASK-LOOP": (step) => ({
          toolCalls: [{ id: `read_${step}`, name: "read_file", arguments: { description: "read", path: "data.txt" } }]
        }),
        "TASK-SLOW": () => ({ hang: true })
      }, {
        subagents: {
          custom_agents: {
            slow: {
              description: "A subagent that takes its time",
              system_prompt: "The lead agent gave you one task. Take your time.",
              timeout_seconds: 1
            }
          }
        }
      })
      const workspace = threadPaths(home, "default", "capped").workspace
      Fs.mkdirSync(workspace, { recursive: true })
      Fs.writeFileSync(Path.join(workspace, "data.txt"), "some data\n")

      const events = yield* collect(factory.run({ threadId: "capped", prompt: "Go", settings }))
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
      const state = yield* loadState(store, "capped")
      const [looped, slow] = taskResults(state.messages)

      // the loop: five identical reads, the fifth answer stopped by the subagent's own guard
      const reads = byTask(events, "task_running", "call_loop").filter((d) => d.message.type === "tool")
      assert.lengthOf(reads, 4)
      assert.match(M.text(looped!), /^Task Succeeded \(capped: repeated tool-call loop\)\. Result: /)
      assert.strictEqual(looped!.additional_kwargs!.subagent_status, "completed")
      assert.strictEqual(looped!.additional_kwargs!.subagent_stop_reason, "loop_capped")
      assert.strictEqual(byTask(events, "task_completed", "call_loop")[0]!.stop_reason, "loop_capped")

      // the timeout
      assert.strictEqual(M.text(slow!), "Task timed out. Error: Execution timed out after 1 seconds")
      assert.strictEqual(slow!.additional_kwargs!.subagent_status, "timed_out")
      assert.strictEqual(slow!.additional_kwargs!.subagent_error, "Execution timed out after 1 seconds")
      assert.lengthOf(byTask(events, "task_timed_out", "call_slow"), 1)

      assert.deepStrictEqual(
        state.delegations.map((d) => [d.id, d.status, d.stop_reason]),
        [["call_loop", "completed", "loop_capped"], ["call_slow", "timed_out", undefined]]
      )
    })), SLOW)

  it.live("cancelling the parent cancels its subagents and loses no completed step", () =>
    Effect.scoped(Effect.gen(function*() {
      const { factory, server, store } = yield* setup({
        lead: () => ({
          content: "Two tasks.",
          toolCalls: [task("call_quick", "TASK-QUICK", "Quick note"), task("call_hang", "TASK-HANG", "Endless work")]
        }),
        "TASK-QUICK": (step) => (step === 0 ? { toolCalls: [write("w", "quick.md", "done")] } : "Quick note written."),
        "TASK-HANG": () => ({ content: "Working on it", stall: true })
      })
      const quickDone = yield* Deferred.make<void>()
      const seen: Array<RunEvent> = []
      const agent = yield* Effect.flatMap(factory.resolve(settings), factory.agent)
      // Ctrl-C in the CLI interrupts the run's fiber; `turn` reports every event, the last ones included
      const running = yield* Effect.fork(agent.turn({ threadId: "cancel", prompt: "Do both", options: { modelName: "scripted" } }, (event) => {
        seen.push(event)
        if (event.type === "custom" && event.name === "task_completed") Deferred.unsafeDone(quickDone, Effect.void)
      }))
      yield* Deferred.await(quickDone)
      yield* Fiber.interrupt(running)
      assert.deepInclude(seen.at(-1)!, { type: "run_end", status: "cancelled" })

      // the hanging subagent was cancelled with its parent, and its model call abandoned
      assert.lengthOf(byTask(seen, "task_cancelled", "call_hang"), 1)
      const hangCall = server.requests.findIndex((b) => sender(b) === "TASK-HANG")
      yield* Effect.sleep(Duration.millis(20)).pipe(
        Effect.repeat({ until: () => server.aborted.includes(hangCall), times: 500 })
      )
      assert.include(server.aborted, hangCall)

      // the run is recorded cancelled; the dispatch and the finished task's result are saved
      const loaded = Option.getOrThrow(yield* store.load("cancel"))
      assert.deepStrictEqual(loaded.runs.map((r) => r.status), ["cancelled"])
      const results = taskResults(loaded.state.messages)
      const quick = results.find((r) => r.tool_call_id === "call_quick")!
      assert.strictEqual(M.text(quick), "Task Succeeded. Result: Quick note written.")
      const hang = results.find((r) => r.tool_call_id === "call_hang")!
      assert.match(M.text(hang), /interrupted/)
      assert.deepStrictEqual(
        loaded.state.delegations.map((d) => [d.id, d.status]),
        [["call_quick", "completed"], ["call_hang", "cancelled"]]
      )
    })), SLOW)

  it.live("after a forced summarisation, the lead's next request still shows what it delegated", () =>
    Effect.scoped(Effect.gen(function*() {
      const { factory, server, store } = yield* setup({
        lead: (step, body) => {
          const last = textOf(body.messages.filter((m) => m.role === "user").at(-1)!)
          if (last.includes("Research the market")) {
            return step === 0 ? { toolCalls: [task("call_research", "TASK-R", "Research the market")] } : "Research done."
          }
          return "Here is the plan, based on the research."
        },
        "TASK-R": () => "The market grew 12% last year.",
        summary: () => "## Summary\nThe user asked for market research; it was delegated and returned."
      }, {
        summarization: { enabled: true, trigger: { type: "messages", value: 5 }, keep: { type: "messages", value: 2 } }
      })
      yield* collect(factory.run({ threadId: "summ", prompt: "Research the market", settings }))
      const events = yield* collect(factory.run({ threadId: "summ", prompt: "Now make a plan", settings }))
      assert.deepInclude(events.at(-1)!, { type: "run_end", status: "success" })
      assert.isAbove(customs(events, "summarization").length, 0)

      const request = server.requests.filter((b) => sender(b) === "lead").at(-1)!
      const texts = request.messages.map(textOf)
      // the task call and its result are gone from the request, the summary and the ledger are there
      assert.isFalse(request.messages.some((m) => m.role === "tool"))
      const data = texts.find((t) => t.startsWith("<durable_context_data>"))!
      assert.include(data, "## Conversation summary so far")
      assert.include(data, "## Work already delegated")
      assert.include(data, "- [completed] Research the market (via general-purpose; completed result; do NOT delegate again")
      assert.include(data, "-> The market grew 12% last year.")
      const state = yield* loadState(store, "summ")
      assert.deepStrictEqual(state.delegations.map((d) => d.status), ["completed"])
    })), SLOW)
})
