/**
 * Benchmark: the per-step cost of Summarization's trigger check at 20 and at 2,000 messages, with the token
 * caches (per-message counts + running totals, as the middleware uses them) and without (every message
 * re-tokenized on every check). Also the whole Summarization + DurableContext model wrappers per call.
 * Prints JSON. Run: `node --import tsx bench/summarization-check.ts` (BENCH_PROFILE=quick for fewer samples).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Toolkit from "../src/layers/Toolkit.js"
import * as DurableContext from "../src/middleware/DurableContext.js"
import * as MW from "../src/middleware/Middleware.js"
import * as Summarization from "../src/middleware/Summarization.js"
import type { ContextSize } from "../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../src/services/AppConfig.js"
import type { ModelRequest } from "../src/services/ModelService.js"
import { ModelService } from "../src/services/ModelService.js"
import { AgentHooks } from "../src/services/AgentHooks.js"
import { RunContext, RunState } from "../src/services/RunContext.js"
import { RunEvents } from "../src/services/RunEvents.js"
import type { Message } from "../src/state/Message.js"
import * as M from "../src/state/Message.js"
import { addMessages } from "../src/state/Reducers.js"
import type { ThreadState } from "../src/state/ThreadState.js"
import * as TS from "../src/state/ThreadState.js"
import * as Tokens from "../src/state/Tokens.js"

const quick = process.env.BENCH_PROFILE === "quick"
const SIZES = [20, 2000] as const
const EPISODES = quick ? 8 : 40
const STEPS = 25
const UNCACHED_STEPS = quick ? 2 : 5
const triggers: ReadonlyArray<ContextSize> = [
  { type: "tokens", value: 10_000_000 },
  { type: "messages", value: 100_000 }
]

// Deterministic pseudo-random prose from a large vocabulary, so the tokenizer's own merge cache does not make
// new messages look cheaper than real text.
const syllables = ["ka", "lo", "mer", "tis", "an", "dre", "vu", "sol", "pe", "quin", "ra", "bo", "nel", "ti", "gus"]
const prose = (seed: number, words: number) => {
  let x = (seed * 2654435761) >>> 0 || 1
  const next = () => (x = (x * 1103515245 + 12345) >>> 0) >>> 8
  const out: Array<string> = []
  for (let k = 0; k < words; k++) {
    let word = ""
    for (let n = 1 + (next() % 3); n > 0; n--) word += syllables[next() % syllables.length]
    out.push(next() % 11 === 0 ? `${word},` : word)
  }
  return out.join(" ")
}

/** A realistic thread: user turns, tool-call groups with sizeable results, answers. */
const thread = (n: number): ReadonlyArray<Message> => {
  const out: Array<Message> = []
  let i = 0
  while (out.length < n) {
    out.push(M.human(`Question ${i}: ${prose(i, 30)}`))
    out.push(M.ai("", { tool_calls: [{ id: `c${i}`, name: "bash", args: { command: `grep -r item${i} /data` } }] }))
    out.push(M.tool(prose(i, 250), `c${i}`, { name: "bash" }))
    out.push(M.ai(`Answer ${i}: ${prose(i + 1, 80)}`))
    i++
  }
  return out.slice(0, n)
}

const stepWrite = (s: number): ReadonlyArray<Message> => [
  M.ai("", { tool_calls: [{ id: `s${s}`, name: "read_file", args: { path: `/mnt/user-data/workspace/f${s}.md` } }] }),
  M.tool(prose(s, 200), `s${s}`, { name: "read_file" })
]

const grow = (messages: ReadonlyArray<Message>, s: number) => Either.getOrThrow(addMessages(messages, stepWrite(s)))

const time = (f: () => void): number => {
  const start = process.hrtime.bigint()
  f()
  return Number(process.hrtime.bigint() - start) / 1000
}

const stats = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length
  const round = (x: number) => Math.round(x * 100) / 100
  return { samples: sorted.length, mean_us: round(mean), median_us: round(at(0.5)), p95_us: round(at(0.95)) }
}

/** The check exactly as the middleware runs it. */
const check = (totals: Tokens.Totals, messages: ReadonlyArray<Message>) =>
  Summarization.firstHit(messages, null, triggers, undefined, () => totals.of(messages).total)

const triggerCheck = (n: number) => {
  const base = thread(n)
  const counter = Tokens.makeCounter()
  let serial = 0
  // Cached: one running-totals tracker per run (episode); the thread grows by one tool-call group per step.
  // `precount` tokenizes the step's new messages before the timer starts, leaving only the check's overhead.
  const episodes = (precount: boolean) => {
    const steps: Array<number> = []
    const firsts: Array<number> = []
    for (let e = 0; e < EPISODES; e++) {
      const totals = Tokens.makeTotals(counter)
      let messages = base
      firsts.push(time(() => check(totals, messages)))
      for (let s = 0; s < STEPS; s++) {
        messages = grow(messages, serial++)
        if (precount) for (let i = messages.length - 2; i < messages.length; i++) counter.message(messages[i]!)
        steps.push(time(() => check(totals, messages)))
      }
    }
    return { steps, firsts }
  }
  episodes(false) // warm-up (JIT, tokenizer caches)
  const cached = episodes(false)
  const overhead = episodes(true)
  // Uncached: a fresh counter every step, so every message is tokenized again.
  const uncached: Array<number> = []
  let messages = base
  for (let s = 0; s < UNCACHED_STEPS; s++) {
    messages = grow(messages, serial++)
    uncached.push(time(() => check(Tokens.makeTotals(Tokens.makeCounter()), messages)))
  }
  const fresh = thread(n)
  const first = time(() => Tokens.makeTotals(Tokens.makeCounter()).of(fresh))
  return {
    messages: n,
    tokens: Tokens.makeTotals(counter).of(base).total,
    tokens_added_per_step: Tokens.totalTokens(stepWrite(0)),
    cached_per_step: stats(cached.steps),
    cached_per_step_excluding_tokenizing_the_2_new_messages: stats(overhead.steps),
    uncached_per_step: stats(uncached),
    first_check_of_a_run_messages_counted_before: stats([...cached.firsts, ...overhead.firsts]),
    first_check_of_a_thread_never_counted_us: Math.round(first)
  }
}

/** Per model call: Summarization (not firing) + DurableContext (summary present) over a no-op model. */
const wrappers = (n: number) =>
  Effect.gen(function*() {
    const start = thread(n)
    let state: ThreadState = { ...TS.empty, messages: start, summary_text: prose(1, 400) }
    const base = MW.base({ generate: () => Effect.succeed({ message: M.ai("ok") }) }, Toolkit.make([]))
    const config = { ...defaults(), summarization: { ...defaults().summarization, enabled: true, trigger: triggers } }
    const app = Context.make(AppConfigService, { config, source: undefined, home: "/tmp", ignored: [] })
    const run = Context.make(RunState, { get: Effect.sync(() => state), update: () => Effect.void }).pipe(
      Context.add(RunContext, {
        threadId: "bench",
        runId: "bench",
        userId: "bench",
        options: { recursionLimit: 100, toolConcurrency: 1 },
        stopReason: Effect.succeed(undefined),
        setStopReason: () => Effect.void
      }),
      Context.add(RunEvents, RunEvents.discard)
    )
    const scope = yield* Scope.make()
    const stack = MW.stack([DurableContext.layer(), Summarization.layer()], base)
    const ports = yield* Layer.buildWithScope(stack, scope).pipe(Effect.provide(app))
    const model = Context.get(ports, ModelService)
    const request = (): ModelRequest => ({ systemPrompt: "p", messages: state.messages, tools: [], settings: {} })
    const samples: Array<number> = []
    // every call inside one run, as the loop makes them (the middlewares' per-run state lives there)
    const calls = Effect.gen(function*() {
      for (let s = 0; s < STEPS; s++) {
        state = { ...state, messages: grow(state.messages, -1 - s) }
        yield* model.generate(request())
      }
      for (let s = 0; s < EPISODES * STEPS; s++) {
        if (s % STEPS === 0) state = { ...state, messages: start }
        state = { ...state, messages: grow(state.messages, s) }
        const req = request()
        const t0 = process.hrtime.bigint()
        yield* model.generate(req)
        samples.push(Number(process.hrtime.bigint() - t0) / 1000)
      }
      return { type: "run_end", status: "success", stop_reason: "completed" } as const
    })
    yield* Context.get(ports, AgentHooks).around(Effect.orDie(calls)).pipe(Effect.provide(run), Effect.orDie)
    yield* Scope.close(scope, Exit.void)
    return { messages: n, ...stats(samples) }
  })

const results = SIZES.map(triggerCheck)
const perCall = SIZES.map((n) => Effect.runSync(wrappers(n)))
console.log(JSON.stringify(
  {
    bench: "summarization-check",
    profile: quick ? "quick" : "full",
    note: "Microseconds per step; a step adds one tool-call group (2 messages). cached = per-message counts and " +
      "running totals as the middleware keeps them (the step's new messages are tokenized once); uncached = every " +
      "message re-tokenized on every check. Means include GC pauses; compare medians.",
    trigger_check: results,
    summarization_and_durable_context_per_model_call: perCall
  },
  null,
  2
))
