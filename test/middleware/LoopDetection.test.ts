import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as L from "../../src/middleware/LoopDetection.js"
import { LoopDetectionConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const config = (input: Record<string, unknown> = {}) => Schema.decodeUnknownSync(LoopDetectionConfig)(input)

describe("LoopDetection.stableKey", () => {
  it("read_file: ranges in the same 200-line buckets collide, other buckets do not", () => {
    const key = (args: Record<string, unknown>) => L.stableKey("read_file", args)
    assert.strictEqual(key({ path: "/a" }), "/a:0-0")
    assert.strictEqual(key({ path: "/a", start_line: 1, end_line: 200 }), "/a:0-0")
    assert.strictEqual(key({ path: "/a", start_line: 150, end_line: 10 }), "/a:0-0")
    assert.strictEqual(key({ path: "/a", start_line: 201, end_line: 300 }), "/a:1-1")
    assert.strictEqual(key({ path: "/a", start_line: 1, end_line: 1000 }), "/a:0-4")
    assert.strictEqual(key({ path: "/a", start_line: 450 }), "/a:2-2")
    assert.strictEqual(key({ path: "/a", start_line: "401", end_line: "599" }), "/a:2-2")
    assert.strictEqual(key({ path: "/a", start_line: -5, end_line: 0 }), "/a:0-0")
    assert.strictEqual(key({ path: "/a", start_line: "soon" }), "/a:0-0")
    assert.notStrictEqual(key({ path: "/a" }), key({ path: "/b" }))
  })

  it("write_file and str_replace key on all arguments, so a new payload is a new call", () => {
    const a = L.stableKey("write_file", { path: "/a", content: "v1" })
    assert.notStrictEqual(a, L.stableKey("write_file", { path: "/a", content: "v2" }))
    assert.strictEqual(a, L.stableKey("write_file", { content: "v1", path: "/a" }))
    assert.notStrictEqual(
      L.stableKey("str_replace", { path: "/a", old_str: "x", new_str: "y" }),
      L.stableKey("str_replace", { path: "/a", old_str: "x", new_str: "z" })
    )
  })

  it("other tools key on the salient arguments only, else on all of them", () => {
    assert.strictEqual(
      L.stableKey("bash", { command: "ls", description: "list files" }),
      L.stableKey("bash", { command: "ls", description: "look around" })
    )
    assert.notStrictEqual(L.stableKey("bash", { command: "ls" }), L.stableKey("bash", { command: "ls -la" }))
    assert.strictEqual(L.stableKey("web_search", { query: "effect", max: 3, url: null }), "{\"query\":\"effect\"}")
    assert.notStrictEqual(L.stableKey("task", { prompt: "a" }), L.stableKey("task", { prompt: "b" }))
  })

  it("JSON-string arguments are parsed; anything else becomes a fallback key", () => {
    assert.strictEqual(L.stableKey("read_file", "{\"path\":\"/a\"}"), "/a:0-0")
    assert.strictEqual(L.stableKey("bash", "not json"), "not json")
    assert.strictEqual(L.stableKey("bash", "[1, 2]"), "[1,2]")
    assert.strictEqual(L.stableKey("read_file", "[1]"), "[1]")
    assert.strictEqual(L.stableKey("bash", 42), "42")
  })

  it("canonicalJson sorts keys at every level", () => {
    assert.strictEqual(
      L.canonicalJson({ b: 1, a: { d: [1, { z: 0, y: 1 }], c: null } }),
      "{\"a\":{\"c\":null,\"d\":[1,{\"y\":1,\"z\":0}]},\"b\":1}"
    )
    assert.strictEqual(L.canonicalJson({ n: Number.NaN, u: undefined }), "{\"n\":\"NaN\"}")
  })
})

// Calls with arguments built from a small pool, so equal keys happen often.
const argsArb = FC.dictionary(
  FC.constantFrom("path", "command", "content", "start_line", "description", "x"),
  FC.oneof(FC.constantFrom("/a", "/b", "ls"), FC.integer({ min: -2, max: 900 }), FC.constant(null)),
  { maxKeys: 4 }
)
const callArb = FC.record({ name: FC.constantFrom("read_file", "write_file", "bash", "web_search"), args: argsArb })

const reversedKeys = (args: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(args).reverse()) as Record<string, unknown>

const permutedArb = FC.array(callArb, { minLength: 1, maxLength: 5 }).chain((calls) =>
  FC.tuple(FC.constant(calls), FC.shuffledSubarray(calls, { minLength: calls.length, maxLength: calls.length }))
)

describe("LoopDetection.responseHash", () => {
  it.prop(
    "is order-independent: any permutation of the calls (and of argument keys) gives the same hash",
    [permutedArb],
    ([[calls, permuted]]) => {
      const shuffled = permuted.map((call) => ({ ...call, args: reversedKeys(call.args) }))
      assert.strictEqual(L.responseHash(calls), L.responseHash(shuffled))
    }
  )

  it.prop(
    "depends on the multiset: one more call changes the hash",
    [FC.array(callArb, { minLength: 1, maxLength: 4 })],
    ([calls]) => assert.notStrictEqual(L.responseHash(calls), L.responseHash([...calls, calls[0]!]))
  )

  it.prop("is 12 lower-case hex characters", [FC.array(callArb, { maxLength: 3 })], ([calls]) => {
    assert.match(L.responseHash(calls), /^[0-9a-f]{12}$/)
  })

  it.prop("canonicalJson round-trips and ignores key order", [FC.jsonValue()], ([value]) => {
    const text = L.canonicalJson(value)
    assert.strictEqual(L.canonicalJson(JSON.parse(text)), text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      assert.strictEqual(L.canonicalJson(reversedKeys(value as Record<string, unknown>)), text)
    }
  })
})

const same = [{ name: "read_file", args: { path: "/a" } }]

describe("LoopDetection.tracker", () => {
  it("warns once at the warn threshold and stops at the hard limit", () => {
    const t = L.tracker(config())
    const verdicts = [1, 2, 3, 4, 5].map(() => t.observe(same))
    assert.deepStrictEqual(verdicts.map((v) => v.warnings.length), [0, 0, 1, 0, 0])
    assert.isTrue(verdicts[2]!.warnings[0]!.startsWith(L.LOOP_MARKER))
    assert.deepStrictEqual(verdicts.map((v) => v.stop !== undefined), [false, false, false, false, true])
    assert.isTrue(verdicts[4]!.stop!.startsWith(L.FORCED_STOP_MARKER))
  })

  it("counts within the window only, and warns again once a hash left the window and came back", () => {
    const t = L.tracker(config({ window_size: 4, warn_threshold: 2, hard_limit: 3 }))
    assert.lengthOf(t.observe(same).warnings, 0)
    assert.lengthOf(t.observe(same).warnings, 1)
    for (let i = 0; i < 4; i++) assert.isUndefined(t.observe([{ name: "bash", args: { command: `echo ${i}` } }]).stop)
    assert.lengthOf(t.observe(same).warnings, 0)
    const again = t.observe(same)
    assert.lengthOf(again.warnings, 1)
    assert.isUndefined(again.stop)
  })

  it("responses with the same calls in another order are repeats", () => {
    const t = L.tracker(config({ warn_threshold: 2, hard_limit: 3 }))
    const a = { name: "read_file", args: { path: "/a" } }
    const b = { name: "bash", args: { command: "ls" } }
    t.observe([a, b])
    assert.lengthOf(t.observe([b, a]).warnings, 1)
    assert.isDefined(t.observe([a, b]).stop)
  })

  it("the frequency layer uses per-tool overrides, warns once per crossing and names the tool", () => {
    const limits = {
      tool_freq_warn: 3,
      tool_freq_hard_limit: 4,
      tool_freq_overrides: { bash: { warn: 10, hard_limit: 12 } }
    }
    const t = L.tracker(config(limits))
    const verdicts = [0, 1, 2, 3].map((i) => t.observe([{ name: "read_file", args: { path: `/f${i}` } }]))
    assert.deepStrictEqual(verdicts.map((v) => v.warnings.length), [0, 0, 1, 0])
    assert.include(verdicts[2]!.warnings[0]!, "read_file 3 times")
    assert.include(verdicts[3]!.stop!, "Tool read_file called 4 times")
    const bash = L.tracker(config(limits))
    for (let i = 0; i < 9; i++) {
      assert.deepStrictEqual(bash.observe([{ name: "bash", args: { command: `c${i}` } }]), { warnings: [] })
    }
  })

  it("the frequency window slides: a tool that fell below its warn count is warned again when it climbs back", () => {
    const t = L.tracker(config({ window_size: 3, tool_freq_warn: 2, tool_freq_hard_limit: 3 }))
    const sequence = ["read_file", "read_file", "bash", "ls", "grep", "read_file", "read_file"]
    const verdicts = sequence.map((name, i) => t.observe([{ name, args: { path: `/p${i}` } }]))
    assert.deepStrictEqual(verdicts.map((v) => v.warnings.length), [0, 1, 0, 0, 0, 0, 1])
    assert.isTrue(verdicts.every((v) => v.stop === undefined))
  })

  it("several calls of one tool in a response all count (DeerFlow's test_multi_tool_single_response_counted)", () => {
    const t = L.tracker(config({ tool_freq_warn: 5, tool_freq_hard_limit: 10 }))
    const read = (...paths: Array<string>) => paths.map((path) => ({ name: "read_file", args: { path } }))
    assert.deepStrictEqual(t.observe(read("/a.py", "/b.py")), { warnings: [] })
    assert.deepStrictEqual(t.observe(read("/c.py", "/d.py")), { warnings: [] })
    assert.deepStrictEqual(t.observe(read("/e.py")), { warnings: [L.frequencyWarning("read_file", 5)] })
  })

  it("a response's calls are counted one by one up to the first warning, as DeerFlow counts them", () => {
    const t = L.tracker(config({ tool_freq_warn: 2, tool_freq_hard_limit: 3 }))
    const read = (...paths: Array<string>) => paths.map((path) => ({ name: "read_file", args: { path } }))
    // the second call warns; the third is not counted, so this response is warned, not stopped
    assert.deepStrictEqual(t.observe(read("/p0", "/p1", "/p2")), { warnings: [L.frequencyWarning("read_file", 2)] })
    const next = t.observe(read("/p3"))
    assert.strictEqual(next.stop, L.frequencyStop("read_file", 3))
  })

  it("a response warned for its repeats counts none of its calls by tool", () => {
    const t = L.tracker(config({ warn_threshold: 2, hard_limit: 9, tool_freq_warn: 3, tool_freq_hard_limit: 9 }))
    const same = [{ name: "read_file", args: { path: "/same" } }]
    assert.deepStrictEqual(t.observe(same), { warnings: [] })
    assert.deepStrictEqual(t.observe(same), { warnings: [L.repeatWarning()] })
    // two counted so far (the warned response's call was not): the third by name warns only now
    assert.deepStrictEqual(t.observe([{ name: "read_file", args: { path: "/other" } }]), { warnings: [] })
    assert.deepStrictEqual(t.observe([{ name: "read_file", args: { path: "/third" } }]), {
      warnings: [L.frequencyWarning("read_file", 3)]
    })
  })

  it("a response without calls is ignored", () => {
    assert.deepStrictEqual(L.tracker(config()).observe([]), { warnings: [] })
  })
})

describe("LoopDetection.layer", () => {
  const readFile = Tool.make({
    name: "read_file",
    description: "Read",
    parameters: Schema.Struct({ path: Schema.String }),
    handler: ({ path }) => Effect.succeed(`contents of ${path}`)
  })

  it.effect("internal calls are neither tracked nor given warnings", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: (request) =>
          request.internal !== undefined ? "summary" : { toolCalls: [{ name: "read_file", args: { path: "/a" } }] },
        tools: [readFile],
        middlewares: () => [Harness.internalCaller(), L.layer(config({ warn_threshold: 2, hard_limit: 3 }))]
      })
      const internal = out.requests.filter((r) => r.internal !== undefined)
      const agent = out.requests.filter((r) => r.internal === undefined)
      assert.lengthOf(agent, 3)
      for (const r of internal) assert.isFalse(r.messages.some((m) => m.name === "loop_warning"))
      assert.deepStrictEqual(agent.map((r) => r.messages.filter((m) => m.name === "loop_warning").length), [0, 0, 1])
      assert.strictEqual(out.end.stop_reason, "loop_capped")
    }).pipe(Harness.withStore))

  // DeerFlow's test_hard_stop_at_limit / test_hash_detection_takes_priority assert its exact _HARD_STOP_MSG.
  it.effect("a repeat stop ends the answer with DeerFlow's forced-stop text, no calls and loop_capped", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: () => ({ content: "Reading again.", toolCalls: [{ name: "read_file", args: { path: "/same" } }] }),
        tools: [readFile],
        middlewares: () => [L.layer(config({ warn_threshold: 2, hard_limit: 3 }))]
      })
      assert.lengthOf(out.requests, 3)
      const last = out.state.messages.at(-1)!
      assert.isFalse(M.hasToolCalls(last as M.AIMessage))
      assert.strictEqual(
        M.text(last),
        "Reading again.\n\n[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with " +
          "results collected so far."
      )
      assert.strictEqual(out.end.stop_reason, "loop_capped")
    }).pipe(Harness.withStore))

  it.effect("a response calling several tools at their warning gets one warning, the first's, as DeerFlow's", () =>
    Effect.gen(function*() {
      const names = ["alpha", "bravo", "charlie"]
      const tools = names.map((name) =>
        Tool.make({ name, description: name, parameters: Schema.Struct({}), handler: () => Effect.succeed("ok") })
      )
      const out = yield* Harness.run({
        // one response calls three tools, each at its frequency warning: counting stops at the first warning
        script: [{ toolCalls: names.map((name) => ({ name, args: {} })) }, { toolCalls: [{ name: "bravo", args: {} }] }, "done"],
        tools,
        middlewares: () => [L.layer(config({ tool_freq_warn: 1, tool_freq_hard_limit: 10 }))]
      })
      const warnings = (i: number) => out.requests[i]!.messages.filter((m) => m.name === "loop_warning")
      assert.deepStrictEqual(warnings(1).map(M.text), [L.frequencyWarning("alpha", 1)])
      assert.strictEqual(out.requests[1]!.messages.at(-1), warnings(1)[0])
      assert.isTrue(M.isHidden(warnings(1)[0]!))
      // bravo was not counted then: its first counted call warns now
      assert.deepStrictEqual(warnings(2).map(M.text), [L.frequencyWarning("bravo", 1)])
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(Harness.withStore))

  it.effect("a warning left queued when a run ends never reaches another run of the thread; history is per run", () =>
    Effect.gen(function*() {
      const loop = L.layer(config({ warn_threshold: 2, hard_limit: 9 }))
      const again = { toolCalls: [{ name: "read_file", args: { path: "/a" } }] }
      // the first run ends at its step limit right after the warning was queued
      const first = yield* Harness.run({
        threadId: "looping",
        script: () => again,
        tools: [readFile],
        options: { recursionLimit: 2 },
        middlewares: () => [loop]
      })
      assert.notStrictEqual(first.end.stop_reason, "completed")
      assert.isTrue(first.requests.every((r) => r.messages.every((m) => m.name !== "loop_warning")))
      const second = yield* Harness.run({
        threadId: "looping",
        input: "once more",
        script: (_r, call) => (call === 0 ? again : "done"),
        tools: [readFile],
        middlewares: () => [loop]
      })
      assert.isTrue(second.requests.every((r) => r.messages.every((m) => m.name !== "loop_warning")))
      assert.strictEqual(second.end.stop_reason, "completed")
    }).pipe(Harness.withStore))

  it.effect("disabled: wraps nothing", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: (_r, call) => (call < 6 ? { toolCalls: [{ name: "read_file", args: { path: "/a" } }] } : "done"),
        tools: [readFile],
        middlewares: () => [L.layer(config({ enabled: false }))]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
      assert.isTrue(out.requests.every((r) => r.messages.every((m) => m.name !== "loop_warning")))
      assert.strictEqual(M.text(out.state.messages.at(-1)!), "done")
    }).pipe(Harness.withStore))
})
