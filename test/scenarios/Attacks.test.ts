/**
 * Attacks on a thread through the real CLI (issue 7, items 4 and 5): child processes
 * (`node --import tsx src/programs/main.ts`) sharing one ANTLER_HOME (one SQLite file), against a scripted
 * Chat Completions server in this process, with the real `bash` tool (bubblewrap sandbox).
 *
 * - Two runs on one thread at once: one runs, the other is refused (`ThreadBusy`, exit 1) before it asks the
 *   model anything; the lease is given back at the end, and one a SIGKILLed process left is taken over at once.
 * - SIGKILL during bash, again and again: nothing is executed twice, every call is answered exactly once (a
 *   call a kill left open is answered "interrupted"), and the SQLite file stays intact.
 */
import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import * as Run from "../../src/programs/Run.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { antlerCommand, childEnv } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"

// Each CLI process takes a few seconds of CPU to start (tsx); on a loaded machine much longer.
const SLOW = 300_000
const SLOWER = 600_000

/** The config children read: long-term memory off (its update would be one more model call per run). */
const QUIET_CONFIG = Path.join(tempDir("antler-attack-config-"), "config.yaml")
Fs.writeFileSync(QUIET_CONFIG, "memory:\n  enabled: false\n")

interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

interface Spawned {
  readonly child: ChildProcess.ChildProcess
  readonly exited: () => boolean
  readonly done: Promise<Result>
}

/**
 * What a test did so far (processes started and ended, phases), with times: printed when the test fails or
 * times out, to tell a hang from a slow machine.
 */
interface Trail {
  readonly note: (what: string) => void
  readonly text: () => string
}

const makeTrail = (): Trail => {
  const started = Date.now()
  const notes: Array<string> = []
  return {
    note: (what) => void notes.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${what}`),
    text: () => notes.join("\n")
  }
}

/** Runs `test(trail)`, printing the trail (and `context`) when it fails or is interrupted (a timeout). */
const traced = <A, E>(name: string, test: (trail: Trail) => Effect.Effect<A, E>, context = () => "") =>
  Effect.suspend(() => {
    const trail = makeTrail()
    return test(trail).pipe(
      Effect.onExit((exit) =>
        Exit.isSuccess(exit)
          ? Effect.void
          : Effect.sync(() => console.error(`${name} failed${context()}; what it did:\n${trail.text()}`))
      )
    )
  })

/** Runs `antler ...` from sources with `home` as its data directory (and working directory). */
const antler = (trail: Trail, home: string, args: ReadonlyArray<string>): Spawned => {
  const child = ChildProcess.spawn(process.execPath, [...antlerCommand, ...args], {
    env: childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: QUIET_CONFIG }),
    cwd: home,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const what = `${args[0]} … ${args.slice(-3).join(" ")} (pid ${child.pid})`
  trail.note(`started ${what}`)
  let stdout = ""
  let stderr = ""
  let exited = false
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const done = new Promise<Result>((resolve) =>
    child.on("close", (code, signal) => {
      exited = true
      trail.note(`ended ${what}: ${signal ?? `exit ${code}`}`)
      resolve({ code, signal, stdout, stderr })
    })
  )
  return { child, exited: () => exited, done }
}

/** `antler` in the scope: killed when the scope closes before it ends (a failed test leaves no process behind). */
const antlerScoped = (trail: Trail, home: string, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(Effect.sync(() => antler(trail, home, args)), (run) =>
    Effect.sync(() => {
      if (!run.exited()) run.child.kill("SIGKILL")
    }))

/** Runs `antler ...` to its end. */
const antlerDone = (trail: Trail, home: string, args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.flatMap(antlerScoped(trail, home, args), (run) => Effect.promise(() => run.done)))

/** Waits until `check()` holds (polling), at most `ms`. */
const waitFor = (check: () => boolean, what: string, ms = 120_000) =>
  Effect.promise(async (signal) => {
    const started = Date.now()
    while (!check() && !signal.aborted) {
      if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })

const output = (r: Result) => `${r.signal ?? `exit ${r.code}`}\n${r.stdout}${r.stderr}`

/** Where the sandbox's `/mnt/user-data/workspace` of a thread is on the host. */
const workspaceOf = (home: string, threadId: string) =>
  Path.join(home, "users", "default", "threads", threadId, "user-data", "workspace")

const lines = (file: string): ReadonlyArray<string> =>
  Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []

/** The saved thread, loaded by the SQLite store from the file the CLI wrote. */
const loadThread = (home: string, threadId: string) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    const loaded = yield* store.load(threadId)
    assert.isTrue(Option.isSome(loaded), `thread ${threadId} is saved`)
    return Option.getOrThrow(loaded)
  }).pipe(Effect.provide(SqliteThreadStore.layerFromHome(home)), Effect.orDie)

/** Queries the SQLite file directly, read-only, as another program would. */
const query = <A extends object>(home: string, sql: string) =>
  Effect.flatMap(SqlClient.SqlClient, (client) => client.unsafe<A>(sql)).pipe(
    Effect.provide(SqliteClient.layer({ filename: Path.join(home, SqliteThreadStore.FILENAME), readonly: true })),
    Effect.orDie
  )

interface LeaseRow {
  readonly thread_id: string
  readonly run_id: string
  readonly owner: string
  readonly expires_at: number
}

const leasesOf = (home: string) => query<LeaseRow>(home, "SELECT thread_id, run_id, owner, expires_at FROM leases")

/** For every tool call of the thread, how many results answer it; and results that answer no call. */
const pairing = (messages: ReadonlyArray<Message>) => {
  const answers = new Map<string, number>()
  for (const message of messages) for (const call of M.toolCalls(message)) answers.set(call.id, 0)
  const orphans: Array<string> = []
  for (const message of messages) {
    if (message.type !== "tool") continue
    const count = answers.get(message.tool_call_id)
    if (count === undefined) orphans.push(message.tool_call_id)
    else answers.set(message.tool_call_id, count + 1)
  }
  return { answers, orphans }
}

const bashCall = (description: string, command: string) => ({ name: "bash", arguments: { description, command } })

/** The user's words in the last user message (the harness frames them as user input). */
const lastUserText = (body: ChatRequestBody): string => {
  const user = body.messages.findLast((m) => m.role === "user")
  const content = typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? "")
  return /--- BEGIN USER INPUT ---\n([^]*)\n--- END USER INPUT ---/.exec(content)?.[1] ?? content
}

/** Tool results after the last user message: the steps this run made so far. */
const stepsOfRun = (body: ChatRequestBody): number => {
  const from = body.messages.findLastIndex((m) => m.role === "user")
  return body.messages.slice(from + 1).filter((m) => m.role === "tool").length
}


const WS = "/mnt/user-data/workspace"

// ---------------------------------------------------------------------------------------------------------
// 4. Two runs on one thread

describe("two runs on one thread", () => {
  const STEPS = 4
  const threadId = "shared"

  /** A data directory and a slow scripted model for `shared`; bash steps wait at gates the test opens. */
  const setup = Effect.gen(function*() {
    const home = tempDir("antler-attack-busy-")
    const workspace = workspaceOf(home, threadId)
    // A gate is its `<name>.started` file: the command makes it (empty) and waits until it has content, which the
    // test appends on the host. A file the host creates while the command waits may stay invisible in the
    // sandbox (overlayfs keeps the name it looked up as missing), so the gate writes into a file both see.
    const open = (name: string) => {
      Fs.mkdirSync(workspace, { recursive: true })
      Fs.appendFileSync(Path.join(workspace, `${name}.started`), "open\n")
    }
    const gate = (name: string) =>
      `touch ${WS}/${name}.started; while [ ! -s ${WS}/${name}.started ]; do sleep 0.02; done`
    // The model: "hold" waits at the `release` gate; "third..." answers at once; any other prompt P logs
    // P-step-0..3 with bash, step 0 waiting at the `go` gate first, then answers.
    const server = yield* ScriptedChatServer.start((body): Turn => {
      const prompt = lastUserText(body)
      const step = stepsOfRun(body)
      if (prompt.startsWith("third")) return "The third run answers."
      if (prompt === "hold") {
        const hold = bashCall("Hold the thread", gate("release"))
        return step === 0 ? { content: "Holding.", toolCalls: [hold] } : "Released."
      }
      if (step >= STEPS) return `All ${STEPS} steps done for ${prompt}.`
      const log = `echo ${prompt}-step-${step} >> ${WS}/exec.log`
      const command = step === 0 ? `${gate("go")}; ${log}` : log
      return { content: `Step ${step}.`, toolCalls: [bashCall(`Step ${step}`, command)] }
    }, { delayMs: 5 })
    // whatever happens, no sandboxed loop outlives the test
    yield* Effect.addFinalizer(() => Effect.sync(() => ["go", "release"].forEach(open)))
    const args = (prompt: string, ...flags: ReadonlyArray<string>) =>
      ["run", ...flags, "--base-url", server.url, "--api-key", "x", "--thread", threadId, prompt]
    return { home, workspace, open, server, args }
  })

  it.live("at once: one runs, the other is refused in one line (exit 1); the steps are saved once each, in order", () =>
    traced("two runs at once", (trail) =>
      Effect.scoped(Effect.gen(function*() {
        const { args, home, open, server, workspace } = yield* setup
        // Both processes are alive together whatever the scheduling: the first step of a run waits at the gate,
        // opened when one of them has exited, or when the model was asked twice without a step (two runs got
        // in: the attack worked).
        const one = yield* antlerScoped(trail, home, args("one"))
        const two = yield* antlerScoped(trail, home, args("two"))
        yield* waitFor(
          () => one.exited() || two.exited() || server.requests.filter((body) => stepsOfRun(body) === 0).length >= 2,
          "one of the two runs to end, or both to ask the model"
        )
        trail.note("gate opened")
        open("go")
        const [first, second] = yield* Effect.promise(() => Promise.all([one.done, two.done]))
        assert.deepStrictEqual([first!.code, second!.code].sort(), [0, 1], `${output(first!)}\n--\n${output(second!)}`)
        const [winner, winnerPid, loser] = first!.code === 0
          ? ["one", one.child.pid, second!]
          : ["two", two.child.pid, first!]

        // The model was asked only by the run that got the thread: one conversation, one step more each time.
        assert.strictEqual(server.requests.length, STEPS + 1)
        server.requests.forEach((body, i) => {
          assert.strictEqual(lastUserText(body), winner, `request ${i} comes from the other run`)
          assert.strictEqual(stepsOfRun(body), i)
        })
        // Every step ran once, in order; the saved thread is that one run, not interleaved with another.
        assert.deepStrictEqual(lines(Path.join(workspace, "exec.log")), [0, 1, 2, 3].map((i) => `${winner}-step-${i}`))
        const thread = yield* loadThread(home, threadId)
        // (the date reminder DynamicContext adds before the first question is hidden from the user)
        const messages = thread.state.messages.filter((m) => m.additional_kwargs?.hide_from_ui !== true)
        const shape = ["human", ...Array(STEPS).fill(["ai", "tool"]).flat(), "ai"]
        assert.deepStrictEqual(messages.map((m) => m.type), shape)
        assert.strictEqual(M.text(messages.at(-1)!), `All ${STEPS} steps done for ${winner}.`)
        assert.deepStrictEqual(
          messages.flatMap((m) => (m.type === "tool" ? [m.status ?? "success"] : [])),
          Array(STEPS).fill("success")
        )
        assert.deepStrictEqual(thread.runs.map((r) => r.status), ["success"])

        // The refused run says so in one line naming the thread and the run that holds it; no stack, nothing else.
        const holder = `run ${thread.runs[0]!.run_id}, process ${Os.hostname()}:${winnerPid}`
        assert.deepStrictEqual(loser.stdout.split("\n").slice(1), [
          `error: Thread ${threadId} already has a run in progress (${holder}); wait for it to end or stop it, ` +
          `then try again.`,
          ""
        ], `the refused run printed:\n${output(loser)}`)
        // (both may have looked before either saved the thread: the refused one then took it for new, and must
        // not have deleted it, files included, which the steps above show)
        const header = `^thread ${threadId} \\((continuing|new; continue it with --continue)\\)`
        assert.match(loser.stdout, new RegExp(header))
        assert.strictEqual(loser.stderr, "")

        // The lease was given back: a third run on the thread goes through.
        assert.deepStrictEqual(yield* leasesOf(home), [])
        const third = yield* antlerDone(trail, home, args("third"))
        assert.strictEqual(third.code, 0, output(third))
        assert.include(third.stdout, "The third run answers.")
      }))), SLOW)

  it.live("a run killed with SIGKILL leaves its lease; the next run on this host takes the thread over at once", () =>
    traced("takeover after SIGKILL", (trail) =>
      Effect.scoped(Effect.gen(function*() {
        const { args, home, workspace } = yield* setup
        // A run killed with SIGKILL in the middle of a tool leaves its lease behind...
        const held = yield* antlerScoped(trail, home, args("hold"))
        yield* waitFor(() => Fs.existsSync(Path.join(workspace, "release.started")), "the held run's bash to start")
        // (while it is alive, another run is refused; in JSON its end is `ThreadBusy`)
        const refused = yield* antlerDone(trail, home, args("refused", "--json"))
        assert.strictEqual(refused.code, 1, output(refused))
        const end = JSON.parse(refused.stdout.trim().split("\n").at(-1)!)
        assert.deepInclude(end, { type: "run_end", status: "error", thread_id: threadId })
        assert.strictEqual(end.error.name, "ThreadBusy")
        assert.include(end.error.message, `process ${Os.hostname()}:${held.child.pid})`)
        held.child.kill("SIGKILL")
        assert.strictEqual((yield* Effect.promise(() => held.done)).signal, "SIGKILL")
        const [left] = yield* leasesOf(home)
        assert.strictEqual(left?.owner, `${Os.hostname()}:${held.child.pid}`)
        // ...which the next run on this host takes over at once, before it expires: the holder's process is gone.
        const after = yield* antlerDone(trail, home, args("third, after the kill"))
        assert.strictEqual(after.code, 0, output(after))
        assert.include(after.stdout, "The third run answers.")
        const resumed = yield* loadThread(home, threadId)
        assert.isBelow(Date.parse(resumed.runs.at(-1)!.started_at), left!.expires_at, "taken over before expiry")
        assert.deepStrictEqual(resumed.runs.map((r) => r.status), ["cancelled", "success"])
        // the call the killed run left open is answered: interrupted, may have partly run
        const results = resumed.state.messages.filter((m) => m.type === "tool")
        assert.deepStrictEqual(results.map(M.text), [Run.INTERRUPTED_TOOL_RESULT])
        assert.deepStrictEqual(yield* leasesOf(home), [])
      }))), SLOW)
})

// ---------------------------------------------------------------------------------------------------------
// 5. SIGKILL during bash

/** A small seeded generator (mulberry32): the same seed gives the same kill schedule. */
const seeded = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Where a kill is aimed: while the model streams, while bash sleeps after its echo, or anywhere in a step. */
type Aim = "streaming" | "bash" | "anywhere"

describe("SIGKILL during bash", () => {
  // Two threads side by side on one data directory (one SQLite file), each killed 10 times: 20 kills, in about
  // half the time (a CLI process takes seconds to start).
  const THREADS = ["red", "blue"]
  const KILLS_EACH = 10
  const FINAL_STEPS = 3

  it.live("resumed after every kill, nothing runs twice and every call has exactly one result", () => {
    const seed = Number(process.env.ATTACK_SEED ?? Math.floor(Math.random() * 2 ** 31))
    const reproduce = `seed ${seed} (reproduce with ATTACK_SEED=${seed})`
    return traced("SIGKILL during bash", (trail) => Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-attack-kill-")
      const firstPrompt = (threadId: string) => `Log markers for thread ${threadId}, one per step.`
      // Each model call asks bash to log a marker of its own and sleep; in the last run, after a few more
      // steps, the model answers instead.
      const finishing = new Set<string>()
      const requests = new Map<string, number>()
      const server = yield* ScriptedChatServer.start((body, call): Turn => {
        const text = JSON.stringify(body.messages)
        const threadId = THREADS.find((id) => text.includes(firstPrompt(id)))!
        requests.set(threadId, (requests.get(threadId) ?? 0) + 1)
        return finishing.has(threadId) && stepsOfRun(body) >= FINAL_STEPS ? "All markers are logged." : {
          content: `Logging marker ${call}.`,
          toolCalls: [bashCall(`Log marker ${call}`, `echo m-${call} >> ${WS}/exec.log; sleep 0.3`)]
        }
      }, { delayMs: 8 })
      const asked = (threadId: string) => requests.get(threadId) ?? 0
      const args = (threadId: string, prompt: string) =>
        ["run", "--base-url", server.url, "--api-key", "x", "--thread", threadId, prompt]

      /** Starts a run on the thread, kills it at a moment the seed picks, KILLS_EACH times; then lets one finish. */
      const attack = (threadId: string, index: number) =>
        Effect.gen(function*() {
          const random = seeded(seed + index)
          const execLog = Path.join(workspaceOf(home, threadId), "exec.log")
          const aims: Array<string> = []
          for (let kill = 0; kill < KILLS_EACH; kill++) {
            const aim: Aim = (["streaming", "bash", "anywhere"] as const)[(kill + index) % 3]!
            const delay = Math.floor(random() * (aim === "streaming" ? 120 : aim === "bash" ? 250 : 1000))
            aims.push(`${aim}+${delay}ms`)
            const before = { asked: asked(threadId), logged: lines(execLog).length }
            const where = `${threadId} run ${kill}`
            trail.note(`${where}: kill aimed ${aim}+${delay}ms`)
            const prompt = kill === 0 ? firstPrompt(threadId) : "continue"
            const run = yield* antlerScoped(trail, home, args(threadId, prompt))
            // past its start-up (the lease taken, the thread loaded): it asks the model
            yield* waitFor(() => run.exited() || asked(threadId) > before.asked, `${where} to ask the model`)
            if (aim === "bash") yield* waitFor(() => run.exited() || lines(execLog).length > before.logged, where)
            yield* Effect.sleep(delay)
            run.child.kill("SIGKILL")
            const result = yield* Effect.promise(() => run.done)
            assert.strictEqual(result.signal, "SIGKILL", `${reproduce}: ${where} ended by itself: ${output(result)}`)
          }
          finishing.add(threadId)
          const last = yield* antlerDone(trail, home, args(threadId, "continue"))
          assert.strictEqual(last.code, 0, `${reproduce}: ${output(last)}`)
          assert.include(last.stdout, "All markers are logged.")
          return { threadId, execLog, aims }
        })
      const attacked = yield* Effect.all(THREADS.map(attack), { concurrency: "unbounded" })

      for (const { threadId, execLog, aims } of attacked) {
        // The thread loads, and every tool call in it has exactly one result.
        const thread = yield* loadThread(home, threadId)
        const messages = thread.state.messages
        const { answers, orphans } = pairing(messages)
        assert.deepStrictEqual(orphans, [], reproduce)
        assert.deepStrictEqual([...answers].filter(([, count]) => count !== 1), [], reproduce)
        // Every killed run is recorded as cancelled (by the run after it), the last one as a success.
        const statuses = thread.runs.map((r) => r.status)
        assert.deepStrictEqual(statuses, [...Array(KILLS_EACH).fill("cancelled"), "success"], reproduce)

        // Executions: the markers bash logged. None twice, none of a call the thread does not hold.
        const executed = lines(execLog)
        const ran = new Set(executed)
        assert.strictEqual(ran.size, executed.length, `${reproduce}: a command ran twice: ${executed.join(" ")}`)
        const calls = messages.flatMap((m) => M.toolCalls(m))
        const markerOf = (call: M.ToolCall) => /echo (m-\d+) >>/.exec(String(call.args.command))?.[1] ?? "?"
        const saved = new Set(calls.map(markerOf))
        assert.deepStrictEqual(executed.filter((marker) => !saved.has(marker)), [], `${reproduce}: ran, never saved`)
        // Results: a real one for a call that ran to its end, else "interrupted" (it may have partly run).
        const resultOf = new Map(messages.flatMap((m) => (m.type === "tool" ? [[m.tool_call_id, m] as const] : [])))
        const interrupted = calls.filter((call) => M.text(resultOf.get(call.id)!) === Run.INTERRUPTED_TOOL_RESULT)
        for (const call of calls.filter((call) => !interrupted.includes(call))) {
          assert.strictEqual(resultOf.get(call.id)!.status ?? "success", "success", reproduce)
          assert.isTrue(ran.has(markerOf(call)), `${reproduce}: ${markerOf(call)} has a result but never ran`)
        }
        // A kill after the model's message was saved and before bash got to its echo leaves a call that never
        // started: answered "interrupted" too, with nothing logged. Every other result is one execution.
        const neverStarted = interrupted.filter((call) => !ran.has(markerOf(call)))
        const counts = `${threadId}: ${executed.length} executions, ${calls.length} results (${interrupted.length} ` +
          `interrupted, ${neverStarted.length} of them before bash started); kills aimed ${aims.join(" ")}`
        assert.strictEqual(executed.length, calls.length - neverStarted.length, `${reproduce}: ${counts}`)
        assert.isAbove(interrupted.length - neverStarted.length, 0, `${reproduce}: no kill landed in bash: ${counts}`)
        console.log(`SIGKILL during bash, ${reproduce}: ${counts}`)
      }

      console.log(`SIGKILL during bash, ${reproduce}: ${server.aborted.length} model streams cut by a kill`)

      // The SQLite file survived every kill; no lease is left.
      assert.deepStrictEqual(yield* query<{ integrity_check: string }>(home, "PRAGMA integrity_check"), [
        { integrity_check: "ok" }
      ])
      assert.deepStrictEqual(yield* leasesOf(home), [])
    })), () => ` with ${reproduce}`)
  }, SLOWER)
})
