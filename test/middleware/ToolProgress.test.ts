/**
 * ToolProgress: what the model is told (hidden `[PROGRESS HINT]`s in its next request) and what it gets back
 * (`[TOOL_BLOCKED]` without the tool running) when a tool keeps failing or keeps returning the same thing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as Run from "../../src/programs/Run.js"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import * as ToolProgress from "../../src/middleware/ToolProgress.js"
import { defaults, ToolProgressConfig } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const config = (input: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(ToolProgressConfig)({ enabled: true, ...input })

/** A tool answering its n-th call (from 0) with `answer(n)`; `calls.n` counts the calls that really ran. */
const counted = (name: string, answer: (n: number) => string) => {
  const calls = { n: 0 }
  const tool = Tool.make({
    name,
    description: name,
    parameters: Schema.Struct({ q: Schema.optional(Schema.String) }),
    handler: () => Effect.sync(() => answer(calls.n++))
  })
  return { tool, calls }
}

/** The model calls `names` (one response) `times` times, then answers "done". */
const calling = (times: number, ...names: ReadonlyArray<string>) => (_request: ModelRequest, call: number) =>
  call < times ? { toolCalls: names.map((name) => ({ name, args: { q: `attempt ${call}` } })) } : "done"

const hintsIn = (request: ModelRequest) => request.messages.filter((m) => m.name === ToolProgress.HINT_NAME)

const run = (
  spec: Omit<H.RunSpec<never>, "middlewares">,
  settings = config(),
  extra: ReadonlyArray<MW.Middleware> = []
) =>
  H.run({ ...spec, middlewares: () => [...extra, ToolProgress.layer(settings), ToolErrorHandling.layer()] })

describe("ToolProgress", () => {
  it.effect("three empty searches in a row: the next request carries one hidden hint; the tool keeps running", () =>
    Effect.gen(function*() {
      const search = counted("web_search", () => "Error: No results found for that query")
      const out = yield* run({ script: calling(6, "web_search"), tools: [search.tool] })
      assert.deepStrictEqual(out.requests.map((r) => hintsIn(r).length), [0, 0, 0, 1, 1, 1, 1])
      const hint = hintsIn(out.requests[3]!)[0]!
      assert.strictEqual(
        M.text(hint),
        "[PROGRESS HINT] Your search returned no results. Try rephrasing your search query with different " +
          "keywords or approach."
      )
      assert.isTrue(M.isHidden(hint))
      assert.strictEqual(hint.type, "human")
      // request-only: the thread never holds a hint
      assert.isFalse(out.state.messages.some((m) => m.name === ToolProgress.HINT_NAME))
      // a mistake the model can fix by changing its query is never blocked
      assert.strictEqual(search.calls.n, 6)
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(H.withStore))

  it.effect("a tool that keeps failing in a way retries cannot fix: warned at 3, blocked at 5, then not run", () =>
    Effect.gen(function*() {
      const fetch = counted("web_fetch", () => "Error: connection timed out")
      const out = yield* run({ script: calling(7, "web_fetch"), tools: [fetch.tool] })
      assert.strictEqual(fetch.calls.n, 5)
      const results = out.state.messages.filter((m): m is M.ToolMessage => m.type === "tool")
      assert.strictEqual(results.length, 7)
      for (const blocked of results.slice(5)) {
        assert.strictEqual(blocked.status, "error")
        assert.strictEqual(
          M.text(blocked),
          "[TOOL_BLOCKED] Repeated transient failures — try a different approach."
        )
      }
      assert.deepStrictEqual(out.requests.map((r) => hintsIn(r).length), [0, 0, 0, 1, 1, 0, 0, 0])
      assert.include(M.text(hintsIn(out.requests[3]!)[0]!), "The tool encountered repeated transient failures.")
    }).pipe(H.withStore))

  it.effect("an auth failure blocks the tool at once; exempt tools are never tracked", () =>
    Effect.gen(function*() {
      const api = counted("crm_lookup", () => "Error: 401 Unauthorized: invalid api key")
      const present = counted("present_files", () => "Error: 401 Unauthorized")
      const out = yield* run({ script: calling(3, "crm_lookup", "present_files"), tools: [api.tool, present.tool] })
      assert.strictEqual(api.calls.n, 1)
      assert.strictEqual(present.calls.n, 3)
      const blocked = out.state.messages.filter((m) => m.type === "tool" && M.text(m).startsWith("[TOOL_BLOCKED]"))
      assert.strictEqual(blocked.length, 2)
      assert.include(M.text(blocked[0]!), "[TOOL_BLOCKED] Authentication failure — this tool cannot be used.")
    }).pipe(H.withStore))

  it.effect("the same long result again and again is stagnation; a new result resets it", () =>
    Effect.gen(function*() {
      const page = "Effect is a powerful TypeScript library designed to help developers easily create complex " +
        "synchronous and asynchronous programs with typed errors"
      const fresh = "Completely different words about mountains rivers forests valleys lakes glaciers meadows " +
        "canyons deserts islands"
      // results 0-3 repeat the page (problems at 1, 2, 3), 4 is new (reset), 5-6 repeat it (problems 1, 2)
      const search = counted("web_search", (n) => (n >= 4 ? fresh : page))
      const out = yield* run({ script: calling(7, "web_search"), tools: [search.tool] })
      const counts = out.requests.map((r) => hintsIn(r).length)
      assert.deepStrictEqual(counts, [0, 0, 0, 0, 1, 0, 0, 0])
      const hint = M.text(hintsIn(out.requests[4]!)[0]!)
      assert.include(hint, "[PROGRESS HINT] The tool is returning duplicate results.")
      // DeerFlow's test_jaccard_near_dup_hint_is_specific_and_actionable: "duplicate", and what to do instead
      assert.include(hint.toLowerCase(), "duplicate")
      assert.match(hint.toLowerCase(), /rephras|different/)
      assert.strictEqual(search.calls.n, 7)
    }).pipe(H.withStore))

  it.effect("at most 3 hints wait for one request, deduplicated", () =>
    Effect.gen(function*() {
      const failures = {
        t1: "Error: No results found",
        t2: "Error: connection timed out",
        t3: "Error: 429 Too Many Requests: rate limit exceeded",
        t4: "Error: 404 Not Found"
      }
      const names = Object.keys(failures)
      const tools = Object.entries(failures).map(([name, error]) => counted(name, () => error).tool)
      const out = yield* run({ script: calling(1, ...names), tools }, config({ stagnation_threshold: 1 }))
      const hints = hintsIn(out.requests[1]!)
      assert.lengthOf(hints, 1)
      assert.lengthOf(M.text(hints[0]!).match(/\[PROGRESS HINT\]/g) ?? [], 3)
    }).pipe(H.withStore))

  it.effect("a failed model call keeps its hints for the retry", () =>
    Effect.gen(function*() {
      const search = counted("web_search", () => "Error: No results found")
      let failed = false
      const script = (request: ModelRequest, call: number) => {
        if (hintsIn(request).length > 0 && !failed) {
          failed = true
          return undefined
        }
        return calling(3, "web_search")(request, call)
      }
      const retryOnce = MW.make({ model: (request, next) => Effect.catchAll(next(request), () => next(request)) })
      const out = yield* run({ script, tools: [search.tool] }, config(), [retryOnce])
      const withHint = out.requests.filter((r) => hintsIn(r).length > 0)
      assert.lengthOf(withHint, 2)
      assert.strictEqual(withHint[0]!.messages.length, withHint[1]!.messages.length)
      assert.strictEqual(out.end.status, "success")
    }).pipe(H.withStore))

  it.scoped("a new run of the thread starts with every tool active again", () =>
    Effect.gen(function*() {
      const api = counted("crm_lookup", () => "Error: 401 Unauthorized")
      // each turn: two calls of the tool, then an answer
      const model = ScriptedModel.make((request) => {
        const turn = request.messages.slice(request.messages.findLastIndex((m) => m.type === "human"))
        return turn.filter((m) => m.type === "tool").length < 2
          ? { toolCalls: [{ name: "crm_lookup", args: {} }] }
          : "done"
      })
      // built once, as an agent's chain is: both runs share the tracker
      const ports = yield* Layer.build(
        MW.stack([ToolProgress.layer(config()), ToolErrorHandling.layer()], MW.base(model, Toolkit.make([api.tool])))
      )
      const turn = () => Run.execute({ threadId: "again", input: [M.human("look it up")] }, ports, () => {})
      yield* turn()
      assert.strictEqual(api.calls.n, 1)
      yield* turn()
      assert.strictEqual(api.calls.n, 2)
    }).pipe(H.withStore))

  // DeerFlow's test_log_active_to_warned_emits_info, test_log_escalation_block_emits_warning,
  // test_log_blocked_call_intercepted_emits_info, test_log_warned_to_active_reset_emits_info,
  // test_log_hint_injection_emits_debug.
  it.effect("an operator's log says when a tool is warned, blocked, stopped, active again, and hinted", () =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
          if (text.startsWith("tool_progress:")) logged.push(`${logLevel.label} ${text}`)
        })
      )
      // web_fetch times out 5 times (warned at 3, blocked at 5), then its 6th call is stopped; web_search finds
      // nothing 3 times (warned), then finds something (active again)
      const fetch = counted("web_fetch", () => "Error: connection timed out")
      const search = counted("web_search", (n) => (n < 3 ? "Error: No results found" : "Results: three pages"))
      const out = yield* run({
        threadId: "logged",
        script: (_request, call) =>
          call < 6 ? { toolCalls: [{ name: "web_fetch", args: { q: `${call}` } }] }
          : call < 10 ? { toolCalls: [{ name: "web_search", args: { q: `${call}` } }] }
          : "done",
        tools: [fetch.tool, search.tool]
      }).pipe(Effect.provide(capture), Logger.withMinimumLogLevel(LogLevel.Debug))
      const start = out.events.find((e) => e.type === "run_start")
      const runId = start?.type === "run_start" ? start.run_id : ""
      const hinted = `DEBUG tool_progress: injecting 1 hint(s) for logged/${runId}`
      assert.deepStrictEqual(logged, [
        "INFO tool_progress: logged/web_fetch -> WARNED (consecutive_problems=3)",
        hinted,
        hinted,
        "WARN tool_progress: logged/web_fetch -> BLOCKED: Repeated transient failures — try a different approach.",
        "INFO tool_progress: logged/web_fetch call intercepted (blocked): Repeated transient failures — try a " +
          "different approach.",
        "INFO tool_progress: logged/web_search -> WARNED (consecutive_problems=3)",
        hinted,
        "INFO tool_progress: logged/web_search -> ACTIVE (reset after good result)"
      ])
    }).pipe(H.withStore))

  it.effect("with inject_assessment off the model gets no hints, but blocking still works", () =>
    Effect.gen(function*() {
      const fetch = counted("web_fetch", () => "Error: connection timed out")
      const out = yield* run(
        { script: calling(6, "web_fetch"), tools: [fetch.tool] },
        config({ inject_assessment: false })
      )
      assert.isTrue(out.requests.every((r) => hintsIn(r).length === 0))
      assert.strictEqual(fetch.calls.n, 5)
    }).pipe(H.withStore))
})

describe("tool_progress configuration", () => {
  it("DeerFlow's keys and defaults; wrong values are refused; unknown keys are reported", () => {
    assert.deepStrictEqual(Schema.decodeUnknownSync(ToolProgressConfig)({}), {
      enabled: false,
      stagnation_threshold: 3,
      warn_escalation_count: 2,
      inject_assessment: true,
      jaccard_similarity_threshold: 0.8,
      min_word_count_for_similarity: 10,
      exempt_tools: ["ask_clarification", "write_todos", "present_files", "task"],
      max_tracked_threads: 100
    })
    assert.isFalse(defaults().tool_progress.enabled)
    for (const bad of [{ min_word_count_for_similarity: true }, { jaccard_similarity_threshold: 1.5 }, {
      stagnation_threshold: 0
    }]) {
      assert.isTrue(Either.isLeft(Schema.decodeUnknownEither(ToolProgressConfig)(bad)), JSON.stringify(bad))
    }
    // DeerFlow's field has no bound (test_tool_progress_middleware::test_from_config takes what it is given)
    for (const taken of [0, -1]) {
      const decoded = Schema.decodeUnknownSync(ToolProgressConfig)({ min_word_count_for_similarity: taken })
      assert.strictEqual(decoded.min_word_count_for_similarity, taken)
    }
    assert.deepStrictEqual(ConfigFile.ignoredKeys({ tool_progress: { enabled: true, stagnation: 2 } }), [
      "tool_progress.stagnation"
    ])
  })
})

describe("ToolProgress state machine", () => {
  const meta = (over: Partial<ToolErrorHandling.ToolMeta> = {}): ToolErrorHandling.ToolMeta => ({
    status: "error",
    error_type: "rate_limited",
    recoverable_by_model: false,
    recommended_next_action: "summarize",
    source: "tool_return",
    ...over
  })

  it("the tracker keeps the most recently updated threads only", () => {
    const tracker = ToolProgress.tracker(config({ max_tracked_threads: 2 }))
    const stop = meta({ error_type: "auth", recommended_next_action: "stop" })
    tracker.observe("a", "x", stop, "")
    tracker.observe("b", "x", stop, "")
    assert.isDefined(tracker.blocked("a", "x"))
    tracker.observe("c", "x", stop, "")
    assert.strictEqual(tracker.threads(), 2)
    assert.isUndefined(tracker.blocked("a", "x"))
    assert.isDefined(tracker.blocked("b", "x"))
    assert.isDefined(tracker.blocked("c", "x"))
  })

  it("word sets and near duplicates follow DeerFlow's rules", () => {
    assert.deepStrictEqual([...ToolProgress.wordSet("An API, the APIs; a b cd éclair_2")].sort(), [
      "api",
      "apis",
      "the",
      "éclair_2"
    ])
    const words = (n: number, offset = 0) => new Set(Array.from({ length: n }, (_, i) => `word${i + offset}`))
    assert.isTrue(ToolProgress.isNearDuplicate(words(10), [words(10)], 0.8, 10))
    assert.isFalse(ToolProgress.isNearDuplicate(words(9), [words(9)], 0.8, 10))
    assert.isFalse(ToolProgress.isNearDuplicate(words(10), [words(10, 5)], 0.8, 10))
    // only the last 3 results count
    const older = [words(10), words(10, 50), words(10, 60), words(10, 70)]
    assert.isFalse(ToolProgress.isNearDuplicate(words(10), older, 0.8, 10))
  })
})
