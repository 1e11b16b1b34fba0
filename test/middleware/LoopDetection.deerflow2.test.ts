/**
 * DeerFlow's `test_loop_detection_middleware.py`, the cases a model or user sees, run through a SCRIPTED model
 * and real counting tools: the exact texts of DeerFlow's `_WARNING_MSG`, `_TOOL_FREQ_WARNING_MSG`,
 * `_HARD_STOP_MSG` and `_TOOL_FREQ_HARD_STOP_MSG` (SPEC §5.28), the windowed frequency layer
 * (test_windowed_frequency_decay_avoids_hard_stop_when_interleaved, test_tight_burst_hard_stops_under_default_config)
 * and which layer wins (test_hash_detection_takes_priority).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as LoopDetection from "../../src/middleware/LoopDetection.js"
import { danglingCalls } from "../../src/programs/Run.js"
import { LoopDetectionConfig } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import type { ThreadState } from "../../src/state/ThreadState.js"
import * as Harness from "../support/harness.js"

// DeerFlow's texts, copied from backend/packages/harness/deerflow/agents/middlewares/loop_detection_middleware.py.
const WARNING_MSG = "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your " +
  "final answer now. If you cannot complete the task, summarize what you accomplished so far."
const HARD_STOP_MSG = "[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with " +
  "results collected so far."
const freqWarning = (name: string, count: number) =>
  `[LOOP DETECTED] You have called ${name} ${count} times without producing a final answer. Stop calling tools ` +
  "and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far."
const freqStop = (name: string, count: number) =>
  `[FORCED STOP] Tool ${name} called ${count} times — exceeded the per-tool safety limit. Producing final answer ` +
  "with results collected so far."

const counters = () => {
  const runs = { read_file: 0, bash: 0 }
  const readFile = Tool.make({
    name: "read_file",
    description: "Read a file",
    parameters: Schema.Struct({ path: Schema.String }),
    handler: ({ path }) => Effect.sync(() => (runs.read_file++, `contents of ${path}`))
  })
  const bash = Tool.make({
    name: "bash",
    description: "Run a command",
    parameters: Schema.Struct({ command: Schema.String }),
    handler: () => Effect.sync(() => (runs.bash++, "ok"))
  })
  return { runs, tools: [readFile, bash] }
}

const chain = (loop: Record<string, unknown> = {}) => () => [
  LoopDetection.layer(Schema.decodeUnknownSync(LoopDetectionConfig)(loop))
]

const warnings = (request: ModelRequest): Array<string> =>
  request.messages.filter((m) => m.name === "loop_warning").map(M.text)

const finalAnswer = (state: ThreadState): M.AIMessage => {
  const last = state.messages[state.messages.length - 1]
  assert.strictEqual(last?.type, "ai")
  assert.isFalse(M.hasToolCalls(last as M.AIMessage))
  return last as M.AIMessage
}

const read = (path: string) => ({ toolCalls: [{ name: "read_file", args: { path } }] })
const bash = (command: string) => ({ toolCalls: [{ name: "bash", args: { command } }] })

describe("test_loop_detection_middleware.py (DeerFlow's texts and windows)", () => {
  it.effect("repeats: the model's next request carries DeerFlow's warning; the 5th repeat ends on its stop text", () =>
    Effect.gen(function*() {
      const { runs, tools } = counters()
      const out = yield* Harness.run({ script: () => bash("ls"), tools, middlewares: chain() })
      assert.deepStrictEqual(out.requests.map(warnings), [[], [], [], [WARNING_MSG], []])
      assert.strictEqual(runs.bash, 4)
      assert.strictEqual(M.text(finalAnswer(out.state)), HARD_STOP_MSG)
      assert.strictEqual(out.end.stop_reason, "loop_capped")
      assert.deepStrictEqual(danglingCalls(out.state.messages), [])
    }).pipe(Harness.withStore))

  it.effect("frequency: warned once at tool_freq_warn with the tool and count, stopped at the hard limit", () =>
    Effect.gen(function*() {
      const { runs, tools } = counters()
      const out = yield* Harness.run({
        script: (_request, call) => read(`/file_${call}.py`),
        tools,
        middlewares: chain({ tool_freq_warn: 3, tool_freq_hard_limit: 6 })
      })
      assert.deepStrictEqual(out.requests.map(warnings), [[], [], [], [freqWarning("read_file", 3)], [], []])
      assert.strictEqual(runs.read_file, 5)
      assert.strictEqual(M.text(finalAnswer(out.state)), freqStop("read_file", 6))
      assert.strictEqual(out.end.stop_reason, "loop_capped")
      assert.deepStrictEqual(danglingCalls(out.state.messages), [])
    }).pipe(Harness.withStore))

  it.effect("frequency decays over the window: 8 reads interleaved with bash never reach a hard limit of 4", () =>
    Effect.gen(function*() {
      const { runs, tools } = counters()
      const out = yield* Harness.run({
        script: (_request, call) =>
          call < 16 ? (call % 2 === 0 ? read(`/file_${call}.py`) : bash(`cmd_${call}`)) : "Done reading.",
        tools,
        middlewares: chain({ tool_freq_warn: 4, tool_freq_hard_limit: 4, window_size: 5 })
      })
      assert.deepStrictEqual(runs, { read_file: 8, bash: 8 })
      assert.strictEqual(M.text(finalAnswer(out.state)), "Done reading.")
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(Harness.withStore))

  it.effect("a rapid burst inside one window still stops at the 4th read", () =>
    Effect.gen(function*() {
      const { runs, tools } = counters()
      const out = yield* Harness.run({
        script: (_request, call) => read(`/f_${call}.py`),
        tools,
        middlewares: chain({ tool_freq_warn: 4, tool_freq_hard_limit: 4, window_size: 5 })
      })
      assert.strictEqual(runs.read_file, 3)
      assert.strictEqual(M.text(finalAnswer(out.state)), freqStop("read_file", 4))
    }).pipe(Harness.withStore))

  it.effect("under the default config a burst of distinct bash commands is warned at 30 and stopped at 50", () =>
    Effect.gen(function*() {
      const { runs, tools } = counters()
      const out = yield* Harness.run({ script: (_request, call) => bash(`cmd_${call}`), tools, middlewares: chain() })
      assert.strictEqual(out.requests.length, 50)
      assert.strictEqual(runs.bash, 49)
      const warned = out.requests.flatMap((request, i) => warnings(request).map((text) => [i, text] as const))
      assert.deepStrictEqual(warned, [[30, freqWarning("bash", 30)]])
      assert.strictEqual(M.text(finalAnswer(out.state)), freqStop("bash", 50))
      assert.strictEqual(out.end.stop_reason, "loop_capped")
    }).pipe(Harness.withStore))

  it.effect("when both layers would stop, the repeat stop wins (test_hash_detection_takes_priority)", () =>
    Effect.gen(function*() {
      const { tools } = counters()
      const out = yield* Harness.run({
        script: () => read("/same_file.py"),
        tools,
        middlewares: chain({ warn_threshold: 2, hard_limit: 3, tool_freq_warn: 2, tool_freq_hard_limit: 3 })
      })
      assert.deepStrictEqual(out.requests.map(warnings), [[], [], [WARNING_MSG]])
      assert.strictEqual(M.text(finalAnswer(out.state)), HARD_STOP_MSG)
    }).pipe(Harness.withStore))
})
