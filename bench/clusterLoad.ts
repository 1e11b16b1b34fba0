/**
 * `npm run bench:cluster`: `antler serve` as a cluster (`gateway.cluster`, issue 30) with one and with two
 * processes on one PostgreSQL database, on this machine. Each process is `node <cli> serve` (a bundle of the
 * current sources), the model a SCRIPTED loopback Chat Completions server in this process answering ~60 words at
 * once. N clients at once, each on a thread of its own, run T streamed runs one after the other, every request
 * to the next process round-robin (so with two processes about half the runs are routed to the other runner and
 * their events stream through the accepting one). Per setup: runs per second, and the median time per streamed
 * event (a run's stream time over its events); the difference of the latter between two processes and one is
 * the added latency of routing, diluted over the half of the runs that are routed. With two processes it is also
 * measured directly (`routing`): a background run's stream followed by two clients at once, one through each
 * process, and per event the later arrival less the earlier.
 *
 *   node dist-bench/bench/clusterLoad.js [--clients 8] [--turns 5] [--database-url postgres://...]
 *
 * Without `--database-url` (or ANTLER_BENCH_DATABASE_URL) a throwaway PostgreSQL is made with Debian's binaries
 * (/usr/lib/postgresql/<version>/bin). The JSON goes to stdout and to bench/results/cluster-load.json.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as ScriptedChatServer from "../src/layers/ScriptedChatServer.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const clients = Number(option("clients") ?? 8)
const turns = Number(option("turns") ?? 5)
const ANSWER = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const sh = (command: string, args: ReadonlyArray<string>) => {
  const root = typeof process.getuid === "function" && process.getuid() === 0
  const result = root
    ? spawnSync("runuser", ["-u", "postgres", "--", command, ...args], { encoding: "utf8" })
    : spawnSync(command, args, { encoding: "utf8" })
  if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr || result.stdout}`)
  return result.stdout
}

/** A PostgreSQL server to use: the given one, or a throwaway one; `database()` makes a fresh database. */
const postgres = async () => {
  const given = option("database-url") ?? process.env.ANTLER_BENCH_DATABASE_URL
  const versions = fs.existsSync("/usr/lib/postgresql") ? fs.readdirSync("/usr/lib/postgresql").sort() : []
  const bin = versions.length > 0 ? path.join("/usr/lib/postgresql", versions.at(-1)!, "bin") : "/usr/bin"
  let admin = given
  let stop = () => {}
  if (admin === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "antler-bench-pg-"))
    fs.chmodSync(dir, 0o777)
    if (process.getuid?.() === 0) spawnSync("chown", ["postgres:postgres", dir])
    const port = await freePort()
    sh(path.join(bin, "initdb"), ["-D", path.join(dir, "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    sh(path.join(bin, "pg_ctl"), ["-D", path.join(dir, "data"), "-o",
      `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c max_connections=200`,
      "-l", path.join(dir, "log"), "-w", "start"])
    admin = `postgres://postgres@127.0.0.1:${port}/postgres`
    stop = () => {
      sh(path.join(bin, "pg_ctl"), ["-D", path.join(dir, "data"), "-m", "immediate", "-w", "stop"])
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  let n = 0
  return {
    database: () => {
      const name = `antler_bench_${process.pid}_${++n}`
      spawnSync(path.join(bin, "psql"), [admin!, "-c", `CREATE DATABASE ${name}`], { encoding: "utf8" })
      const url = new URL(admin!)
      url.pathname = `/${name}`
      return url.toString()
    },
    stop
  }
}

const cliPath = (): string => {
  const outdir = path.join(root, "dist-bench", "serve-cli")
  const built = spawnSync(process.execPath, [path.join(root, "scripts", "bundle-cli.mjs"), outdir], { cwd: root })
  if (built.status !== 0) throw new Error(`cannot bundle the CLI: ${built.stderr}`)
  return path.join(outdir, "main.cjs")
}

const serve = (cli: string, home: string, config: string) =>
  new Promise<{ url: string; stop: () => Promise<void> }>((resolve, reject) => {
    const env: NodeJS.ProcessEnv = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
    }
    const child = spawn(process.execPath, [cli, "serve", "--port", "0", "--config", config], {
      cwd: home,
      env: { ...env, ANTLER_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const exited = new Promise<void>((done) => child.on("exit", () => done()))
    child.stderr.on("data", (chunk) => (out += chunk))
    child.stdout.on("data", (chunk) => {
      out += chunk
      const found = /listening on (http:\/\/\S+)/.exec(out)
      if (found !== null) resolve({ url: found[1]!, stop: () => (child.kill("SIGTERM"), exited) })
    })
    child.on("exit", (code) => reject(new Error(`antler serve exited (${code}):\n${out}`)))
  })

/** One streamed run read to its end: its time and number of events. */
const streamRun = async (url: string, thread: string, turn: number) => {
  const t0 = performance.now()
  const response = await fetch(`${url}/threads/${thread}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: `turn ${turn}` }] },
      stream_mode: ["values", "messages-tuple"]
    })
  })
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`)
  const text = await response.text()
  const events = text.split("\n\n").filter((block) => block.startsWith("event: ") || block.includes("\nevent: "))
  if (!text.includes("word59") || !/event: end/.test(text)) throw new Error(`run ${turn} did not end with the answer`)
  return { ms: performance.now() - t0, events: events.length }
}

/** Reads a run's stream from `url`: the arrival time of each event id. */
const arrivals = async (url: string, thread: string, runId: string) => {
  const response = await fetch(`${url}/threads/${thread}/runs/${runId}/stream`)
  if (!response.ok || response.body === null) throw new Error(`join HTTP ${response.status}: ${await response.text()}`)
  const times = new Map<number, number>()
  const decoder = new TextDecoder()
  let buffer = ""
  for await (const chunk of response.body) {
    const now = performance.now()
    buffer += decoder.decode(chunk as Uint8Array, { stream: true })
    const blocks = buffer.split("\n\n")
    buffer = blocks.pop()!
    for (const block of blocks) {
      const id = /^id: (\d+)$/m.exec(block)
      if (id !== null) times.set(Number(id[1]), now)
    }
  }
  return times
}

/**
 * The added latency of routing, measured directly: each of `runs` background runs (one at a time, its answer
 * streamed a token every few ms) is followed by two clients at once, one through each process; for every event
 * both received live, the later arrival less the earlier is what the route through the other runner added.
 */
const routing = async (urls: ReadonlyArray<string>, runs: number) => {
  const added: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const thread = ((await (await fetch(`${urls[i % 2]}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })).json()) as any).thread_id
    const run = ((await (await fetch(`${urls[i % 2]}/threads/${thread}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: `slow ${i}` }] },
        context: { model_name: "slow" },
        stream_mode: ["values", "messages-tuple"]
      })
    })).json()) as any).run_id
    const [a, b] = await Promise.all(urls.map((url) => arrivals(url, thread, run)))
    // events both clients got live (the first ones are a replay of what came before they joined)
    const ids = [...a!.keys()].filter((id) => b!.has(id)).sort((x, y) => x - y).slice(10, -1)
    const diffs = ids.map((id) => b!.get(id)! - a!.get(id)!)
    const median = [...diffs].sort((x, y) => x - y)[Math.floor(diffs.length / 2)] ?? 0
    // the routed client is the one later on the median event
    for (const diff of diffs) added.push(median >= 0 ? diff : -diff)
  }
  added.sort((x, y) => x - y)
  const at = (q: number) => Math.round(added[Math.min(added.length - 1, Math.floor(added.length * q))]! * 1000) / 1000
  return { runs, events: added.length, addedMsPerEventP50: at(0.5), addedMsPerEventP99: at(0.99) }
}

const measure = async (
  cli: string,
  modelUrl: string,
  slowUrl: string,
  pg: Awaited<ReturnType<typeof postgres>>,
  processes: number
) => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "antler-bench-cluster-"))
  const url = pg.database()
  const servers: Array<{ url: string; stop: () => Promise<void> }> = []
  for (let i = 0; i < processes; i++) {
    const config = path.join(home, `config-${i}.yaml`)
    fs.writeFileSync(config, [
      "models:", "  - name: scripted", "    model: scripted", `    base_url: ${modelUrl}`,
      "    api_key: sk-bench-cluster-000000", "  - name: slow", "    model: slow", `    base_url: ${slowUrl}`,
      "    api_key: sk-bench-cluster-000000", "sandbox:", "  allow_host_bash: false", "memory:", "  enabled: false",
      "title:", "  enabled: false", "database:", `  url: ${url}`, "gateway:", "  cluster:",
      `    runner_port: ${await freePort()}`, ""
    ].join("\n"))
    servers.push(await serve(cli, home, config))
  }
  let next = 0
  const pick = () => servers[next++ % servers.length]!.url
  const threads: Array<string> = []
  for (let c = 0; c < clients; c++) {
    threads.push(((await (await fetch(`${pick()}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as any).thread_id)
  }
  // a warm-up run per thread (the shards are being spread), then the measured ones
  await Promise.all(threads.map((thread) => streamRun(pick(), thread, 0)))
  const t0 = performance.now()
  const results = (await Promise.all(threads.map(async (thread) => {
    const mine: Array<{ ms: number; events: number }> = []
    for (let t = 1; t <= turns; t++) mine.push(await streamRun(pick(), thread, t))
    return mine
  }))).flat()
  const wall = (performance.now() - t0) / 1000
  const routed = processes === 2 ? await routing(servers.map((server) => server.url), 20) : undefined
  for (const server of servers) await server.stop()
  fs.rmSync(home, { recursive: true, force: true })
  const perEvent = results.map((r) => r.ms / r.events).sort((a, b) => a - b)
  return {
    processes,
    runs: results.length,
    runsPerSecond: Math.round((results.length / wall) * 100) / 100,
    medianMsPerEvent: Math.round(perEvent[Math.floor(perEvent.length / 2)]! * 100) / 100,
    eventsPerRun: results[0]!.events,
    ...(routed === undefined ? {} : { routing: routed })
  }
}

const main = async () => {
  const scope = Effect.runSync(Scope.make())
  const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(() => ANSWER), scope))
  const slow = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(() => ANSWER, { delayMs: 5 }), scope))
  const pg = await postgres()
  try {
    const cli = cliPath()
    const one = await measure(cli, scripted.url, slow.url, pg, 1)
    const two = await measure(cli, scripted.url, slow.url, pg, 2)
    const result = {
      machine: `${os.cpus().length} cores`,
      clients,
      turns,
      one,
      two,
      scaling: Math.round((two.runsPerSecond / one.runsPerSecond) * 100) / 100,
      addedMsPerEventRoutedEstimate: Math.round((two.medianMsPerEvent - one.medianMsPerEvent) * 2 * 100) / 100
    }
    const text = JSON.stringify(result, null, 2)
    console.log(text)
    fs.mkdirSync(path.join(root, "bench", "results"), { recursive: true })
    fs.writeFileSync(path.join(root, "bench", "results", "cluster-load.json"), `${text}\n`)
  } finally {
    pg.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
