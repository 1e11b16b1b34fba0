/**
 * DeerFlow's own `frontend/tests/e2e-real-backend` specs, run against `antler serve` in place of DeerFlow's replay
 * gateway:
 *
 *   npm run deerflow-app:e2e -- --frontend ../deer-flow/frontend [--out DIR]
 *
 * DeerFlow runs them (`playwright.real-backend.config.ts`) against its gateway whose model replays a recorded run
 * (`backend/tests/fixtures/replay/write_read_file.ultra.json`). Here a SCRIPTED Chat Completions server replays
 * the same file's turns (the lead agent's in order, the title and the suggestions where Antler asks for them),
 * `antler serve` runs over it, and DeerFlow's Next dev server over that; the specs are then run by the frontend's
 * own Playwright test runner (`@playwright/test`, installed with the frontend) with Debian's Chromium, through a
 * config written to the output folder (the same tests, no web servers of its own). Prints each test's outcome
 * and why it failed.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as Stack from "./stack.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const FIXTURE = "backend/tests/fixtures/replay/write_read_file.ultra.json"
const usage = "usage: npm run deerflow-app:e2e -- --frontend DIR [--out DIR] [--accounts]"

const say = (text: string) => process.stdout.write(`${text}\n`)

/** The recorded run DeerFlow's replay gateway answers from. */
interface Fixture {
  readonly prompt: string
  readonly turns: ReadonlyArray<{
    readonly caller: string
    readonly output: {
      readonly data: {
        readonly content?: unknown
        readonly tool_calls?: ReadonlyArray<{ readonly name: string; readonly args: Record<string, unknown> }>
      }
    }
  }>
}

const text = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("")
    : ""

/**
 * The scripted model replaying the fixture: the lead agent's turns in order, counted from the user's last message
 * (so every chat replays them from the start), a suggestions call the recorded suggestions, a title call the
 * recorded title; anything else (the memory update) a short answer of its kind.
 */
export const replayScript = (fixture: Fixture) => {
  const of = (caller: string) => fixture.turns.filter((t) => t.caller === caller).map((t) => t.output.data)
  const lead = of("lead_agent")
  const title = text(of("middleware:title")[0]?.content) || "Untitled"
  const suggestions = text(of("suggest_agent")[0]?.content) || "[]"
  return (body: ChatRequestBody): Turn => {
    const tools = body.tools ?? []
    const all = body.messages.map((m) => text(m.content)).join("\n")
    if (tools.length === 0) {
      if (/suggest|follow-up question/i.test(all)) return suggestions
      if (/long-term memory/i.test(all)) return JSON.stringify({ user: {}, history: {}, newFacts: [], factsToRemove: [] })
      if (/title/i.test(all)) return title
      return "Replay"
    }
    const lastUser = body.messages.map((m) => m.role).lastIndexOf("user")
    const step = body.messages.slice(lastUser + 1).filter((m) => m.role === "assistant").length
    const turn = lead[Math.min(step, lead.length - 1)]
    if (turn === undefined) return "Replay"
    const calls = turn.tool_calls ?? []
    return calls.length > 0
      ? { content: text(turn.content), toolCalls: calls.map((c) => ({ name: c.name, arguments: c.args })) }
      : text(turn.content)
  }
}

/** The Playwright config: DeerFlow's e2e-real-backend specs against the servers started here. */
const playwrightConfig = (options: { readonly frontend: string; readonly app: string; readonly out: string }) =>
  `// Written by scripts/deerflow-app/e2e.ts: DeerFlow's real-backend specs against antler serve.
export default {
  testDir: ${JSON.stringify(Path.join(options.frontend, "tests/e2e-real-backend"))},
  outputDir: ${JSON.stringify(Path.join(options.out, "test-results"))},
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 180000,
  reporter: [["list"], ["json", { outputFile: ${JSON.stringify(Path.join(options.out, "results.json"))} }]],
  use: {
    baseURL: ${JSON.stringify(options.app)},
    viewport: { width: 1280, height: 720 },
    launchOptions: {
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
    }
  },
  projects: [{ name: "chromium" }]
}
`

interface Spec {
  readonly title: string
  readonly file: string
  readonly tests: ReadonlyArray<{ readonly results: ReadonlyArray<{ readonly status: string; readonly error?: { readonly message?: string } }> }>
}
interface Suite {
  readonly specs?: ReadonlyArray<Spec>
  readonly suites?: ReadonlyArray<Suite>
}

const specsOf = (suite: Suite): Array<Spec> => [...suite.specs ?? [], ...(suite.suites ?? []).flatMap(specsOf)]

const plain = (message: string) =>
  // eslint-disable-next-line no-control-regex
  message.replace(/\u001b\[[0-9;]*m/g, "").split("\n").filter((l) => l.trim() !== "").slice(0, 6).join(" / ")

const main = async () => {
  const argv = process.argv.slice(2)
  let frontend: string | undefined
  let out = Path.join(ROOT, "test-results/deerflow-e2e")
  let accounts = false
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--frontend") frontend = Path.resolve(argv[++i] ?? "")
    else if (argv[i] === "--accounts") accounts = true
    else if (argv[i] === "--out") out = Path.resolve(argv[++i] ?? "")
    else throw new Error(`unknown argument ${argv[i]}\n${usage}`)
  }
  const problem = Stack.checkFrontend(frontend)
  if (problem !== undefined) {
    process.stderr.write(`${problem}\n`)
    return 2
  }
  const dir = frontend!
  const runner = Path.join(dir, "node_modules/@playwright/test/cli.js")
  if (!Fs.existsSync(runner)) {
    process.stderr.write("The frontend has no @playwright/test (its dev dependency): install the frontend with pnpm.\n")
    return 2
  }
  const fixturePath = Path.join(dir, "..", FIXTURE)
  if (!Fs.existsSync(fixturePath)) {
    process.stderr.write(`${fixturePath} is missing: the specs need the deer-flow checkout the frontend is part of.\n`)
    return 2
  }
  const fixture = JSON.parse(Fs.readFileSync(fixturePath, "utf8")) as Fixture
  Fs.rmSync(out, { recursive: true, force: true })
  const home = Path.join(out, "antler-home")
  Fs.mkdirSync(home, { recursive: true })
  const scope = Effect.runSync(Scope.make())
  const procs: Array<Stack.Proc> = []
  process.on("exit", () => {
    for (const proc of procs) proc.kill()
  })
  process.on("SIGINT", () => process.exit(130))
  try {
    const scripted = await Effect.runPromise(
      Scope.extend(ScriptedChatServer.start(replayScript(fixture), { model: "scripted" }), scope)
    )
    const port = await Stack.freePort()
    const app = `http://127.0.0.1:${port}`
    const config = Path.join(home, "config.yaml")
    Fs.writeFileSync(config, Stack.antlerConfig({
      modelUrl: scripted.url,
      appOrigin: app,
      skills: Path.join(ROOT, "test/fixtures/deerflow/skills"),
      accounts
    }))
    say(`The model is SCRIPTED: it replays ${FIXTURE} (no real model is called).`)
    const antler = await Stack.startAntler(ROOT, home, config, Path.join(out, "antler-serve.log"), { DEER_FLOW_AUTH_DISABLED: "1" })
    procs.push(antler.proc)
    say(`antler serve: ${antler.url}`)
    const next = await Stack.startNext({ frontend: dir, port, gateway: antler.url, authDisabled: true, log: Path.join(out, "next-dev.log") })
    procs.push(next.proc)
    say(`DeerFlow's Next dev server (auth disabled, as DeerFlow's config runs it): ${next.url}`)
    // the first request of a page compiles it (minutes on a small machine): not the tests' time
    for (const route of ["/workspace/chats/new", "/api/v1/auth/me"]) {
      await fetch(`${next.url}${route}`, { signal: AbortSignal.timeout(900_000) }).catch(() => undefined)
    }
    const configFile = Path.join(out, "playwright.e2e-real-backend.config.mjs")
    Fs.writeFileSync(configFile, playwrightConfig({ frontend: dir, app: next.url, out }))
    const code = await new Promise<number | null>((resolve) => {
      const child = ChildProcess.spawn(process.execPath, [runner, "test", "-c", configFile], {
        cwd: out,
        stdio: "inherit",
        env: { ...process.env, CI: "1", E2E_APP_URL: next.url, E2E_FRONTEND_PORT: String(port) }
      })
      child.on("exit", resolve)
    })
    const results = Path.join(out, "results.json")
    if (Fs.existsSync(results)) {
      const report = JSON.parse(Fs.readFileSync(results, "utf8")) as { suites: ReadonlyArray<Suite> }
      say("\nDeerFlow's e2e-real-backend specs against antler serve:")
      for (const spec of report.suites.flatMap(specsOf)) {
        const result = spec.tests[0]?.results[0]
        const status = result?.status ?? "not run"
        say(`  ${status.padEnd(8)} ${spec.file}: ${spec.title}`)
        if (result?.error?.message !== undefined) say(`           ${plain(result.error.message)}`)
      }
    }
    return code ?? 1
  } finally {
    for (const proc of [...procs].reverse()) await proc.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`deerflow-app:e2e: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(2)
  }
)
