/**
 * Fuzzing the whole lead chain with hostile model servers (issue 7, item 10): generated responses — random
 * argument shapes and depths (up to 6,000 levels), repeated and empty tool-call ids, odd finish reasons and
 * usage, text full of escape sequences and secrets, HTTP failures with huge retry-afters, HTML and JSON
 * bodies where a stream was asked for, streams cut mid-frame, servers that never answer — go through the real
 * openai client against the loopback server, then `LeadAgent.stack` over a real SQLite store.
 *
 * For every generated case: the run ends with exactly one `run_end` (its last event) with no crash behind it,
 * the saved thread loads, every tool call in it is answered exactly once under an id of its own, nothing
 * shown to a person holds a control character or the configured secret, and the database never holds the
 * secret either. One server, one store, one pair of clients serve all the cases.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import * as Render from "../../src/programs/cli/Render.js"
import type { AppConfig } from "../../src/services/AppConfig.js"
import { AppConfigSchema, AppConfigService } from "../../src/services/AppConfig.js"
import { ModelService } from "../../src/services/ModelService.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import type { SandboxProvider } from "../../src/services/Sandbox.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"

const RUNS = Number(process.env.HOSTILE_FUZZ_RUNS ?? 1000)
const SECRET = "sk-fuzz-secret-424242"
const ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\x9b31m\u202e"
/** Error names that mean a bug escaped (a defect), not a failure the harness handled. */
const CRASHES = new Set(["Error", "RangeError", "TypeError", "ReferenceError", "SyntaxError", "EvalError", "URIError"])

// ---------------------------------------------------------------------------------------------------------
// Generated hostile turns

const fc = FastCheck

const hostileText = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      ESCAPES,
      `my key is ${SECRET}`,
      `Authorization: Bearer ${SECRET}`,
      "http://user:pw-123456@host/v1",
      "\r\n",
      "<think>",
      ""
    )
  }
)
const content = fc.array(hostileText, { maxLength: 4 }).map((parts) => parts.join(" "))
const depth = fc.oneof(fc.integer({ min: 1, max: 80 }), fc.integer({ min: 60, max: 6000 }))
/** Tool-call arguments, described (the deep ones are built when served, so a counterexample stays short). */
type ArgSpec =
  | { readonly object: string }
  | { readonly json: string }
  | { readonly arrays: number }
  | { readonly objects: number }
  | { readonly broken: string }
  | { readonly question: string }
const argSpec: FastCheck.Arbitrary<ArgSpec> = fc.oneof(
  { weight: 4, arbitrary: hostileText.map((text) => ({ object: text })) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => ({ json: JSON.stringify(value) ?? "null" })) },
  { weight: 2, arbitrary: depth.map((d) => ({ arrays: d })) },
  { weight: 1, arbitrary: depth.map((d) => ({ objects: d })) },
  { weight: 1, arbitrary: fc.string({ maxLength: 16 }).map((text) => ({ broken: text })) },
  { weight: 1, arbitrary: hostileText.map((text) => ({ question: text })) }
)
const argumentsOf = (spec: ArgSpec): string | { readonly [key: string]: unknown } =>
  "object" in spec
    ? { text: spec.object }
    : "json" in spec
    ? spec.json
    : "arrays" in spec
    ? `{"text":${"[".repeat(spec.arrays)}${"]".repeat(spec.arrays)}}`
    : "objects" in spec
    ? `{"text":"x","n":${"{\"a\":".repeat(spec.objects)}1${"}".repeat(spec.objects)}}`
    : "question" in spec
    ? { question: `${spec.question}?`, clarification_type: "missing_info" }
    : spec.broken
const toolCall = fc.record({
  name: fc.constantFrom("echo", "echo", "echo", "no_such_tool", "", "ask_clarification", `echo${ESCAPES}`),
  arguments: argSpec,
  id: fc.oneof(fc.constantFrom("call_1", "call_1", "call_1_2", ""), fc.string({ maxLength: 8 }))
})
const usage = fc.oneof(
  fc.record({ prompt_tokens: fc.nat(5000), completion_tokens: fc.nat(5000) }),
  fc.jsonValue({ maxDepth: 3 })
)
const optional = <A>(arb: FastCheck.Arbitrary<A>) => fc.option(arb, { nil: undefined })
const reply: FastCheck.Arbitrary<ScriptedChatServer.Turn> = fc.record({
  content: optional(content),
  reasoning: optional(content),
  toolCalls: optional(fc.array(toolCall, { maxLength: 4 })),
  finishReason: optional(fc.oneof(fc.constantFrom("stop", "tool_calls", "length", "content_filter"), fc.string())),
  usage: optional(usage),
  ending: fc.constantFrom("normal", "normal", "normal", "normal", "error", "cut")
}).map(({ ending, ...fields }): ScriptedChatServer.Reply => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value
  if (ending === "error") out.streamError = { message: `stream broke ${ESCAPES} ${SECRET}`, code: "server_error" }
  if (ending === "cut") out.disconnect = true
  return out as ScriptedChatServer.Reply
})
/** The turn as served: described tool-call arguments built. */
const served = (turn: ScriptedChatServer.Turn): ScriptedChatServer.Turn =>
  typeof turn === "object" && "toolCalls" in turn && turn.toolCalls !== undefined
    ? {
      ...turn,
      toolCalls: turn.toolCalls.map((call) => ({
        ...call,
        arguments: argumentsOf(call.arguments as unknown as ArgSpec)
      }))
    }
    : turn
const failure: FastCheck.Arbitrary<ScriptedChatServer.Turn> = fc.record({
  status: fc.constantFrom(400, 401, 402, 403, 404, 408, 409, 413, 429, 500, 502, 503, 504),
  retryAfter: optional(fc.constantFrom("0", "1", "86400", "soon", "Wed, 21 Oct 2099 07:28:00 GMT")),
  body: fc.oneof(
    hostileText,
    fc.jsonValue({ maxDepth: 3 }),
    hostileText.map((text) => ScriptedChatServer.errorBody(`${text} Bearer ${SECRET}`, "server_error", "x"))
  )
}).map(({ body, retryAfter, status }) => ({
  status,
  body,
  ...(retryAfter !== undefined ? { headers: { "retry-after": retryAfter } } : {})
}))
const sse = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`
const raw: FastCheck.Arbitrary<ScriptedChatServer.Turn> = fc.oneof(
  hostileText.map((title) => ({
    raw: `<!DOCTYPE html><html><head><title>${title}</title></head><body>${SECRET}</body></html>`,
    contentType: "text/html"
  })),
  content.map((text) => ({
    raw: JSON.stringify({
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }]
    }),
    contentType: "application/json"
  })),
  fc.jsonValue({ maxDepth: 3 }).map((value) => ({ raw: JSON.stringify(value) ?? "", contentType: "application/json" })),
  fc.array(fc.oneof(hostileText, fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "")), { maxLength: 4 })
    .map((lines) => ({ raw: lines.map((line) => `data: ${line}\n\n`).join("") })),
  fc.record({ text: content, at: fc.nat() }).map(({ at, text }) => {
    const whole = sse({ id: "x", choices: [{ index: 0, delta: { content: text } }] }) + sse({ id: "x", choices: [] })
    return { raw: whole.slice(0, at % (whole.length + 1)), cut: true }
  }),
  fc.jsonValue({ maxDepth: 2 }).map((delta) => ({
    raw: `${sse({ id: "x", choices: [{ index: 0, delta }] })}data: [DONE]\n\n`
  }))
)
const silence: FastCheck.Arbitrary<ScriptedChatServer.Turn> = fc.oneof(
  fc.constant({ hang: true as const }),
  content.map((text) => ({ content: text, stall: true }))
)

interface Case {
  /** Served with the short-timeout client: the turns may never answer. */
  readonly slow: boolean
  readonly turns: ReadonlyArray<ScriptedChatServer.Turn>
}

const hostileCase: FastCheck.Arbitrary<Case> = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.record({
      slow: fc.constant(false),
      turns: fc.array(fc.oneof(reply, reply, failure, raw), { minLength: 1, maxLength: 3 })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      slow: fc.constant(true),
      turns: fc.array(fc.oneof(silence, reply), { minLength: 1, maxLength: 2 })
    })
  }
)

// ---------------------------------------------------------------------------------------------------------
// The harness: one server, one store, two clients

const echo = Tool.make({
  name: "echo",
  description: "Says the text back",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

const config: AppConfig = Schema.decodeUnknownSync(AppConfigSchema)({
  models: [{ name: "fuzz", model: "fuzz" }],
  // Retries without real waits: the cases exercise what ends a run, not the backoff.
  llm_call: {
    retry_max_attempts: 2,
    retry_base_delay_ms: 0,
    retry_cap_delay_ms: 0,
    burst_retry_base_delay_ms: 0,
    max_retry_after_ms: 0
  }
}) as AppConfig

/**
 * Why the thread's tool calls are not paired, if they are not: each AI message's calls (valid and invalid)
 * must have unique ids and be answered exactly once by the tool messages after it (before the next AI
 * message), and no tool message may answer nothing.
 */
const pairing = (messages: ReadonlyArray<Message>): string | undefined => {
  let open: Array<string> | undefined
  const close = () => (open !== undefined && open.length > 0 ? `unanswered tool calls: ${open.join(", ")}` : undefined)
  for (const message of messages) {
    if (message.type === "ai") {
      const problem = close()
      if (problem !== undefined) return problem
      open = [
        ...M.toolCalls(message).map((call) => call.id),
        ...(message.invalid_tool_calls ?? []).map((call, i) => M.invalidCallId(message, call, i))
      ]
      if (new Set(open).size !== open.length) return `repeated tool-call ids in one message: ${open.join(", ")}`
    } else if (message.type === "tool") {
      const at = open?.indexOf(message.tool_call_id) ?? -1
      if (at < 0) return `a tool result answers no open call: ${message.tool_call_id}`
      open!.splice(at, 1)
    }
  }
  return close()
}

const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/

describe("hostile model output through the whole lead chain", () => {
  it.scopedLive(`${RUNS} generated hostile responses: every run ends cleanly, threads readable, calls paired`, () =>
    Effect.gen(function*() {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), "antler-hostile-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(home, { recursive: true, force: true })))
      const current = { turns: [] as ReadonlyArray<ScriptedChatServer.Turn>, next: 0 }
      const server = yield* ScriptedChatServer.start(() => current.turns[current.next++] ?? "All done.", {
        chunkSize: 5
      })
      const fast = yield* OpenAiModel.make({ baseURL: server.url, apiKey: SECRET, model: "fuzz", timeoutMs: 30_000 })
      const slow = yield* OpenAiModel.make({ baseURL: server.url, apiKey: SECRET, model: "fuzz", timeoutMs: 150 })
      const redact = Redact.make([SECRET])
      const app = Layer.succeed(AppConfigService, { config, source: undefined, ignored: [], home })
      const services = Layer.mergeAll(
        app,
        SqliteThreadStore.layer({ filename: path.join(home, "antler.sqlite"), redact }),
        LocalSandbox.layer().pipe(Layer.provide(app))
      )
      const quiet = Logger.minimumLogLevel(LogLevel.None)
      const runtime = yield* Effect.provide(
        Effect.runtime<AppConfigService | ThreadStore | SandboxProvider>(),
        yield* Layer.build(Layer.merge(services, quiet))
      )
      // The lead agent as an app builds it (one per model), over the app's store, sandbox and configuration.
      const agentOver = (model: ModelService["Type"]) =>
        Effect.provide(
          Layer.build(LeadAgent.layer({ sandboxTools: false, tools: [echo], systemPrompt: "You are fuzzed." }).pipe(
            Layer.provide(Layer.succeed(ModelService, model))
          )),
          runtime
        ).pipe(Effect.map((context) => Context.get(context, LeadAgent.LeadAgent)))
      const agents = { fast: yield* agentOver(fast), slow: yield* agentOver(slow) }
      let index = 0
      const statuses: Record<string, number> = {}

      const runCase = (hostile: Case) =>
        Effect.gen(function*() {
          current.turns = hostile.turns.map(served)
          current.next = 0
          const threadId = `hostile-${index++}`
          const agent = hostile.slow ? agents.slow : agents.fast
          const events: Array<RunEvent> = []
          const end = yield* agent.turn(
            { threadId, prompt: "Go.", options: { recursionLimit: 12 } },
            (event) => events.push(event)
          )
          const where = `case ${threadId}: ${JSON.stringify(hostile).slice(0, 600)}`
          statuses[`${end.status}/${end.stop_reason}`] = (statuses[`${end.status}/${end.stop_reason}`] ?? 0) + 1
          // Exactly one run_end, and it is the last event.
          assert.strictEqual(events.filter((e) => e.type === "run_end").length, 1, where)
          assert.strictEqual(events.at(-1), end, where)
          assert.isFalse(CRASHES.has(end.error?.name ?? ""), `${where}\ncrashed: ${JSON.stringify(end.error)}`)
          // The thread loads (Schema-decoded from SQLite) and its calls are paired.
          const loaded = yield* (yield* ThreadStore).load(threadId)
          assert.isTrue(Option.isSome(loaded), where)
          const messages = Option.getOrThrow(loaded).state.messages
          const shape = messages.map((m) =>
            m.type === "ai"
              ? `ai[${M.toolCalls(m).map((c) => c.id)}|${(m.invalid_tool_calls ?? []).map((c) => c.id)}]`
              : m.type === "tool"
              ? `tool(${m.tool_call_id})`
              : m.type
          )
          assert.strictEqual(pairing(messages), undefined, `${where}\n${shape.join(" ")}`)
          // What a person sees: no control character, no secret (text and JSON lines).
          const human = Render.human({ color: false, redact })
          const shown = events.map(human).join("")
          assert.notMatch(shown, CONTROL, where)
          assert.notInclude(shown, SECRET, where)
          const json = Render.json(threadId, "run", redact)
          const lines = events.map(json).join("")
          assert.notMatch(lines, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/, where)
          assert.notInclude(lines, SECRET, where)
        })

      yield* Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(hostileCase, (hostile) => Runtime.runPromise(runtime)(runCase(hostile))),
          { numRuns: RUNS, endOnFailure: true }
        )
      )
      // The database never held the secret.
      const files = fs.readdirSync(home).filter((name) => name.startsWith("antler.sqlite"))
      for (const file of files) assert.notInclude(fs.readFileSync(path.join(home, file)).toString("latin1"), SECRET)
      assert.strictEqual(index, RUNS)
      // The cases reach every way a run can end (so the properties above were checked on each of them).
      if (process.env.HOSTILE_FUZZ_REPORT) console.log(JSON.stringify(statuses))
      if (RUNS >= 1000) {
        for (const outcome of ["success/completed", "error/error", "interrupted/interrupted"]) {
          assert.isAbove(statuses[outcome] ?? 0, 0, `${outcome} in ${JSON.stringify(statuses)}`)
        }
      }
    }), 600_000)
})
