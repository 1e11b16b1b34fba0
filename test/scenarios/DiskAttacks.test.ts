/**
 * Attacks through what Antler finds on disk, through the real CLI (child processes against a scripted Chat
 * Completions server in this process):
 *
 * - Files read as configuration that never end or are huge (`--config /dev/zero`, `/dev/urandom`, a FIFO, a
 *   too-large `config.yaml`, `extensions_config.json` or `SOUL.md`): refused at once, exit 2, one message naming
 *   the file and why (the limit, when it is the size).
 * - Skills with a huge description, a huge SKILL.md or a FIFO for one: the run goes on, the description is cut in
 *   the model's request, the broken skills are skipped, each with one warning.
 *
 * Deadlines here are generous and only end a hung child (a test then fails on its exit code); nothing is timed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { antlerCommand, childEnv } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"

const SLOW = 300_000
/** A child still running after this is killed (it hung): far more than a start takes on a loaded machine. */
const DEADLINE = 120_000

interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `antler ...` in `cwd` with `home` as its data directory; a child past the deadline is killed. */
const antler = (home: string, cwd: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<Result>((resolve) => {
      const child = ChildProcess.spawn(process.execPath, [...antlerCommand, ...args], {
        env: childEnv({ ANTLER_HOME: home, ...env }),
        cwd,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
      const deadline = setTimeout(() => child.kill("SIGKILL"), DEADLINE)
      child.on("close", (code, signal) => {
        clearTimeout(deadline)
        resolve({ code, signal, stdout, stderr })
      })
    })
  )

const output = (r: Result) => `${r.signal ?? `exit ${r.code}`}\n${r.stdout}${r.stderr}`

const mkfifo = (path: string) => ChildProcess.execFileSync("mkfifo", [path])

/** A directory with a `config.yaml` (memory off: no extra model call) and a data directory. */
const project = (prefix: string, config = "memory:\n  enabled: false\n") => {
  const dir = tempDir(prefix)
  const home = Path.join(dir, "home")
  Fs.mkdirSync(home)
  const file = Path.join(dir, "config.yaml")
  Fs.writeFileSync(file, config)
  return { dir, home, config: file }
}

const MiB = 1024 * 1024

/** The system prompt of a request the model got. */
const systemOf = (body: ChatRequestBody): string => {
  const system = body.messages.find((m) => m.role === "system")
  return typeof system?.content === "string" ? system.content : JSON.stringify(system?.content ?? "")
}

const count = (text: string, part: string) => text.split(part).length - 1

describe("files read as configuration are regular files under a size limit", () => {
  it.live("--config /dev/zero, /dev/urandom, a FIFO or a config.yaml over 1 MiB: exit 2 at once, naming the file", () =>
    Effect.gen(function*() {
      const { dir, home } = project("antler-disk-config-")
      const fifo = Path.join(dir, "fifo.yaml")
      mkfifo(fifo)
      const big = Path.join(dir, "big.yaml")
      Fs.writeFileSync(big, `# ${"x".repeat(MiB)}\nmemory:\n  enabled: false\n`)
      // (the devices last: a reader without a limit fills memory from them, so a failure stops before them)
      const cases: ReadonlyArray<readonly [string, string]> = [
        [big, `${big}: too large: 1.0 MiB, over the limit of 1 MiB`],
        [fifo, `${fifo}: not a regular file (a FIFO)`],
        ["/dev/zero", "/dev/zero: not a regular file (a character device)"],
        ["/dev/urandom", "/dev/urandom: not a regular file (a character device)"]
      ]
      for (const [file, message] of cases) {
        const result = yield* antler(home, dir, ["run", "--config", file, "--base-url", "http://127.0.0.1:9/v1", "hi"])
        assert.strictEqual(result.code, 2, output(result))
        assert.strictEqual(result.stderr, `Configuration error (1 problem):\n${message}\n`)
        assert.strictEqual(result.stdout, "")
      }
    }), SLOW)

  it.scopedLive("extensions_config.json over 1 MiB or a FIFO, SOUL.md over 128 KiB or a FIFO: exit 2 naming the file", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "Hello.")
      const run = (p: ReturnType<typeof project>, ...flags: ReadonlyArray<string>) =>
        antler(p.home, p.dir, ["run", "--config", p.config, "--base-url", server.url, "--api-key", "x", ...flags, "hi"])

      const extensions = project("antler-disk-ext-")
      const ext = Path.join(extensions.dir, "extensions_config.json")
      Fs.writeFileSync(ext, JSON.stringify({ mcpServers: {}, padding: "x".repeat(MiB) }))
      const large = yield* run(extensions)
      assert.strictEqual(large.code, 2, output(large))
      assert.include(large.stderr, `${ext}: too large: 1.0 MiB, over the limit of 1 MiB`)
      Fs.rmSync(ext)
      mkfifo(ext)
      const fifo = yield* run(extensions)
      assert.strictEqual(fifo.code, 2, output(fifo))
      assert.include(fifo.stderr, `${ext}: not a regular file (a FIFO)`)

      // the default agent's soul, and a custom agent's
      const soul = project("antler-disk-soul-")
      const global = Path.join(soul.home, "SOUL.md")
      Fs.writeFileSync(global, "You are terse. ".repeat(10_000))
      const globalSoul = yield* run(soul)
      assert.strictEqual(globalSoul.code, 2, output(globalSoul))
      assert.include(globalSoul.stderr, `${global}: too large: 146.5 KiB, over the limit of 128 KiB`)
      Fs.rmSync(global)
      mkfifo(global)
      const globalFifo = yield* run(soul)
      assert.strictEqual(globalFifo.code, 2, output(globalFifo))
      assert.include(globalFifo.stderr, `${global}: not a regular file (a FIFO)`)
      Fs.rmSync(global)
      const agent = Path.join(soul.home, "users", "default", "agents", "terse")
      Fs.mkdirSync(agent, { recursive: true })
      Fs.writeFileSync(Path.join(agent, "config.yaml"), "name: terse\ndescription: Short answers.\n")
      Fs.writeFileSync(Path.join(agent, "SOUL.md"), "Be brief. ".repeat(20_000))
      const custom = yield* run(soul, "--agent", "terse")
      assert.strictEqual(custom.code, 2, output(custom))
      assert.include(custom.stderr, `${Path.join(agent, "SOUL.md")}: too large: 195.3 KiB, over the limit of 128 KiB`)
      assert.lengthOf(server.requests, 0, "the model was never asked")
      // with a soul of a sane size the same agent runs
      Fs.writeFileSync(Path.join(agent, "SOUL.md"), "Be brief.")
      const fine = yield* run(soul, "--agent", "terse")
      assert.strictEqual(fine.code, 0, output(fine))
      assert.include(systemOf(server.requests[0]!), "Be brief.")
    }), SLOW)
})

describe("skills on disk are bounded", () => {
  it.scopedLive("a long description is cut to 1024 characters in the model's request; a 20 MB SKILL.md and a FIFO are skipped; one warning each", () =>
    Effect.gen(function*() {
      const p = project("antler-disk-skills-")
      const skill = (name: string, description: string) => {
        const folder = Path.join(p.dir, "skills", "public", name)
        Fs.mkdirSync(folder, { recursive: true })
        Fs.writeFileSync(Path.join(folder, "SKILL.md"), `---\nname: ${name}\ndescription: ${description}\n---\n\n# ${name}\n`)
      }
      skill("fine", "Writes haiku about deer.")
      const wordy = `Start of a wordy description. ${"blah ".repeat(60_000)}`
      skill("wordy", wordy)
      skill("huge", `Huge. ${"x".repeat(20 * MiB)}`)
      Fs.mkdirSync(Path.join(p.dir, "skills", "public", "pipe"), { recursive: true })
      mkfifo(Path.join(p.dir, "skills", "public", "pipe", "SKILL.md"))
      const server = yield* ScriptedChatServer.start(() => "Here is a haiku.")
      const result = yield* antler(p.home, p.dir, ["run", "--config", p.config, "--base-url", server.url, "--api-key", "x", "hi"])
      assert.strictEqual(result.code, 0, output(result))
      assert.include(result.stdout, "Here is a haiku.")
      const system = systemOf(server.requests[0]!)
      assert.include(system, "<name>fine</name>\n        <description>Writes haiku about deer. [built-in]<")
      const listed = /<name>wordy<\/name>\n {8}<description>([^<]*) \[built-in\]<\/description>/.exec(system)?.[1]
      assert.isDefined(listed, "the wordy skill is listed")
      assert.strictEqual(listed!.length, 1024)
      assert.isTrue(listed!.startsWith("Start of a wordy description. blah blah"))
      assert.isTrue(listed!.endsWith("…"))
      assert.notInclude(system, "<name>huge</name>")
      assert.notInclude(system, "<name>pipe</name>")
      assert.isBelow(server.bodies[0]!.length, 100_000, "the request stays small")
      // one warning per skill, naming its file
      const wordyFile = Path.join(p.dir, "skills", "public", "wordy", "SKILL.md")
      const hugeFile = Path.join(p.dir, "skills", "public", "huge", "SKILL.md")
      const pipeFile = Path.join(p.dir, "skills", "public", "pipe", "SKILL.md")
      const cut = `${wordyFile}: the description of wordy is ${wordy.trim().length} characters long; the prompt shows its first 1024`
      assert.strictEqual(count(result.stderr, cut), 1, result.stderr)
      assert.strictEqual(count(result.stderr, `skill skipped: ${hugeFile}: too large: 20.0 MiB, over the limit of 1 MiB`), 1, result.stderr)
      assert.strictEqual(count(result.stderr, `skill skipped: ${pipeFile}: not a regular file (a FIFO)`), 1, result.stderr)
    }), SLOW)
})
