/**
 * Runs DeerFlow's own web app against `antler serve` and drives it as a user would, in headless Chromium:
 *
 *   npm run deerflow-app -- --frontend ../deer-flow/frontend [--out DIR] [--record DIR] [--flows a,b] [--keep]
 *
 * It needs DeerFlow's `frontend/` folder (bytedance/deer-flow; installed with pnpm when it is not), starts a
 * SCRIPTED Chat Completions server (fixed answers, no real model), `antler serve` over it, a recording proxy in
 * front of the gateway, and the app's Next dev server pointed at the proxy; then drives each flow (scripts/
 * deerflow-app/flows.ts), saves a screenshot per screen in the output folder and prints a line per flow: passed,
 * degraded (its checks passed but the gateway refused some calls) or failed, with the reason. With `--record`, the
 * HTTP traffic of each flow is written there as `<flow>.json` (scripts/deerflow-app/record.ts). `--keep` leaves
 * everything running at the end, for a look by hand, until Ctrl-C. The exit code is 1 when a flow failed.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { BrowserContext, Page } from "playwright-core"
import { chromium } from "playwright-core"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { FLAGS } from "../../test/support/chromium.js"
import { CheckFailed, type Flow, FLOWS } from "./flows.js"
import { makeScript } from "./model.js"
import * as Record from "./record.js"
import * as Recorder from "./recorder.js"
import * as Stack from "./stack.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => Fs.existsSync(p))
/** The port DeerFlow's memory route calls whatever the app is told (src/app/api/memory/route.ts). */
const MEMORY_ROUTE_PORT = 8001

interface Args {
  readonly frontend?: string
  readonly out: string
  readonly record?: string
  readonly flows?: ReadonlyArray<string>
  readonly keep: boolean
  readonly port?: number
  /** Rebuild the recordings from the captured traffic of an earlier run's output folder (no browser). */
  readonly rebuild?: string
}

const usage = "usage: npm run deerflow-app -- --frontend DIR [--out DIR] [--record DIR] [--flows a,b] [--port N] [--keep]\n" +
  "       npm run deerflow-app -- --rebuild OUT_DIR --record DIR   (recordings again from an earlier run's traffic)"

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const args: { -readonly [K in keyof Args]: Args[K] } = { out: Path.join(ROOT, "test-results/deerflow-app"), keep: false }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const value = () => {
      const next = argv[++i]
      if (next === undefined) throw new Error(`${arg} needs a value\n${usage}`)
      return next
    }
    if (arg === "--frontend") args.frontend = Path.resolve(value())
    else if (arg === "--out") args.out = Path.resolve(value())
    else if (arg === "--record") args.record = Path.resolve(value())
    else if (arg === "--flows") args.flows = value().split(",").map((f) => f.trim()).filter((f) => f !== "")
    else if (arg === "--port") args.port = Number(value())
    else if (arg === "--keep") args.keep = true
    else if (arg === "--rebuild") args.rebuild = Path.resolve(value())
    else if (arg === "--help" || arg === "-h") {
      console.log(usage)
      process.exit(0)
    } else throw new Error(`unknown argument ${arg}\n${usage}`)
  }
  return args
}

const say = (text: string) => process.stdout.write(`${text}\n`)

const git = (args: ReadonlyArray<string>, cwd: string) => {
  try {
    return ChildProcess.execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return undefined
  }
}

/** The `detail` of a problem or error body, cut short. */
const detailOf = (exchange: Recorder.Exchange): string => {
  try {
    const body = JSON.parse(exchange.responseBody.toString("utf8")) as { detail?: unknown; title?: unknown }
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body.title ?? "")
    return detail.length > 160 ? `${detail.slice(0, 157)}...` : detail
  } catch {
    return ""
  }
}

/** The calls of a flow the gateway refused or failed, once each: `METHOD path → status: detail`. */
const refusals = (exchanges: ReadonlyArray<Recorder.Exchange>): Array<string> => {
  const lines = new Map<string, number>()
  for (const e of exchanges) {
    if (e.status > 0 && e.status < 400 && e.error === undefined) continue
    const path = new URL(e.url, "http://gateway").pathname
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, "{id}")
    const status = e.error !== undefined ? `unreachable (${e.error})` : String(e.status)
    const detail = e.error === undefined ? detailOf(e) : ""
    const line = `${e.method} ${path} → ${status}${detail !== "" ? `: ${detail}` : ""}`
    lines.set(line, (lines.get(line) ?? 0) + 1)
  }
  return [...lines].map(([line, count]) => (count > 1 ? `${line} (×${count})` : line))
}

const launch = (profile: string): Promise<BrowserContext> =>
  chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM!,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [...FLAGS]
  })

/** Opens each route once so that Next compiles it before a flow waits on it (minutes each, the first time). */
const warm = async (page: Page, app: string, routes: ReadonlyArray<string>) => {
  for (const route of routes) {
    const started = Date.now()
    say(`  compiling ${route} ...`)
    try {
      await page.goto(`${app}${route}`, { timeout: 900_000, waitUntil: "load" })
      say(`  ${route} ready in ${Math.round((Date.now() - started) / 1000)} s`)
    } catch (error) {
      say(`  ${route} did not load: ${(error as Error).message.split("\n")[0]}`)
    }
  }
}

/** A flow's traffic as captured (bodies in base64), kept in the output folder to rebuild its recording from. */
interface Raw {
  readonly flow: string
  readonly auth: "disabled" | "enabled"
  readonly result: Record.Result
  readonly meta: { readonly [key: string]: unknown }
  readonly exchanges: ReadonlyArray<Omit<Recorder.Exchange, "requestBody" | "responseBody"> & {
    readonly requestBody: string
    readonly responseBody: string
  }>
}

/** Writes the recording of a flow (`<dir>/<flow>.json`) from its captured traffic. */
const writeRecording = (dir: string, raw: Raw) => {
  const flow = FLOWS.find((f) => f.name === raw.flow)
  if (flow === undefined) throw new Error(`unknown flow ${raw.flow}`)
  Fs.mkdirSync(dir, { recursive: true })
  const recording = Record.recording({
    flow: flow.name,
    description: flow.description,
    exchanges: raw.exchanges.map((e) => ({
      ...e,
      requestBody: Buffer.from(e.requestBody, "base64"),
      responseBody: Buffer.from(e.responseBody, "base64")
    })),
    expected: flow.expected,
    readsAfter: flow.readsAfter,
    result: raw.result,
    auth: raw.auth,
    meta: raw.meta
  })
  Fs.writeFileSync(Path.join(dir, `${flow.name}.json`), `${JSON.stringify(recording, null, 2)}\n`)
}

interface Outcome {
  readonly flow: Flow
  readonly result: Record.Result
  readonly screenshots: ReadonlyArray<string>
}

/** Runs one flow; its verdict from its checks and from the calls the gateway refused meanwhile. */
const runFlow = async (options: {
  readonly flow: Flow
  readonly index: number
  readonly page: Page
  readonly app: string
  readonly out: string
  readonly recorder: Recorder.Recorder
  readonly shared: Map<string, string>
}): Promise<Outcome> => {
  const { flow, page, recorder } = options
  const screenshots: Array<string> = []
  const prefix = `${String(options.index + 1).padStart(2, "0")}-${flow.name}`
  let shots = 0
  const shot = async (name: string) => {
    const file = `${prefix}-${++shots}-${name}.png`
    try {
      await page.screenshot({ path: Path.join(options.out, file), fullPage: true, timeout: 30_000 })
      screenshots.push(file)
    } catch (error) {
      say(`    (no screenshot ${file}: ${(error as Error).message.split("\n")[0]})`)
    }
  }
  recorder.setFlow(flow.name)
  const start = recorder.exchanges.length
  let failure: string | undefined
  try {
    await flow.run({ page, app: options.app, shot, shared: options.shared, scratch: options.out })
  } catch (error) {
    failure = error instanceof CheckFailed ? error.message : `the flow broke: ${(error as Error).message.split("\n")[0]}`
    await shot("failed")
  }
  await page.waitForTimeout(2000)
  await recorder.settle(5000)
  const refused = refusals(recorder.exchanges.slice(start).filter((e) => e.flow === flow.name))
  const calls = refused.length > 0 ? `; refused or failed calls: ${refused.join("; ")}` : ""
  const result: Record.Result = failure !== undefined
    ? { status: "failed", reason: `${failure}${calls}` }
    : refused.length > 0
    ? { status: "degraded", reason: `its checks passed, but${calls.slice(1)}` }
    : { status: "passed", reason: "" }
  return { flow, result, screenshots }
}

const main = async () => {
  const args = parseArgs(process.argv.slice(2))
  if (args.rebuild !== undefined) {
    if (args.record === undefined) throw new Error(`--rebuild needs --record DIR\n${usage}`)
    const dir = Path.join(args.rebuild, "raw")
    for (const file of Fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
      const raw = JSON.parse(Fs.readFileSync(Path.join(dir, file), "utf8")) as Raw
      if (args.flows !== undefined && !args.flows.includes(raw.flow)) continue
      writeRecording(args.record, raw)
      say(`${raw.flow}: ${Path.join(args.record, file)}`)
    }
    return 0
  }
  const problem = Stack.checkFrontend(args.frontend)
  if (problem !== undefined) {
    process.stderr.write(`${problem}\n`)
    return 2
  }
  if (CHROMIUM === undefined) {
    process.stderr.write("No Chromium found (/usr/bin/chromium): install it (apt-get install -y chromium).\n")
    return 2
  }
  const frontend = args.frontend!
  const unknown = (args.flows ?? []).filter((name) => !FLOWS.some((f) => f.name === name))
  if (unknown.length > 0) {
    process.stderr.write(`unknown flows: ${unknown.join(", ")}; the flows are ${FLOWS.map((f) => f.name).join(", ")}\n`)
    return 2
  }
  const flows = FLOWS.filter((f) => args.flows === undefined || args.flows.includes(f.name))
  Fs.rmSync(args.out, { recursive: true, force: true })
  Fs.mkdirSync(args.out, { recursive: true })
  const home = Path.join(args.out, "antler-home")
  Fs.mkdirSync(home, { recursive: true })
  const logs = {
    pnpm: Path.join(args.out, "pnpm-install.log"),
    antler: Path.join(args.out, "antler-serve.log"),
    next: Path.join(args.out, "next-dev.log")
  }

  if (!Stack.installed(frontend)) {
    say(`Installing DeerFlow's frontend with pnpm (about a minute; log: ${logs.pnpm}) ...`)
    await Stack.install(frontend, logs.pnpm)
  }

  const scope = Effect.runSync(Scope.make())
  const procs: Array<Stack.Proc> = []
  let recorder: Recorder.Recorder | undefined
  let context: BrowserContext | undefined
  let cleaning: Promise<void> | undefined
  const cleanup = () => {
    cleaning ??= (async () => {
      await context?.close().catch(() => {})
      for (const proc of [...procs].reverse()) await proc.stop()
      await recorder?.close()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    })()
    return cleaning
  }
  // `on`, not `once`: tsx exits at once on a SIGINT that no listener is left to take
  process.on("SIGINT", () => void cleanup().then(() => process.exit(130)))
  process.on("exit", () => {
    for (const proc of procs) proc.kill()
  })

  try {
    const scripted = await Effect.runPromise(
      Scope.extend(ScriptedChatServer.start(makeScript(), { model: "scripted", delayMs: 15 }), scope)
    )
    const port = args.port ?? await Stack.freePort()
    const appOrigin = `http://127.0.0.1:${port}`
    const config = Path.join(home, "config.yaml")
    Fs.writeFileSync(config, Stack.antlerConfig({ modelUrl: scripted.url, appOrigin, skills: Path.join(ROOT, "test/fixtures/deerflow/skills") }))
    Fs.writeFileSync(Path.join(home, "extensions_config.json"), Stack.EXTENSIONS_CONFIG)
    say(`The model is SCRIPTED (fixed answers from ${scripted.url}); no real model is called.`)
    let antler = await Stack.startAntler(ROOT, home, config, logs.antler)
    procs.push(antler.proc)
    say(`antler serve: ${antler.url} (data in ${home}, log ${logs.antler})`)
    const memoryPortFree = await Stack.portFree(MEMORY_ROUTE_PORT)
    recorder = await Recorder.start(antler.url, memoryPortFree ? [MEMORY_ROUTE_PORT] : [])
    say(`recording proxy: ${recorder.url}${memoryPortFree ? ` and http://127.0.0.1:${MEMORY_ROUTE_PORT}` : ""}`)
    if (!memoryPortFree) {
      say(`  127.0.0.1:${MEMORY_ROUTE_PORT} is taken: the app's /api/memory route (which always calls that port) ` +
        "will not reach this gateway")
    }

    const meta = {
      deerflow_frontend: (JSON.parse(Fs.readFileSync(Path.join(frontend, "package.json"), "utf8")) as { version?: string }).version,
      deerflow_commit: git(["rev-parse", "HEAD"], frontend) ?? "unknown (not a git checkout)",
      antler_commit: git(["rev-parse", "HEAD"], ROOT) ?? "unknown",
      date: new Date().toISOString().slice(0, 10)
    }
    const outcomes: Array<Outcome> = []
    const shared = new Map<string, string>()
    const groups = (["disabled", "enabled"] as const)
      .map((auth) => ({ auth, flows: flows.filter((f) => f.auth === auth) }))
      .filter((g) => g.flows.length > 0)
    for (const [g, { auth, flows: group }] of groups.entries()) {
      const mode = auth === "disabled" ? "auth disabled (DEER_FLOW_AUTH_DISABLED=1)" : "with DeerFlow's local accounts"
      if (auth === "enabled") {
        // DeerFlow's accounts are off by default in Antler (the open loopback gateway): this run turns them on
        await antler.proc.stop()
        procs.splice(procs.indexOf(antler.proc), 1)
        const accountsConfig = Path.join(home, "config-accounts.yaml")
        Fs.writeFileSync(accountsConfig, Stack.antlerConfig({
          modelUrl: scripted.url,
          appOrigin,
          skills: Path.join(ROOT, "test/fixtures/deerflow/skills"),
          accounts: true
        }))
        antler = await Stack.startAntler(ROOT, home, accountsConfig, logs.antler)
        procs.push(antler.proc)
        recorder.setTarget(antler.url)
        say(`antler serve with gateway.auth.accounts: ${antler.url}`)
      }
      say(`\nDeerFlow's Next dev server, ${mode}:`)
      const next = await Stack.startNext({ frontend, port, gateway: recorder.url, authDisabled: auth === "disabled", log: logs.next })
      procs.push(next.proc)
      say(`  ${next.url} (log ${logs.next})`)
      context = await launch(Path.join(args.out, `chromium-${auth}`))
      const page = context.pages()[0] ?? await context.newPage()
      page.setDefaultNavigationTimeout(900_000)
      recorder.setFlow("warm-up")
      await warm(page, next.url, auth === "disabled"
        ? ["/workspace/chats/new", "/workspace/chats", "/workspace/agents", "/workspace/agents/new",
          "/workspace/agents/deer-guide/chats/new", "/workspace/scheduled-tasks"]
        : ["/login", "/setup", "/workspace/chats/new"])
      for (const flow of group) {
        say(`\n[${flow.name}] ${flow.description}`)
        const outcome = await runFlow({ flow, index: FLOWS.indexOf(flow), page, app: next.url, out: args.out, recorder, shared })
        outcomes.push(outcome)
        say(`  ${outcome.result.status.toUpperCase()}${outcome.result.reason !== "" ? `: ${outcome.result.reason}` : ""}`)
        say(`  screenshots: ${outcome.screenshots.join(", ") || "none"}`)
        const raw: Raw = {
          flow: flow.name,
          auth,
          result: outcome.result,
          meta,
          exchanges: recorder.exchanges.filter((e) => e.flow === flow.name).map((e) => ({
            ...e,
            requestBody: e.requestBody.toString("base64"),
            responseBody: e.responseBody.toString("base64")
          }))
        }
        Fs.mkdirSync(Path.join(args.out, "raw"), { recursive: true })
        Fs.writeFileSync(Path.join(args.out, "raw", `${flow.name}.json`), JSON.stringify(raw))
        if (args.record !== undefined) writeRecording(args.record, raw)
      }
      if (args.keep && g === groups.length - 1) break
      await context.close()
      context = undefined
      await next.proc.stop()
      procs.splice(procs.indexOf(next.proc), 1)
    }

    say("\nSummary:")
    for (const { flow, result } of outcomes) say(`  ${result.status.padEnd(8)} ${flow.name}`)
    say(`Screenshots in ${args.out}`)
    if (args.record !== undefined) say(`Recordings in ${args.record}`)
    Fs.writeFileSync(Path.join(args.out, "summary.json"), `${JSON.stringify(outcomes.map((o) => ({
      flow: o.flow.name,
      ...o.result,
      screenshots: o.screenshots
    })), null, 2)}\n`)
    if (args.keep) {
      say("\n--keep: everything stays up until Ctrl-C.")
      await new Promise(() => {})
    }
    return outcomes.some((o) => o.result.status === "failed") ? 1 : 0
  } finally {
    await cleanup()
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`deerflow-app: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(2)
  }
)
