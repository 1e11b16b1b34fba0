/**
 * The processes the run needs: DeerFlow's frontend checked (and installed with pnpm when it is not), the scripted
 * Chat Completions server, `antler serve` over it with its own data directory and a `config.yaml` that lets
 * DeerFlow's Next server in (its host and origin), and DeerFlow's Next dev server pointed at the recording proxy.
 * Each process is started in a process group of its own and stopped by its id.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"

/** A started process: its output so far, and how to stop it. */
export interface Proc {
  readonly name: string
  readonly child: ChildProcess.ChildProcess
  readonly output: () => string
  readonly stop: () => Promise<void>
  /** Kills its process group at once (SIGKILL), synchronously: for the script's exit. */
  readonly kill: () => void
}

const HOW_TO_GET = [
  "DeerFlow's web app is the frontend/ folder of https://github.com/bytedance/deer-flow:",
  "  git clone --depth 1 https://github.com/bytedance/deer-flow.git",
  "  npm run deerflow-app -- --frontend deer-flow/frontend",
  "(pnpm 10 is needed to install it: `npm install -g pnpm` or `corepack enable`.)"
].join("\n")

/** Checks that `dir` is DeerFlow's frontend; the reason it is not, with how to get it, otherwise. */
export const checkFrontend = (dir: string | undefined): string | undefined => {
  if (dir === undefined) return `No --frontend folder given.\n${HOW_TO_GET}`
  const manifest = Path.join(dir, "package.json")
  if (!Fs.existsSync(manifest)) return `${dir} has no package.json.\n${HOW_TO_GET}`
  let name: unknown
  try {
    name = (JSON.parse(Fs.readFileSync(manifest, "utf8")) as { name?: unknown }).name
  } catch (error) {
    return `${manifest} is not JSON (${(error as Error).message}).\n${HOW_TO_GET}`
  }
  if (name !== "deer-flow-frontend" || !Fs.existsSync(Path.join(dir, "next.config.js"))) {
    return `${dir} is not DeerFlow's frontend folder (package ${JSON.stringify(name)}).\n${HOW_TO_GET}`
  }
  return undefined
}

/** Whether the frontend's dependencies are installed (Next among them). */
export const installed = (dir: string) => Fs.existsSync(Path.join(dir, "node_modules/next/dist/bin/next"))

/** `pnpm install` in the frontend, as DeerFlow's docs and CI do; its output goes to `log`. */
export const install = async (dir: string, log: string): Promise<void> => {
  const args = ["install", "--frozen-lockfile", "--config.manage-package-manager-versions=false"]
  const code = await new Promise<number | null>((resolve, reject) => {
    const out = Fs.openSync(log, "a")
    const child = ChildProcess.spawn("pnpm", args, { cwd: dir, stdio: ["ignore", out, out] })
    child.on("error", (error) => reject(new Error(`pnpm could not be started (${error.message}); install pnpm 10`)))
    child.on("exit", (exitCode) => resolve(exitCode))
  })
  if (code !== 0) throw new Error(`pnpm ${args.join(" ")} failed with exit code ${code}; see ${log}`)
}

/** A free TCP port on 127.0.0.1. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** Whether 127.0.0.1:`port` is free. */
export const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** Starts a process in its own group, its output kept and copied to `log`. */
const spawn = (name: string, command: string, args: ReadonlyArray<string>, options: {
  readonly cwd: string
  readonly env: NodeJS.ProcessEnv
  readonly log: string
}): Proc => {
  const child = ChildProcess.spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let output = ""
  const file = Fs.createWriteStream(options.log, { flags: "a" })
  const keep = (chunk: Buffer) => {
    output += chunk.toString()
    if (output.length > 2_000_000) output = output.slice(-1_000_000)
    file.write(chunk)
  }
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    try {
      process.kill(-child.pid!, "SIGTERM")
    } catch {
      return
    }
    const killed = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 8000))])
    if (!killed) {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
      await exited
    }
    file.end()
  }
  const kill = () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // already gone
    }
  }
  return { name, child, output: () => output, stop, kill }
}

/** Waits until `pattern` appears in the process's output; fails when it exits first or after `timeoutMs`. */
export const waitFor = async (proc: Proc, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const match = pattern.exec(proc.output())
    if (match !== null) return match
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(`${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.output().slice(-3000)}`)
    }
    if (Date.now() > until) throw new Error(`${proc.name} did not print ${pattern} within ${timeoutMs / 1000} s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** The `config.yaml` of the run: the scripted model, and DeerFlow's Next server let in. */
export const antlerConfig = (options: {
  readonly modelUrl: string
  readonly appOrigin: string
  readonly skills: string
  /** DeerFlow's local accounts on (`gateway.auth.accounts`), for the app run with its login. */
  readonly accounts?: boolean
}): string =>
  [
    "# Written by scripts/deerflow-app: antler serve behind DeerFlow's Next dev server.",
    "models:",
    "  - name: scripted",
    "    display_name: Scripted model",
    "    model: scripted",
    `    base_url: ${options.modelUrl}`,
    "    api_key: sk-scripted-not-a-real-key",
    "sandbox:",
    "  allow_host_bash: false",
    "skills:",
    `  path: ${options.skills}`,
    "memory:",
    "  enabled: true",
    "  backend_config:",
    "    debounce_seconds: 1",
    "gateway:",
    "  heartbeat_seconds: 5",
    ...(options.accounts === true ? ["  auth:", "    accounts: true"] : []),
    "  # The browser's requests reach the gateway through Next's proxy, which keeps their Origin header.",
    "  cors:",
    "    allow_origins:",
    `      - ${options.appOrigin}`,
    ""
  ].join("\n")

/** The run's `extensions_config.json`: one MCP server, off (it is never started), for the tools screen. */
export const EXTENSIONS_CONFIG = `${JSON.stringify({
  mcpServers: {
    "deer-facts": {
      enabled: false,
      type: "stdio",
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-everything"],
      description: "An MCP server the tools screen can switch on"
    }
  },
  skills: {}
}, null, 2)}\n`

/** The command that runs `antler`: the checkout's sources through tsx. */
const antlerArgs = (root: string): ReadonlyArray<string> => [
  "--import",
  Path.join(root, "node_modules/tsx/dist/loader.mjs"),
  Path.join(root, "src/programs/main.ts")
]

/** Starts `antler serve --port 0` with `config` and its data in `home`; resolves with its URL. */
export const startAntler = async (
  root: string,
  home: string,
  config: string,
  log: string,
  extraEnv: Readonly<Record<string, string>> = {}
) => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
  }
  const proc = spawn("antler serve", process.execPath, [...antlerArgs(root), "serve", "--port", "0", "--config", config], {
    cwd: home,
    env: { ...env, ...extraEnv, ANTLER_HOME: home, NO_COLOR: "1" },
    log
  })
  const match = await waitFor(proc, /listening on (http:\/\/\S+)/, 120_000)
  return { proc, url: match[1]! }
}

/** Starts DeerFlow's Next dev server on `port` against `gateway`; auth disabled or DeerFlow's local accounts. */
export const startNext = async (options: {
  readonly frontend: string
  readonly port: number
  readonly gateway: string
  readonly authDisabled: boolean
  readonly log: string
}) => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SKIP_ENV_VALIDATION: "1",
    NEXT_TELEMETRY_DISABLED: "1",
    DEER_FLOW_INTERNAL_GATEWAY_BASE_URL: options.gateway,
    DEER_FLOW_TRUSTED_ORIGINS: `http://127.0.0.1:${options.port}`,
    BETTER_AUTH_SECRET: "deerflow-app-script-local-secret"
  }
  delete env.NEXT_PUBLIC_BACKEND_BASE_URL
  delete env.NEXT_PUBLIC_LANGGRAPH_BASE_URL
  delete env.NEXT_PUBLIC_STATIC_WEBSITE_ONLY
  if (options.authDisabled) env.DEER_FLOW_AUTH_DISABLED = "1"
  else delete env.DEER_FLOW_AUTH_DISABLED
  const next = Path.join(options.frontend, "node_modules/next/dist/bin/next")
  const proc = spawn("next dev", process.execPath, [next, "dev", "-H", "127.0.0.1", "-p", String(options.port)], {
    cwd: options.frontend,
    env,
    log: options.log
  })
  await waitFor(proc, /Ready in|✓ Ready/, 180_000)
  return { proc, url: `http://127.0.0.1:${options.port}` }
}
