/**
 * `npm run bench:serve`: `antler serve` under load. The gateway runs as users run it (`node <cli> serve`, by
 * default a bundle of the current sources made as `npm run build` makes dist/cli/), over its SQLite thread store,
 * with a SCRIPTED model on a loopback Chat Completions server (in this process, reached by the gateway through
 * the real `openai` client). N clients at once, each a conversation: it creates a thread, then runs T turns on
 * it one after the other, each a streamed run (`POST /threads/{id}/runs/stream`, stream modes `values` and
 * `messages-tuple`, as DeerFlow's frontend asks) read to its end with plain `fetch`. A turn is K tool steps
 * (the model writes a note with `write_file`, then reads it back with `read_file`, alternately) and a streamed
 * answer of about 60 words, so the thread grows by 2K + 2 messages a turn.
 *
 * One warm-up round, then `--rounds` measured rounds, all in the same server process (threads of earlier rounds
 * stay in its store). Per round: wall time, runs per second, the server's CPU time (user + system, from
 * /proc/<pid>/stat) per run, and each turn's latency (to its first answer token and to the end of its stream).
 * Every turn's stream is checked: no `error` event, and the last `values` ends with the scripted answer.
 *
 *   node dist-bench/bench/serveLoad.js [--clients 8] [--turns 6] [--tools 2] [--rounds 5] [--delay-ms 0]
 *     [--cli path/to/main.cjs] [--label current] [--out file.json] [--callgrind]
 *
 * `--callgrind` runs the server under `valgrind --tool=callgrind` and counts the instructions it executes in
 * each measured round (its counters zeroed before the round and dumped after it, with `callgrind_control`): a
 * figure that does not depend on the machine's load (the timings then mean nothing; use few clients and turns).
 *
 * The JSON goes to stdout and to bench/results/serve-load-<label>.json (or `--out`).
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { ChatRequestBody, Turn } from "../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../src/layers/ScriptedChatServer.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")

const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const positive = (name: string, fallback: number): number => {
  const value = Number(option(name) ?? fallback)
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a whole number, got ${option(name)}`)
  return value
}
const clients = positive("clients", 8)
const turns = positive("turns", 6)
const toolSteps = positive("tools", 2)
const rounds = positive("rounds", 5)
const delayMs = positive("delay-ms", 0)
const label = option("label") ?? "current"
const callgrind = process.argv.includes("--callgrind")

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits
const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}
const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(s.length * q))]!
}

/** The CLI to serve with: `--cli`, else a bundle of the current sources (scripts/bundle-cli.mjs). */
const cliPath = (): string => {
  const given = option("cli")
  if (given !== undefined) return path.resolve(given)
  const outdir = path.join(root, "dist-bench", "serve-cli")
  const built = spawnSync(process.execPath, [path.join(root, "scripts", "bundle-cli.mjs"), outdir], {
    cwd: root,
    encoding: "utf8"
  })
  if (built.status !== 0) throw new Error(`cannot bundle the CLI: ${built.stderr}`)
  return path.join(outdir, "main.cjs")
}

// ---------------------------------------------------------------------------------------------------------
// The scripted model: decides from the request alone (the turn's number is in the user's message)

const ANSWER = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
const NOTE = "The quick brown fox jumps over the lazy dog. ".repeat(9)

const lastUser = (body: ChatRequestBody): { text: string; at: number } => {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const message = body.messages[i]!
    if (message.role === "user" && typeof message.content === "string") return { text: message.content, at: i }
  }
  return { text: "", at: -1 }
}

const script = (body: ChatRequestBody): Turn => {
  const { text, at } = lastUser(body)
  const turn = /turn (\d+)/.exec(text)?.[1] ?? "x"
  let done = 0
  for (let i = at + 1; i < body.messages.length; i++) if (body.messages[i]!.role === "tool") done++
  if (done >= toolSteps) return `${ANSWER} (turn ${turn})`
  const file = `/mnt/user-data/workspace/notes-${turn}-${done >> 1}.md`
  return {
    toolCalls: [done % 2 === 0
      ? { name: "write_file", arguments: { description: "Save the note", path: file, content: NOTE } }
      : { name: "read_file", arguments: { description: "Read the note back", path: file } }]
  }
}

// ---------------------------------------------------------------------------------------------------------
// The server process

/** User + system CPU time of a process so far, in milliseconds (Linux). */
const cpuMsOf = (pid: number): number => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // utime and stime are fields 14 and 15 of stat (11 and 12 after the command's name and state)
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
}

interface Server {
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

const startServer = (cli: string, home: string): Promise<Server> =>
  new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
    }
    const serve = [cli, "serve", "--port", "0", "--config", path.join(home, "config.yaml")]
    const [command, args] = callgrind
      ? ["valgrind", ["--tool=callgrind", `--callgrind-out-file=${path.join(home, "callgrind.out")}`, process.execPath, ...serve]]
      : [process.execPath, serve]
    const child = spawn(command, args, {
      cwd: home,
      env: { ...env, ANTLER_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    const exited = new Promise<void>((done) => child.on("exit", () => done()))
    child.stderr.on("data", (chunk) => (err += chunk))
    child.stdout.on("data", (chunk) => {
      out += chunk
      const found = /listening on (http:\/\/\S+)/.exec(out)
      if (found !== null && child.pid !== undefined) {
        resolve({
          url: found[1]!,
          pid: child.pid,
          stop: () => {
            child.kill("SIGTERM")
            return exited
          }
        })
      }
    })
    child.on("exit", (code) => reject(new Error(`antler serve exited (${code}) before listening:\n${out}${err}`)))
  })

// ---------------------------------------------------------------------------------------------------------
// The clients

interface TurnResult {
  readonly latencyMs: number
  readonly firstTokenMs: number
  readonly events: number
}

/** One streamed run, read to its end; fails when the stream says error or does not end with the answer. */
const streamTurn = async (url: string, threadId: string, turn: number): Promise<TurnResult> => {
  const t0 = performance.now()
  const response = await fetch(`${url}/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: `Please take notes, turn ${turn}.` }] },
      stream_mode: ["values", "messages-tuple"]
    })
  })
  if (!response.ok || response.body === null) throw new Error(`run on ${threadId}: HTTP ${response.status}`)
  let firstTokenMs = NaN
  let events = 0
  let lastValues = ""
  let buffer = ""
  const decoder = new TextDecoder()
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true })
    let end: number
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (block.startsWith(":")) continue
      events++
      const event = /^event: (.*)$/m.exec(block)?.[1]
      const data = block.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n")
      if (event === "error") throw new Error(`run on ${threadId} turn ${turn}: ${data.slice(0, 300)}`)
      if (event === "messages" && Number.isNaN(firstTokenMs) && data.includes("word0")) {
        firstTokenMs = performance.now() - t0
      }
      if (event === "values") lastValues = data
    }
  }
  const latencyMs = performance.now() - t0
  const messages = (JSON.parse(lastValues) as { messages: ReadonlyArray<{ content: unknown }> }).messages
  const last = messages[messages.length - 1]
  if (last?.content !== `${ANSWER} (turn ${turn})`) {
    throw new Error(`run on ${threadId} turn ${turn} did not end with the answer: ${JSON.stringify(last).slice(0, 300)}`)
  }
  return { latencyMs, firstTokenMs, events }
}

const conversation = async (url: string): Promise<ReadonlyArray<TurnResult>> => {
  const created = await fetch(`${url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })
  if (!created.ok) throw new Error(`POST /threads: HTTP ${created.status}`)
  const { thread_id } = await created.json() as { thread_id: string }
  const out: Array<TurnResult> = []
  for (let t = 0; t < turns; t++) out.push(await streamTurn(url, thread_id, t))
  return out
}

/** With `--callgrind`: zeroes the server's instruction counters, or dumps them (callgrind_control). */
const counters = (server: Server, command: "-z" | "-d") => {
  if (callgrind) spawnSync("callgrind_control", [command, String(server.pid)], { stdio: "ignore" })
}

/** The instructions of the server's dumps so far (each dump read once, then removed). */
const dumpedInstructions = (): number => {
  let total = 0
  for (const file of fs.readdirSync(home).filter((f) => /^callgrind\.out\.\d+$/.test(f))) {
    const text = fs.readFileSync(path.join(home, file), "utf8")
    fs.rmSync(path.join(home, file))
    total += Number(/^totals:\s+(\d+)/m.exec(text)?.[1] ?? NaN)
  }
  return total
}

const loadRound = async (server: Server, measured = true) => {
  if (measured) counters(server, "-z")
  const cpu0 = cpuMsOf(server.pid)
  const own0 = process.cpuUsage()
  const t0 = performance.now()
  const results = (await Promise.all(Array.from({ length: clients }, () => conversation(server.url)))).flat()
  const wallMs = performance.now() - t0
  const serverCpuMs = cpuMsOf(server.pid) - cpu0
  const own = process.cpuUsage(own0)
  const runs = results.length
  if (measured) counters(server, "-d")
  const instructions = callgrind && measured ? dumpedInstructions() : undefined
  return {
    runs,
    ...(instructions !== undefined ? { serverInstructionsPerRun: Math.round(instructions / runs) } : {}),
    wallMs: round(wallMs),
    runsPerSec: round(runs / (wallMs / 1000)),
    serverCpuMs: round(serverCpuMs),
    serverCpuMsPerRun: round(serverCpuMs / runs, 2),
    driverCpuMs: round((own.user + own.system) / 1000),
    latencyMs: { p50: round(median(results.map((r) => r.latencyMs))), p99: round(quantile(results.map((r) => r.latencyMs), 0.99)) },
    firstTokenMs: { p50: round(median(results.map((r) => r.firstTokenMs))) },
    eventsPerRun: round(results.reduce((a, r) => a + r.events, 0) / runs)
  }
}

// ---------------------------------------------------------------------------------------------------------

const home = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "antler-serve-load-")))
const scope = Effect.runSync(Scope.make())
let server: Server | undefined
try {
  const cli = cliPath()
  const scripted = await Effect.runPromise(
    Scope.extend(ScriptedChatServer.start((body) => script(body), { delayMs }), scope)
  )
  fs.writeFileSync(path.join(home, "config.yaml"), JSON.stringify({
    models: [{ name: "scripted", model: "scripted", base_url: scripted.url, api_key: "sk-bench-scripted-000000" }],
    sandbox: { allow_host_bash: false },
    // the load is the runs: no memory model call after each (its queue would answer later, outside the rounds)
    memory: { enabled: false }
  }))
  const load0 = os.loadavg()
  const started = Date.now()
  server = await startServer(cli, home)
  const warmup = await loadRound(server, false)
  const measured = []
  for (let r = 0; r < rounds; r++) measured.push(await loadRound(server))
  const result = {
    harness: "antler",
    job: "serve-load",
    label,
    cli: path.relative(root, cli),
    meta: {
      date: new Date(started).toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      loadavgStart: load0.map((x) => round(x, 2)),
      loadavgEnd: os.loadavg().map((x) => round(x, 2)),
      workload: {
        clients,
        turnsPerClient: turns,
        toolStepsPerTurn: toolSteps,
        modelChunkDelayMs: delayMs,
        runsPerRound: clients * turns,
        turn: `${toolSteps} tool steps (write_file, read_file alternately) and a 60-word streamed answer`,
        store: "SQLite (antler serve's default)",
        ...(callgrind ? { server: "under valgrind --tool=callgrind (timings meaningless)" } : {})
      }
    },
    runsPerSecMedian: round(median(measured.map((r) => r.runsPerSec))),
    serverCpuMsPerRunMedian: round(median(measured.map((r) => r.serverCpuMsPerRun)), 2),
    latencyMsP50Median: round(median(measured.map((r) => r.latencyMs.p50))),
    ...(callgrind
      ? { serverInstructionsPerRunMedian: median(measured.map((r) => r.serverInstructionsPerRun ?? NaN)) }
      : {}),
    warmup,
    rounds: measured
  }
  const text = JSON.stringify(result, null, 2) + "\n"
  process.stdout.write(text)
  const out = option("out") ?? path.join(root, "bench", "results", `serve-load-${label.replace(/[^A-Za-z0-9-]/g, "_")}.json`)
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, text)
  process.stderr.write(
    `[serve-load] ${clients} clients x ${turns} turns x ${toolSteps} tool steps, ${rounds} rounds: ` +
      `${result.runsPerSecMedian} runs/s, server CPU ${result.serverCpuMsPerRunMedian} ms/run, ` +
      `latency p50 ${result.latencyMsP50Median} ms (load ${load0.map((x) => x.toFixed(2)).join(" ")})\n`
  )
} finally {
  await server?.stop()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  fs.rmSync(home, { recursive: true, force: true })
}
