/**
 * How tests start `antler` as a process: the bundle of the current sources made by the global setup
 * (test/support/cliBundle.ts), else the sources through tsx. Spread it after `process.execPath`.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Yaml from "yaml"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const MAIN = Path.join(ROOT, "src/programs/main.ts")

/** The node arguments that run the CLI (before the CLI's own arguments). */
export const antlerCommand: ReadonlyArray<string> = process.env.ANTLER_TEST_CLI !== undefined
  ? [process.env.ANTLER_TEST_CLI]
  : ["--import", TSX, MAIN]

/**
 * The environment of an `antler` child: the caller's, without its OpenAI, Antler or DeerFlow settings, no colour,
 * and `extra` on top.
 */
export const childEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_") && !key.startsWith("DEER_FLOW_")) env[key] = value
  }
  return { ...env, NO_COLOR: "1", ...extra }
}

/** What an `antler` run printed, and how it ended. */
export interface CliOutput {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `antler ...args` to its end in `cwd` with `env` (see `childEnv`), its output collected; `stdin`, when
 * given, is written to its standard input, which is then closed.
 */
export const runAntler = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly stdin?: string }
) =>
  new Promise<CliOutput>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, [...antlerCommand, ...args], {
      env: options.env,
      cwd: options.cwd,
      stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    if (options.stdin !== undefined) child.stdin!.end(options.stdin)
  })

/** `antler serve --port 0` as a child process. */
export interface ServeProcess {
  /** Resolves once the process says where it listens; rejects, with its output, if it exits first. */
  readonly url: Promise<string>
  readonly child: ChildProcess.ChildProcess
  /** Everything it printed so far (stdout and stderr). */
  readonly output: () => string
  /** The exit code (or signal), once it exited. */
  readonly exited: Promise<number | string>
}

/** Starts `antler serve --port 0 --config <config>` (and `extraArgs`) with `home` as its ANTLER_HOME. */
export const serveProcess = (home: string, config: string, extraArgs: ReadonlyArray<string> = []): ServeProcess => {
  const args = [...antlerCommand, "serve", "--port", "0", "--config", config, ...extraArgs]
  const child = ChildProcess.spawn(process.execPath, args, {
    cwd: home,
    env: childEnv({ ANTLER_HOME: home }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal!)))
  const url = new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/\S+)/.exec(output)
      if (match !== null) resolve(match[1]!)
    })
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    void exited.then((code) => reject(new Error(`antler serve exited (${code}): ${output}`)))
  })
  url.catch(() => {})
  return { url, child, output: () => output, exited }
}


/**
 * Writes the configuration of an `antler serve` child at `file` and returns its path: one model, the SCRIPTED Chat
 * Completions server at `modelUrl`, long-term memory off, and `more` (sandbox, database, gateway...) beside them.
 */
export const writeServeConfig = (file: string, modelUrl: string, more: Record<string, unknown> = {}): string => {
  const model = { name: "scripted", model: "scripted", base_url: modelUrl, api_key: "sk-test-serve-0000000000" }
  Fs.writeFileSync(file, Yaml.stringify({ models: [model], memory: { enabled: false }, ...more }))
  return file
}
