/**
 * Long-term memory against a hostile memory model, and stopping, as users run `antler`: child processes against
 * a scripted Chat Completions server. A memory model's 2 MB answer is stored within the memory limits and without
 * the configured key, and the next run reaches its model at once; counting a memory is linear (a memory over
 * the default limits, allowed by raised ones, does not hold the run); SIGTERM stops `antler run` in a phase that
 * used to hold the main thread for minutes, and stops `antler run` and `antler serve` with a memory update still
 * pending. Deadlines are generous (seconds); what took minutes before fails them.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, ScriptedChatServer, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as Scripted from "../../src/layers/ScriptedChatServer.js"
import { antlerCommand } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"

const SLOW = 180_000
const KEY = "sk-test-memory-safety-0123456789"
const MEMORY_PROMPT = "You maintain the long-term memory"
/** How long a run may take from printing its thread line to asking its model (it takes well under a second). */
const REACH_MODEL_MS = 8_000
/** How long `antler` may take to end after SIGTERM (the requirement is 2 s; this allows for a loaded machine). */
const STOP_MS = 5_000

const text = (content: unknown) => (typeof content === "string" ? content : JSON.stringify(content ?? ""))
const isMemoryCall = (body: ChatRequestBody) => text(body.messages[0]?.content).startsWith(MEMORY_PROMPT)
const asks = (server: ScriptedChatServer, prompt: string) => () =>
  server.requests.some((r) => !isMemoryCall(r) && r.messages.some((m) => text(m.content).includes(prompt)))

interface Child {
  readonly child: ChildProcess.ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const children: Array<ChildProcess.ChildProcess> = []
afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
})

const antler = (home: string, args: ReadonlyArray<string>): Child => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
  }
  const child = ChildProcess.spawn(process.execPath, [...antlerCommand, ...args], {
    env: { ...env, ANTLER_HOME: home, NO_COLOR: "1" },
    cwd: home,
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let out = ""
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { child, output: () => out, exited }
}

/** Waits until `check` holds, failing after `ms` with what was awaited. */
const until = (check: () => boolean, what: string, ms: number) =>
  Effect.promise(async () => {
    const started = Date.now()
    while (!check()) {
      if (Date.now() - started > ms) return `timed out after ${ms} ms waiting for ${what}`
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return undefined
  }).pipe(Effect.flatMap((failure) => (failure === undefined ? Effect.void : Effect.die(new Error(failure)))))

/** The exit code of a child that must end within `ms`. */
const endsWithin = (child: Child, ms: number, what: string) =>
  Effect.promise(() =>
    Promise.race([
      child.exited.then((code) => ({ code })),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms))
    ])
  ).pipe(
    Effect.flatMap((ended) =>
      ended === undefined
        ? Effect.die(new Error(`${what}: still running ${ms} ms after SIGTERM`))
        : Effect.succeed(ended.code)
    )
  )

const threadLine = (child: Child) => () => /^thread \S+ \(/m.test(child.output())

const writeConfig = (home: string, lines: ReadonlyArray<string> = []) => {
  const file = Path.join(home, "config.yaml")
  Fs.writeFileSync(file, ["memory:", "  enabled: true", ...lines, ""].join("\n"))
  return file
}

/** A memory file as an older Antler (or anyone) may have left it: one summary of `chars` letters without spaces. */
const writeMemory = (home: string, chars: number) => {
  const file = Path.join(home, "users", "default", "memory.json")
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, JSON.stringify({
    user: { workContext: { summary: "a".repeat(chars) } },
    facts: [{ id: "f1", content: "数据工程师".repeat(Math.floor(chars / 20)), confidence: 0.9 }]
  }))
  return file
}

/** The write gate's labels of a summary that is the user's. */
const USER_SUMMARY = { scope: "user", authority: "descriptive" } as const

describe("a hostile memory model", () => {
  it.live("its 2 MB update is stored within the limits, without the key; the next run reaches its model at once", () =>
    Effect.scoped(Effect.gen(function*() {
      const hostile = JSON.stringify({
        user: {
          workContext: { summary: `Key ${KEY}. ${"w".repeat(700_000)}`, shouldUpdate: true, ...USER_SUMMARY },
          topOfMind: { summary: "t".repeat(300_000), shouldUpdate: true, ...USER_SUMMARY }
        },
        history: { longTermBackground: { summary: "数".repeat(100_000), shouldUpdate: true, ...USER_SUMMARY } },
        newFacts: Array.from({ length: 3000 }, (_, i) => ({
          content: `${i} ${KEY} ${"f".repeat(250)}`,
          category: "context",
          confidence: 0.9,
          // labelled as the write gate keeps it: what is tested is what the limits do to a hostile answer
          scope: "user",
          durability: "durable",
          authority: "descriptive"
        }))
      })
      assert.isAbove(hostile.length, 2_000_000)
      const server = yield* Scripted.start((body): Turn => (isMemoryCall(body) ? hostile : "Noted."))
      const home = tempDir("antler-hostile-memory-")
      const config = writeConfig(home)
      const model = ["--base-url", server.url, "--api-key", KEY, "--config", config]
      const first = antler(home, ["run", ...model, "--thread", "h1", "I am a data engineer"])
      assert.strictEqual(yield* Effect.promise(() => first.exited), 0, first.output())
      assert.isTrue(server.requests.some(isMemoryCall))
      assert.include(first.output(), "over its limits")
      const stored = Fs.readFileSync(Path.join(home, "users", "default", "memory.json"), "utf8")
      assert.notInclude(stored, KEY)
      const doc = JSON.parse(stored)
      assert.strictEqual(doc.user.workContext.summary, `Key [redacted]. ${"w".repeat(4000 - 16)}`)
      assert.lengthOf(doc.user.topOfMind.summary, 4000)
      assert.lengthOf(doc.history.longTermBackground.summary, 4000)
      assert.lengthOf(doc.facts, 100)
      for (const fact of doc.facts) {
        assert.isAtMost(fact.content.length, 1000)
        assert.match(fact.content, /^\d+ \[redacted\] f+$/)
      }
      assert.isBelow(stored.length, 200_000)

      const second = antler(home, ["run", ...model, "--thread", "h2", "Start a Python project"])
      yield* until(threadLine(second), "the second run's thread line", 60_000)
      yield* until(asks(server, "Start a Python project"), "the second run to ask its model", REACH_MODEL_MS)
      assert.strictEqual(yield* Effect.promise(() => second.exited), 0, second.output())
      const request = server.requests.find((r) =>
        !isMemoryCall(r) && r.messages.some((m) => text(m.content).includes("Start a Python project"))
      )!
      const memory = request.messages.map((m) => text(m.content))
        .find((t) => t.startsWith("<memory>\n"))!
      // the summaries come first and take the injection budget (DeerMem's order), cut with its "\n..." marker
      assert.match(memory, /^<memory>\nUser Context:\n- Work: Key \[redacted\]\. w+/)
      assert.include(memory, "\n...")
      assert.notInclude(JSON.stringify(server.requests.slice(-2)), KEY)
    })), SLOW)

  it.live("a memory of 256 KB without a space, allowed by raised limits, does not hold the run (linear counting)", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* Scripted.start((body): Turn => (isMemoryCall(body) ? "{}" : "Noted."))
      const home = tempDir("antler-long-memory-")
      const config = writeConfig(home, [
        "  backend_config:",
        "    max_summary_chars: 1000000",
        "    max_fact_chars: 1000000"
      ])
      writeMemory(home, 256 * 1024)
      const run = antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--config", config, "hello there"])
      yield* until(threadLine(run), "the run's thread line", 60_000)
      yield* until(asks(server, "hello there"), "the run to ask its model", REACH_MODEL_MS)
      assert.strictEqual(yield* Effect.promise(() => run.exited), 0, run.output())
      const request = server.requests.find((r) => !isMemoryCall(r))!
      assert.isTrue(request.messages.some((m) => text(m.content).startsWith("<memory>\n")))
    })), SLOW)
})

describe("antler memory show", () => {
  it.live("shows a memory.json over the limits as the agent reads it: cut to them, without the configured key", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-show-memory-")
      const config = writeConfig(home)
      const models = ["models:", "  - name: main", "    model: main-model", `    api_key: ${KEY}`, ""]
      Fs.appendFileSync(config, models.join("\n"))
      const file = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, JSON.stringify({
        user: { workContext: { summary: `Key ${KEY}. ${"w".repeat(10_000)}` } },
        facts: Array.from({ length: 150 }, (_, i) => ({
          id: `f${i}`,
          content: `${i} ${"x".repeat(2000)}`,
          confidence: 0.8
        }))
      }))
      const show = antler(home, ["memory", "show", "--json", "--config", config])
      assert.strictEqual(yield* Effect.promise(() => show.exited), 0, show.output())
      assert.notInclude(show.output(), KEY)
      const doc = JSON.parse(show.output().split("\n").find((line) => line.startsWith("{"))!)
      assert.strictEqual(doc.user.workContext.summary, `Key [redacted]. ${"w".repeat(4000 - 16)}`)
      assert.lengthOf(doc.facts, 100)
      assert.isTrue(doc.facts.every((f: { content: string }) => f.content.length === 1000))
    }), SLOW)
})

describe("SIGTERM", () => {
  it.live("stops `antler run` within seconds in the phase that held it (a 2 MB memory.json to read and count)", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* Scripted.start((): Turn => ({ content: "Thinking", stall: true }))
      const home = tempDir("antler-stop-run-")
      const config = writeConfig(home)
      writeMemory(home, 2 * 1024 * 1024)
      const run = antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--config", config, "hello"])
      yield* until(threadLine(run), "the run's thread line", 60_000)
      // the memory is read and counted right after the thread line (it held the process for minutes)
      yield* Effect.sleep("1500 millis")
      run.child.kill("SIGTERM")
      const code = yield* endsWithin(run, STOP_MS, "antler run")
      assert.strictEqual(code, 130, run.output())
      assert.include(run.output(), "cancelled")
    })), SLOW)

  it.live("stops `antler run` within seconds while it updates long-term memory (the memory model never answers)", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* Scripted.start((body): Turn => (isMemoryCall(body) ? { hang: true } : "Noted."))
      const home = tempDir("antler-stop-flush-")
      const config = writeConfig(home)
      const run = antler(home, ["run", "--base-url", server.url, "--api-key", "x", "--config", config, "I use uv"])
      yield* until(() => server.requests.some(isMemoryCall), "the memory update's model call", 60_000)
      assert.include(run.output(), "updating long-term memory…")
      run.child.kill("SIGTERM")
      const code = yield* endsWithin(run, STOP_MS, "antler run")
      assert.strictEqual(code, 130, run.output())
      // the update is dropped, not lost: its turns are read after the thread's next run
      assert.include(run.output(), "Memory updates still pending when the app stopped were dropped")
    })), SLOW)

  it.live("stops `antler serve` within seconds with a memory update pending (the memory model never answers)", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* Scripted.start((body): Turn => (isMemoryCall(body) ? { hang: true } : "Noted."))
      const home = tempDir("antler-stop-serve-")
      // debounce 0: the update starts after the run, and its model call hangs
      const config = writeConfig(home, ["  backend_config:", "    debounce_seconds: 0"])
      const serve = antler(home, [
        "serve", "--port", "0", "--base-url", server.url, "--api-key", "x", "--config", config
      ])
      yield* until(() => /listening on http:\/\/\S+/.test(serve.output()), "the gateway to listen", 60_000)
      const url = /listening on (http:\/\/\S+)/.exec(serve.output())![1]!
      const post = (path: string, body: unknown) =>
        fetch(`${url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body)
        }).then((r) => r.text())
      const thread = JSON.parse(yield* Effect.promise(() => post("/threads", {}))).thread_id
      const answer = yield* Effect.promise(() =>
        post(`/threads/${thread}/runs/wait`, {
          assistant_id: "lead_agent",
          input: { messages: [{ type: "human", content: "I use uv" }] }
        })
      )
      assert.include(answer, "Noted.")
      yield* until(() => server.requests.some(isMemoryCall), "the memory update's model call", 30_000)
      serve.child.kill("SIGTERM")
      const code = yield* endsWithin(serve, STOP_MS, "antler serve")
      assert.strictEqual(code, 130, serve.output())
    })), SLOW)
})
