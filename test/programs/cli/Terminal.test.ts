/**
 * The status line (spinner and elapsed time) alone, and `antler run` in a real pseudo-terminal (util-linux
 * `script`) against a slow loopback Chat Completions server: what a person sees while the model thinks and
 * while a command runs, and that none of it reaches a pipe.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as Terminal from "../../../src/programs/cli/Terminal.js"
import { antlerCommand, childEnv } from "../../support/cli.js"

const SLOW = 180_000

const CLEAR = "\r\x1b[2K"

describe("Terminal.statusLine", () => {
  it("says how long something has taken in seconds, then minutes", () => {
    assert.strictEqual(Terminal.elapsed(400), "0.4s")
    assert.strictEqual(Terminal.elapsed(12_000), "12.0s")
    assert.strictEqual(Terminal.elapsed(125_000), "2m 05s")
    assert.strictEqual(Terminal.statusText("running bash", 1500, 2), "⠹ running bash · 1.5s")
  })

  it.scoped("draws after output that ends a line, redraws as time passes, clears before output and at the end", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const line = yield* Terminal.statusLine({ write: (text) => void written.push(text) })
        line.write("thread t1\n", "waiting for m")
        assert.deepStrictEqual(written, ["thread t1\n", `${CLEAR}⠋ waiting for m · 0.0s`])
        yield* TestClock.adjust(Duration.millis(1500))
        assert.strictEqual(written.at(-1), `${CLEAR}${Terminal.statusText("waiting for m", 1500, written.length - 2)}`)
        written.length = 0
        // A token: the status line goes, and does not come back in the middle of a line.
        line.write("Hel", undefined)
        line.write("lo", "running bash")
        yield* TestClock.adjust(Duration.millis(500))
        assert.deepStrictEqual(written, [CLEAR, "Hel", "lo"])
        // A line end: it comes back, with the time since the activity changed.
        line.write("\n", "running bash")
        assert.match(written.at(-1)!, /^\r\x1b\[2K\S running bash · 0\.5s$/)
      }))
      assert.strictEqual(written.at(-1), CLEAR)
    }))
})

/** The screen a terminal shows for `raw` (lines; carriage returns, erased lines and colours applied). */
const screen = (raw: string): ReadonlyArray<string> => {
  const lines: Array<string> = [""]
  let column = 0
  for (let i = 0; i < raw.length; i++) {
    const char = raw[i]!
    if (char === "\x1b") {
      const match = /^\x1b\[([0-9;]*)([A-Za-z])/.exec(raw.slice(i))
      if (match !== null) {
        if (match[2] === "K" && match[1] === "2") lines[lines.length - 1] = ""
        i += match[0].length - 1
        continue
      }
    }
    if (char === "\r") column = 0
    else if (char === "\n") {
      lines.push("")
      column = 0
    } else {
      const line = lines[lines.length - 1]!.padEnd(column)
      lines[lines.length - 1] = line.slice(0, column) + char + line.slice(column + 1)
      column++
    }
  }
  return lines
}

const shellQuote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`

const SPINNER = /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/

describe("antler run in a terminal", () => {
  it.live("a spinner with the elapsed time before the first token and while bash runs; its output before it ends", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          content: "Running it. ",
          toolCalls: [{
            name: "bash",
            arguments: { description: "Print then wait", command: "echo first; sleep 60; echo second" }
          }]
        },
        "Never reached."
      ], { delayMs: 300 })
      const home = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-tty-")))
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(config, "sandbox:\n  allow_host_bash: true\n")
      const argv = [process.execPath, ...antlerCommand, "run", "--config", config, "--base-url", server.url]
      const command = [...argv, "--api-key", "x", "--thread", "tty", "go"].map(shellQuote).join(" ")
      // `script` gives the command a pseudo-terminal; what it shows comes out on script's stdout.
      const child = ChildProcess.spawn("script", ["-qec", command, "/dev/null"], {
        env: childEnv({ ANTLER_HOME: home }),
        cwd: home,
        stdio: ["pipe", "pipe", "pipe"]
      })
      let raw = ""
      let whenFirst: string | undefined
      child.stdout!.on("data", (chunk: Buffer) => {
        raw += chunk.toString("utf8")
        if (whenFirst === undefined && /│ first/.test(raw)) {
          // The command's first line is on the screen while it still sleeps: Ctrl-C ends the run there.
          whenFirst = raw
          child.stdin!.write("\x03")
        }
      })
      const code = yield* Effect.promise(() => new Promise<number | null>((resolve) => child.on("close", resolve)))
      assert.strictEqual(code, 130, raw)
      assert.isDefined(whenFirst, raw)

      // Before the first token: the spinner, with what it waits for and for how long.
      const beforeToken = raw.slice(0, raw.indexOf("Running it."))
      assert.match(beforeToken, /⠋ waiting for gpt-4o-mini · \d+\.\ds/)
      // While bash runs: the spinner says so, and the command's output comes before the command ends.
      const call = raw.indexOf("→ Print then wait · bash echo first; sleep 60; echo second")
      assert.isAbove(call, 0, raw)
      const whileRunning = raw.slice(call, raw.indexOf("│ first"))
      assert.match(whileRunning, new RegExp(`${SPINNER.source} running bash · \\d+\\.\\ds`))
      assert.notInclude(whenFirst!, "│ second")
      assert.notInclude(whenFirst!, "←")
      assert.strictEqual(server.requests.length, 1)

      // What stays on the screen: the transcript, no spinner left behind.
      const shown = screen(raw).map((line) => line.replace(/\^C/, "").trimEnd()).filter((line) =>
        line !== "" && !line.includes("sandbox")
      )
      assert.deepStrictEqual(shown, [
        `thread tty (new; continue it with --continue) · model gpt-4o-mini at ${server.url}`,
        "Running it.",
        "→ Print then wait · bash echo first; sleep 60; echo second",
        "  │ first",
        "— cancelled; completed steps are saved · thread tty"
      ])
    })), SLOW)

  it.live("piped, the same run shows the output lines and the result, and nothing of the status line", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          content: "Running it. ",
          toolCalls: [{
            name: "bash",
            arguments: { description: "Print twice", command: "echo first; sleep 1; echo second" }
          }]
        },
        "Both printed."
      ], { delayMs: 300 })
      const home = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-pipe-")))
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(config, "sandbox:\n  allow_host_bash: true\n")
      const child = ChildProcess.spawn(process.execPath, [
        ...antlerCommand, "run", "--config", config, "--base-url", server.url, "--api-key", "x", "go"
      ], { env: childEnv({ ANTLER_HOME: home, NO_COLOR: "" }), cwd: home, stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
      const code = yield* Effect.promise(() => new Promise<number | null>((resolve) => child.on("close", resolve)))
      assert.strictEqual(code, 0, stdout)
      assert.include(
        stdout,
        "Running it. \n→ Print twice · bash echo first; sleep 1; echo second\n" +
          "  │ first\n  │ second\n← done\nBoth printed.\n"
      )
      assert.notMatch(stdout, SPINNER)
      assert.notInclude(stdout, "\r")
      assert.notInclude(stdout, "\x1b")
      assert.notInclude(stdout, "waiting for")
    })), SLOW)
})
