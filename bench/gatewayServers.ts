/**
 * The servers of `npm run bench:gateway`: `antler serve` (a bundle of the current sources, as `bench:serve`
 * makes it) and LangGraph's JavaScript API server (`langgraphjs dev` in bench/peer-langgraph-server, installed
 * there with `npm ci` on first use), each a process tree whose CPU time and resident memory are read from /proc.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"

export interface Server {
  readonly id: string
  readonly label: string
  readonly url: string
  readonly assistant: string
  readonly pid: number
  readonly stop: () => Promise<void>
  /** The end of what the process printed so far. */
  readonly output: () => string
}

/** The pids of a process and all its descendants (Linux). */
export const tree = (root: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      const list = children.get(ppid) ?? []
      list.push(Number(entry))
      children.set(ppid, list)
    } catch {
      // gone meanwhile
    }
  }
  const out = [root]
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]!) ?? []))
  return out
}

/**
 * Runs `f` with the other servers' process trees stopped (SIGSTOP, SIGCONT after): the server measured has the
 * machine to itself, without, say, the LangGraph server's idle job workers (about 10 % of a core with 500 of them).
 */
export const alone = async <A>(server: Server, servers: ReadonlyArray<Server>, f: () => Promise<A>): Promise<A> => {
  const others = servers.filter((s) => s !== server).flatMap((s) => tree(s.pid))
  const signal = (name: NodeJS.Signals) => {
    for (const pid of others) {
      try {
        process.kill(pid, name)
      } catch {
        // gone meanwhile
      }
    }
  }
  signal("SIGSTOP")
  try {
    return await f()
  } finally {
    signal("SIGCONT")
  }
}

/** CPU time (user + system, ms) and resident memory (bytes) of a process tree. */
export const usageOf = (root: number): { cpuMs: number; rssBytes: number } => {
  let cpuMs = 0
  let rssBytes = 0
  for (const pid of tree(root)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      cpuMs += ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
      rssBytes += Number(fields[21]) * 4096
    } catch {
      // gone meanwhile
    }
  }
  return { cpuMs, rssBytes }
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.on("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const port = (probe.address() as net.AddressInfo).port
      probe.close(() => resolve(port))
    })
  })

const cleanEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(OPENAI_|ANTLER_|LANGSMITH_|LANGCHAIN_)/.test(key)) env[key] = value
  }
  return env
}

const spawnUntil = (
  command: string,
  args: ReadonlyArray<string>,
  options: { cwd: string; env: NodeJS.ProcessEnv },
  ready: (out: string) => string | undefined,
  seconds: number
): Promise<{ url: string; pid: number; stop: () => Promise<void>; output: () => string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"], detached: true })
    let out = ""
    let settled = false
    const exited = new Promise<void>((done) => child.on("exit", () => done()))
    const stop = async () => {
      try {
        process.kill(-child.pid!, "SIGTERM")
      } catch {
        // gone
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL")
        } catch {
          // gone
        }
      }, 5000)
      await exited
      clearTimeout(killer)
    }
    const timer = setTimeout(() => {
      if (!settled) {
        settled = true
        void stop()
        reject(new Error(`${path.basename(args[0] ?? command)} did not start in ${seconds} s:\n${out.slice(-3000)}`))
      }
    }, seconds * 1000)
    const look = (chunk: Buffer) => {
      out += chunk
      if (out.length > 100_000) out = out.slice(-50_000)
      const url = ready(out)
      if (url !== undefined && !settled) {
        settled = true
        clearTimeout(timer)
        resolve({ url, pid: child.pid!, stop, output: () => out.slice(-2000) })
      }
    }
    child.stdout.on("data", look)
    child.stderr.on("data", look)
    child.on("exit", (code) => {
      if (!settled) {
        settled = true
        clearTimeout(timer)
        reject(new Error(`${path.basename(args[0] ?? command)} exited (${code}) before listening:\n${out.slice(-3000)}`))
      }
    })
  })

/** The CLI bundle of the current sources (scripts/bundle-cli.mjs), or `given`. */
export const antlerCli = (root: string, given: string | undefined): string => {
  if (given !== undefined) return path.resolve(given)
  const outdir = path.join(root, "dist-bench", "serve-cli")
  const built = spawnSync(process.execPath, [path.join(root, "scripts", "bundle-cli.mjs"), outdir], {
    cwd: root,
    encoding: "utf8"
  })
  if (built.status !== 0) throw new Error(`cannot bundle the CLI: ${built.stderr}`)
  return path.join(outdir, "main.cjs")
}

/**
 * `antler serve` over SQLite (its default) with the full lead chain: summarisation on (a trigger the bench
 * never reaches, as the peer's), no titles and no long-term memory (model calls of their own, outside runs).
 * `gateway`: more of its `gateway` settings (`max_active_runs`, for an experiment).
 */
const antlerConfig = (modelUrl: string, gateway: Record<string, unknown>) =>
  JSON.stringify({
    models: [{ name: "scripted", model: "scripted", base_url: modelUrl, api_key: "sk-bench-scripted-000000" }],
    sandbox: { allow_host_bash: false },
    memory: { enabled: false },
    title: { enabled: false },
    summarization: { enabled: true, trigger: { type: "tokens", value: 100000 }, keep: { type: "messages", value: 20 } },
    ...(Object.keys(gateway).length > 0 ? { gateway } : {})
  })

export const startAntler = async (
  cli: string,
  home: string,
  modelUrl: string,
  nodeArgs: ReadonlyArray<string> = [],
  gateway: Record<string, unknown> = {}
): Promise<Server> => {
  fs.mkdirSync(home, { recursive: true })
  fs.writeFileSync(path.join(home, "config.yaml"), antlerConfig(modelUrl, gateway))
  const started = await spawnUntil(
    process.execPath,
    [...nodeArgs, cli, "serve", "--port", "0", "--config", path.join(home, "config.yaml")],
    { cwd: home, env: { ...cleanEnv(), ANTLER_HOME: home, NO_COLOR: "1" } },
    (out) => /listening on (http:\/\/\S+)/.exec(out)?.[1],
    120
  )
  return { id: "antler", label: "Antler (SQLite)", assistant: "lead_agent", ...started }
}

/** The same gateway and configuration with its threads in memory (bench/gatewayMemoryServer.ts, compiled). */
export const startAntlerMemory = async (
  entry: string,
  home: string,
  modelUrl: string,
  nodeArgs: ReadonlyArray<string> = [],
  gateway: Record<string, unknown> = {}
): Promise<Server> => {
  fs.mkdirSync(home, { recursive: true })
  fs.writeFileSync(path.join(home, "config.json"), antlerConfig(modelUrl, gateway))
  const started = await spawnUntil(
    process.execPath,
    [...nodeArgs, entry, path.join(home, "config.json")],
    { cwd: home, env: { ...cleanEnv(), ANTLER_HOME: home, NO_COLOR: "1" } },
    (out) => /listening on (http:\/\/\S+)/.exec(out)?.[1],
    120
  )
  return { id: "antler-memory", label: "Antler (memory)", assistant: "lead_agent", ...started }
}

/** G1's floor: a bare relay between the client and the model (bench/gatewayFloor.ts, compiled). */
export const startFloor = async (entry: string, modelUrl: string): Promise<Server> => {
  const started = await spawnUntil(
    process.execPath,
    [entry, modelUrl],
    { cwd: path.dirname(entry), env: cleanEnv() },
    (out) => /listening on (http:\/\/\S+)/.exec(out)?.[1],
    30
  )
  return { id: "floor", label: "floor (a bare relay)", assistant: "lead_agent", ...started }
}

export const PEER_DIR = "peer-langgraph-server"

/** Installs the peer (`npm ci` in its folder) when it has no node_modules yet. */
export const ensurePeer = (dir: string, say: (text: string) => void) => {
  if (fs.existsSync(path.join(dir, "node_modules", "@langchain", "langgraph-cli"))) return
  say(`installing the peer: npm ci --prefix ${dir} ...\n`)
  const npm = spawnSync("npm", ["ci", "--prefix", dir, "--no-audit", "--no-fund"], { stdio: "inherit" })
  if (npm.status !== 0) throw new Error(`npm ci --prefix ${dir} failed (${npm.status ?? npm.signal})`)
}

export const peerVersions = (dir: string): Record<string, string> => {
  const version = (pkg: string, under = "") => {
    try {
      return JSON.parse(
        fs.readFileSync(path.join(dir, "node_modules", under, pkg, "package.json"), "utf8")
      ).version as string
    } catch {
      return "?"
    }
  }
  return {
    "@langchain/langgraph-cli": version("@langchain/langgraph-cli"),
    "@langchain/langgraph-api": version("@langchain/langgraph-api", "@langchain/langgraph-cli/node_modules") !== "?"
      ? version("@langchain/langgraph-api", "@langchain/langgraph-cli/node_modules")
      : version("@langchain/langgraph-api"),
    "@langchain/langgraph": version("@langchain/langgraph"),
    langchain: version("langchain"),
    "@langchain/openai": version("@langchain/openai")
  }
}

/**
 * LangGraph's API server as its users start it (`langgraphjs dev`), in memory, with as many jobs per worker as
 * the bench's largest level (its default, 10, would queue the rest).
 */
export const startPeer = async (dir: string, work: string, modelUrl: string, jobs: number): Promise<Server> => {
  const port = await freePort()
  fs.mkdirSync(work, { recursive: true })
  // Its "in memory" state is also written to `.langgraph_api/*.json` beside `langgraph.json` (3 s after the last
  // change, the whole state each time) and read back at start: left there, every earlier bench run's threads
  // would be loaded and rewritten by this one (331 MB by the fifth pass's last runs). Each start is a clean one.
  fs.rmSync(path.join(dir, ".langgraph_api"), { recursive: true, force: true })
  const cli = path.join(dir, "node_modules", "@langchain", "langgraph-cli", "dist", "cli", "cli.mjs")
  const started = await spawnUntil(
    process.execPath,
    [cli, "dev", "--port", String(port), "--host", "127.0.0.1", "--no-browser", "--n-jobs-per-worker", String(jobs)],
    {
      cwd: dir,
      env: {
        ...cleanEnv(),
        MODEL_BASE_URL: modelUrl,
        PEER_WORKDIR: work,
        BROWSER: "none",
        LANGGRAPH_CLI_NO_ANALYTICS: "1",
        LANGSMITH_TRACING: "false",
        NO_COLOR: "1"
      }
    },
    (out) => (/Server running at/.test(out) ? `http://127.0.0.1:${port}` : undefined),
    180
  )
  return { id: "langgraph", label: "LangGraph API server (in memory)", assistant: "agent", ...started }
}
