/**
 * `npm run bench:memory`: how long `antler run` takes from its start to its first model request with a large
 * long-term memory, as a hostile memory model leaves one. Each scenario runs `node <cli> run "..."` (by default a
 * bundle of the current sources, made as the tests make theirs) against the loopback scripted Chat Completions
 * server, with the memory in place before the run:
 *   empty                 no memory (the floor)
 *   stored-16k / -256k / -2m   a memory.json whose summary is that many letters without a space (what an older
 *                         Antler stored when a memory model answered so: it stored the answer uncapped)
 *   after-hostile-update  the memory.json a 2 MB hostile update left (run 1, its memory model answering with 2 MB of
 *                         summaries and facts without spaces), then run 2 measured
 * The median of `--runs` (default 3) per scenario; a run still without a request after `--timeout` seconds (default
 * 120) is stopped and recorded as timed out; `--only a,b` runs only those scenarios. Results are merged into
 * bench/results/memory-load.json under `--label` (default `current`), so the figures of another build sit beside
 * them (`--note` says what it is):
 *   node dist-bench/bench/memoryLoad.js --label before --cli /path/to/old/main.cjs --note "6b66e4c" --runs 1
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as ScriptedChatServer from "../src/layers/ScriptedChatServer.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")

const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const label = option("label") ?? "current"
const runs = Number(option("runs") ?? 3)
const timeoutMs = Number(option("timeout") ?? 120) * 1000
const only = option("only")?.split(",")
/** What the CLI is (recorded with the results): `--note`, else the commit of the sources bundled. */
const note = option("note") ??
  (option("cli") === undefined
    ? `sources at ${spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).stdout.trim()}`
    : undefined)

const MEMORY_PROMPT = "You maintain the long-term memory"

const round = (x: number) => Math.round(x)
const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** The CLI to run: `--cli`, else a bundle of the current sources (scripts/bundle-cli.mjs). */
const cliPath = (): string => {
  const given = option("cli")
  if (given !== undefined) return path.resolve(given)
  const outdir = path.join(root, "dist-bench", "memory-cli")
  const built = spawnSync(process.execPath, [path.join(root, "scripts", "bundle-cli.mjs"), outdir], {
    cwd: root,
    encoding: "utf8"
  })
  if (built.status !== 0) throw new Error(`cannot bundle the CLI: ${built.stderr}`)
  return path.join(outdir, "main.cjs")
}

/** The labels of a summary that is the user's (DeerMem's write gate stores only what is labelled so). */
const USER_SUMMARY = { scope: "user", authority: "descriptive" }

/**
 * The memory a hostile model leaves: letters without a space (the slowest text to tokenize), 2 MB in all, labelled
 * as the write gate keeps it.
 */
const hostileUpdate = JSON.stringify({
  user: {
    workContext: { summary: "a".repeat(700_000), shouldUpdate: true, ...USER_SUMMARY },
    topOfMind: { summary: "b".repeat(300_000), shouldUpdate: true, ...USER_SUMMARY }
  },
  history: { longTermBackground: { summary: "c".repeat(300_000), shouldUpdate: true, ...USER_SUMMARY } },
  newFacts: Array.from({ length: 700 }, (_, i) => ({
    content: `${i}${"f".repeat(1000)}`,
    confidence: 0.9,
    scope: "user",
    durability: "durable",
    authority: "descriptive"
  }))
})

const storedMemory = (chars: number) =>
  JSON.stringify({ user: { workContext: { summary: "a".repeat(chars) } }, facts: [] })

interface Scenario {
  readonly name: string
  /** Prepares the data directory (may run `antler` itself). */
  readonly prepare: (home: string, run: (prompt: string) => Promise<Outcome>) => Promise<void>
}

interface Outcome {
  /** Milliseconds from spawn to the first main-model request; undefined when it timed out. */
  readonly toFirstRequestMs: number | undefined
  readonly exitCode: number | null
}

const writeMemory = (home: string, text: string) => {
  const file = path.join(home, "users", "default", "memory.json")
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

const scenarios: ReadonlyArray<Scenario> = [
  { name: "empty", prepare: async () => {} },
  { name: "stored-16k", prepare: async (home) => writeMemory(home, storedMemory(16 * 1024)) },
  { name: "stored-256k", prepare: async (home) => writeMemory(home, storedMemory(256 * 1024)) },
  { name: "stored-2m", prepare: async (home) => writeMemory(home, storedMemory(2 * 1024 * 1024)) },
  {
    name: "after-hostile-update",
    prepare: async (_home, run) => {
      const first = await run("I am a data engineer")
      if (first.exitCode !== 0) throw new Error(`the run making the hostile update exited with ${first.exitCode}`)
    }
  }
]

const measure = (cli: string, scenario: Scenario) =>
  Effect.scoped(Effect.gen(function*() {
    let pending: { readonly prompt: string; readonly resolve: () => void } | undefined
    const server = yield* ScriptedChatServer.start((body) => {
      const first = String(body.messages[0]?.content ?? "")
      if (first.startsWith(MEMORY_PROMPT)) return scenario.name === "after-hostile-update" ? hostileUpdate : "{}"
      if (pending !== undefined && JSON.stringify(body.messages).includes(pending.prompt)) pending.resolve()
      return "Noted."
    })
    const home = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "antler-bench-memory-")))
    const config = path.join(home, "config.yaml")
    fs.writeFileSync(config, "memory:\n  enabled: true\n")
    const run = (prompt: string) =>
      new Promise<Outcome>((resolve) => {
        const started = performance.now()
        let toFirstRequestMs: number | undefined
        pending = { prompt, resolve: () => (toFirstRequestMs ??= performance.now() - started) }
        const env: NodeJS.ProcessEnv = { ...process.env, ANTLER_HOME: home, NO_COLOR: "1" }
        for (const key of Object.keys(env)) if (key.startsWith("OPENAI_")) delete env[key]
        const args = [cli, "run", "--base-url", server.url, "--api-key", "x", "--config", config, prompt]
        const child = spawn(process.execPath, args, { env, cwd: home, stdio: ["ignore", "ignore", "ignore"] })
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
        child.on("close", (code) => {
          clearTimeout(timer)
          resolve({ toFirstRequestMs, exitCode: code })
        })
      })
    yield* Effect.promise(() => scenario.prepare(home, run))
    const outcome = yield* Effect.promise(() => run("Start a Python project"))
    fs.rmSync(home, { recursive: true, force: true })
    return outcome
  }))

const cli = cliPath()
const results: Record<string, unknown> = {}
for (const scenario of scenarios) {
  if (only !== undefined && !only.includes(scenario.name)) continue
  const outcomes: Array<Outcome> = []
  for (let i = 0; i < runs; i++) outcomes.push(await Effect.runPromise(measure(cli, scenario)))
  const times = outcomes.flatMap((o) => (o.toFirstRequestMs === undefined ? [] : [o.toFirstRequestMs]))
  results[scenario.name] = {
    toFirstRequestMs: times.length === 0 ? null : round(median(times)),
    runs: outcomes.map((o) => (o.toFirstRequestMs === undefined ? null : round(o.toFirstRequestMs))),
    timedOut: outcomes.filter((o) => o.toFirstRequestMs === undefined).length,
    ...(outcomes.some((o) => o.toFirstRequestMs === undefined) ? { timeoutMs } : {})
  }
  process.stderr.write(`${label} ${scenario.name}: ${JSON.stringify(results[scenario.name])}\n`)
}

const file = path.join(root, "bench", "results", "memory-load.json")
fs.mkdirSync(path.dirname(file), { recursive: true })
const previous = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {}
const out = {
  bench: "memory-load",
  description: "antler run: milliseconds from spawn to its first model request, with the memory described per " +
    "scenario in bench/memoryLoad.ts; median of the runs; null: every run timed out (stopped after timeoutMs)",
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, loadavg: os.loadavg() },
  labels: {
    ...previous.labels,
    [label]: {
      cli: path.relative(root, cli),
      ...(note === undefined ? {} : { note }),
      date: new Date().toISOString(),
      runsPerScenario: runs,
      // `--only` adds to (or replaces some of) the label's figures
      results: { ...(only === undefined ? {} : previous.labels?.[label]?.results), ...results }
    }
  }
}
fs.writeFileSync(file, JSON.stringify(out, null, 2) + "\n")
process.stdout.write(JSON.stringify(out.labels[label], null, 2) + "\n")
