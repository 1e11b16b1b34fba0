import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Bash from "../../src/layers/Bash.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import type { SandboxConfig } from "../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import { inRun } from "../support/fixtures.js"

// ---------------------------------------------------------------------------------------------------------
// A thread sandbox with the real tools, over a temp data directory.

const homes: Array<string> = []
afterAll(() => {
  for (const home of homes) Fs.rmSync(home, { recursive: true, force: true })
})

// Skipped only where bubblewrap is not installed at all; installed but broken fails the tests.
const bwrapInstalled = (process.env.PATH ?? "").split(":").some((dir) => Fs.existsSync(Path.join(dir, "bwrap")))

const setup = (options: { sandbox?: Partial<SandboxConfig>; bwrap?: "auto" | "off" } = {}) => {
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-bash-"))
  homes.push(home)
  const base = defaults()
  const app = AppConfigService.of({
    config: { ...base, sandbox: { ...base.sandbox, ...options.sandbox } },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap: options.bwrap ?? "auto" })
  const bash = (command: string) =>
    SandboxTools.tools({ vision: false }).pipe(
      Effect.flatMap((tools) =>
        Toolkit.make(tools).call({ id: "call-1", name: "bash", args: { description: "test", command } })
      ),
      Effect.map((result) => ({ text: String(result.message.content), status: result.message.status })),
      Effect.provideService(SandboxProvider, provider),
      Effect.provideService(AppConfigService, app),
      Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
    )
  return { home, paths: threadPaths(home, "u1", "t1"), bash }
}

/** Host processes whose command line contains `needle` (sandboxed processes are visible from the host). */
const processesMatching = (needle: string): Array<number> => {
  const found: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ")
      if (cmdline.includes(needle)) found.push(Number(entry))
    } catch {
      // exited meanwhile
    }
  }
  return found
}

/** Waits (polling, bounded) until `check` holds; fails with `what` if it never does. */
const eventually = (what: string, check: () => boolean, limitMs = 10_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + limitMs
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`never happened: ${what}`))
      yield* Effect.sleep("50 millis")
    }
  })

/** No `sleep N`..`sleep N+9` process is left (the tests use N, N+1, ... as markers). */
const sleepsGone = (seconds: number) => processesMatching(`sleep ${String(seconds).slice(0, -1)}`).length === 0

const unique = () => `${process.pid}-${Math.floor(Math.random() * 1e9)}`

// ---------------------------------------------------------------------------------------------------------

describe("middle truncation", () => {
  it("keeps short output and unlimited output unchanged", () => {
    assert.strictEqual(Bash.middleTruncate("abc", 10), "abc")
    assert.strictEqual(Bash.middleTruncate("x".repeat(50_000), 0), "x".repeat(50_000))
  })

  it("keeps the head and the tail with the marker between, never over the cap", () => {
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i}`).join("\n")
    const out = Bash.middleTruncate(text, 1000)
    assert.isAtMost(out.length, 1000)
    const match = /\n\.\.\. \[middle truncated: (\d+) chars skipped\] \.\.\.\n/.exec(out)
    assert.isNotNull(match)
    const [head, tail] = out.split(match![0])
    assert.isTrue(text.startsWith(head!) && head!.startsWith("line 0\nline 1"))
    assert.isTrue(text.endsWith(tail!) && tail!.endsWith("line 4999"))
    assert.strictEqual(head!.length + tail!.length + Number(match![1]), text.length)
  })

  it.prop(
    "never exceeds the cap, and head + skipped + tail always add up to the input",
    [FastCheck.string({ maxLength: 3000 }), FastCheck.integer({ min: 1, max: 2000 })],
    ([text, max]) => {
      const out = Bash.middleTruncate(text, max)
      if (text.length <= max) return out === text
      if (out.length > max) return false
      const match = /\n\.\.\. \[middle truncated: (\d+) chars skipped\] \.\.\.\n/.exec(out)
      if (match === null) return out === text.slice(0, max) // cap smaller than the marker itself
      const head = out.slice(0, match.index)
      const tail = out.slice(match.index + match[0].length)
      return text.startsWith(head) && text.endsWith(tail) &&
        head.length + tail.length + Number(match[1]) === text.length
    }
  )

  it.prop(
    "the streaming collector gives the same result however the output is chunked",
    [
      FastCheck.array(FastCheck.string({ maxLength: 400 }), { maxLength: 30 }),
      FastCheck.integer({ min: 1, max: 1500 })
    ],
    ([chunks, max]) => {
      const collector = new Bash.OutputCollector(max)
      for (const chunk of chunks) collector.push(chunk)
      return collector.render(max) === Bash.middleTruncate(chunks.join(""), max)
    }
  )
})

describe("host-bash guard (validateHostCommand)", () => {
  const roots = ["/mnt/user-data/workspace", "/mnt/user-data/uploads", "/mnt/user-data/outputs", "/mnt/skills"]
  const allowed = [
    "ls -la",
    "cat /mnt/user-data/workspace/a.txt > /mnt/user-data/outputs/b.txt",
    "python3 /mnt/skills/x/run.py 2>/dev/null",
    "/usr/bin/env python3 -c 'print(1)'",
    "curl -s https://example.com/a/b",
    "echo a/b c=d"
  ]
  const refused = [
    "cat /etc/passwd",
    "ls /",
    "cd .. && ls",
    "cat ../secret",
    "cp x /tmp/y",
    "cat file:///etc/passwd",
    "echo >/root/.ssh/authorized_keys",
    "ls /mnt/user-data/workspace2",
    "cat /mnt/user-data/workspace/../../x",
    "X=/home/user/.aws/credentials; cat $X"
  ]
  for (const command of allowed) {
    it(`allows: ${command}`, () => assert.isUndefined(Bash.validateHostCommand(command, roots)))
  }
  for (const command of refused) {
    it(`refuses: ${command}`, () => assert.isString(Bash.validateHostCommand(command, roots)))
  }

  it("rewrites virtual roots to host directories only at the start of a path", () => {
    const command = "cat /mnt/user-data/workspace/a > /mnt/user-data/outputs/b; echo x/mnt/skills"
    const out = Bash.rewriteHostCommand(command, [
      ["/mnt/user-data/workspace", "/h/ws"],
      ["/mnt/user-data/outputs", "/h/out dir"],
      ["/mnt/skills", "/h/skills"]
    ])
    assert.strictEqual(out, "cat /h/ws/a > '/h/out dir'/b; echo x/mnt/skills")
  })
})

describe.skipIf(!bwrapInstalled)("bash under bubblewrap (real processes)", () => {
  it.live("returns output (stdout and stderr) and the exit code", () =>
    Effect.gen(function*() {
      const { bash } = setup()
      const result = yield* bash("echo to-stdout; echo to-stderr >&2; exit 7")
      assert.include(result.text, "to-stdout")
      assert.include(result.text, "to-stderr")
      assert.isTrue(result.text.endsWith("[exit code: 7]"))
      const ok = yield* bash("true")
      assert.strictEqual(ok.text, "(no output)")
      assert.strictEqual(ok.status, "success")
    }))

  it.live("runs in the workspace, sees only virtual paths, and shares the thread's directories with the host", () =>
    Effect.gen(function*() {
      const { bash, paths, home } = setup()
      const result = yield* bash(
        "pwd; echo made > /mnt/user-data/outputs/report.txt; echo w > notes.txt; " +
          "echo u > /mnt/user-data/uploads/u.txt; cat /proc/self/mountinfo"
      )
      assert.isTrue(result.text.startsWith("/mnt/user-data/workspace\n"))
      assert.notInclude(result.text, home)
      assert.strictEqual(Fs.readFileSync(Path.join(paths.outputs, "report.txt"), "utf8"), "made\n")
      assert.strictEqual(Fs.readFileSync(Path.join(paths.workspace, "notes.txt"), "utf8"), "w\n")
      assert.strictEqual(Fs.readFileSync(Path.join(paths.uploads, "u.txt"), "utf8"), "u\n")
    }))

  it.live("has no network: a TCP server on the host's loopback cannot be reached", () =>
    Effect.gen(function*() {
      let connections = 0
      const server = Net.createServer((socket) => {
        connections++
        socket.end("hello\n")
      })
      yield* Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      })
      const port = (server.address() as Net.AddressInfo).port
      const probe = `(exec 3<>/dev/tcp/127.0.0.1/${port} && echo CONNECTED) 2>&1 || echo REFUSED`
      try {
        const sandboxed = yield* setup().bash(probe)
        assert.include(sandboxed.text, "REFUSED")
        assert.notInclude(sandboxed.text, "CONNECTED")
        assert.strictEqual(connections, 0)
        // The same probe on the host does connect, so the probe itself works.
        const host = yield* setup({ bwrap: "off", sandbox: { allow_host_bash: true } }).bash(probe)
        assert.include(host.text, "CONNECTED")
      } finally {
        server.close()
      }
    }))

  it.live("cannot write outside the thread's directories (/etc, /usr, /mnt, the host checkout)", () =>
    Effect.gen(function*() {
      const { bash } = setup()
      const tag = unique()
      const checkout = process.cwd()
      const targets = [`/etc/`, `/usr/`, `/usr/local/`, `${checkout}/`].map((dir) => `${dir}antler-${tag}`)
      try {
        // Remounting read-write first: it would succeed with capabilities left (ECOSYSTEM §6).
        const result = yield* bash(
          "mount -o remount,rw,bind /usr 2>&1; mount -o remount,rw,bind /etc 2>&1; " +
            [...targets, `/mnt/user-data/antler-${tag}`, `/mnt/skills-${tag}`]
              .map((t) => `touch ${t} 2>&1`)
              .join("; ") +
            `; ls ${checkout} 2>&1`
        )
        for (const target of targets) assert.isFalse(Fs.existsSync(target), target)
        assert.include(result.text, "Read-only file system")
        assert.include(result.text, "No such file or directory") // the checkout is not even visible
      } finally {
        for (const target of targets) Fs.rmSync(target, { force: true })
      }
    }))

  it.live("runs with no capabilities (CapEff is 0), hides secrets, and clears the environment", () =>
    Effect.gen(function*() {
      process.env.ANTLER_TEST_SECRET = "s3cr3t-value"
      const result = yield* setup().bash("grep CapEff /proc/self/status; cat /etc/shadow 2>&1 | head -c 200; env")
      assert.match(result.text, /CapEff:\s+0000000000000000/)
      assert.notMatch(result.text, /root:[^\n]*:\d+:/) // no shadow entries
      assert.notInclude(result.text, "s3cr3t-value")
      assert.include(result.text, "HOME=/mnt/user-data/workspace")
    }))

  it.live("has a private /tmp", () =>
    Effect.gen(function*() {
      const tag = unique()
      const hostMarker = Path.join("/tmp", `antler-host-${tag}`)
      Fs.writeFileSync(hostMarker, "host")
      try {
        const inner = `/tmp/antler-inner-${tag}`
        const result = yield* setup().bash(`ls /tmp; echo inner > ${inner}; cat ${inner}`)
        assert.notInclude(result.text, `antler-host-${tag}`)
        assert.include(result.text, "inner")
        assert.isFalse(Fs.existsSync(`/tmp/antler-inner-${tag}`))
      } finally {
        Fs.rmSync(hostMarker, { force: true })
      }
    }))

  it.live("kills a command that runs past the timeout, with its setsid/nohup background children", () =>
    Effect.gen(function*() {
      const { bash } = setup({ sandbox: { bash_command_timeout: 1 } })
      const seconds = 3000 + Math.floor(Math.random() * 900)
      const result = yield* bash(
        `setsid sleep ${seconds} & nohup sleep ${seconds + 1} >/dev/null 2>&1 & (sleep ${seconds + 2} &) ; ` +
          `echo started; sleep ${seconds + 3}`
      )
      assert.isTrue(result.text.startsWith("Error: The command did not finish within 1 s"))
      assert.include(result.text, "started")
      assert.strictEqual(result.status, "error")
      yield* eventually("every sleep is gone", () => sleepsGone(seconds))
    }))

  it.live("interrupting the call kills the command", () =>
    Effect.gen(function*() {
      const { bash, paths } = setup()
      const seconds = 4000 + Math.floor(Math.random() * 900)
      const fiber = yield* Effect.fork(bash(`touch started; setsid sleep ${seconds} & sleep ${seconds + 1}`))
      yield* eventually("the command started", () => Fs.existsSync(Path.join(paths.workspace, "started")))
      yield* eventually("the sleeps run", () => processesMatching(`sleep ${seconds}`).length > 0)
      yield* Fiber.interrupt(fiber)
      yield* eventually("every sleep is gone", () => sleepsGone(seconds))
    }))

  it.live("middle-truncates output over sandbox.bash_output_max_chars", () =>
    Effect.gen(function*() {
      const { bash } = setup({ sandbox: { bash_output_max_chars: 1000 } })
      const result = yield* bash("seq 1 100000")
      const full = Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join("")
      assert.isAtMost(result.text.length, 1000)
      const match = /\n\.\.\. \[middle truncated: (\d+) chars skipped\] \.\.\.\n/.exec(result.text)
      assert.isNotNull(match)
      assert.isTrue(result.text.startsWith("1\n2\n3\n"))
      assert.isTrue(result.text.endsWith("99999\n100000\n"))
      assert.strictEqual(result.text.length - match![0].length + Number(match![1]), full.length)
    }))

  it.live("0 means unlimited output", () =>
    Effect.gen(function*() {
      const result = yield* setup({ sandbox: { bash_output_max_chars: 0 } }).bash("seq 1 20000")
      assert.strictEqual(result.text, Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join(""))
    }))
})

describe("bash without bubblewrap", () => {
  it.live("is refused with a message saying how to enable it", () =>
    Effect.gen(function*() {
      const { bash, paths } = setup({ bwrap: "off" })
      const result = yield* bash("echo hi > /mnt/user-data/workspace/should-not-exist")
      assert.isTrue(result.text.startsWith("Error: bash is unavailable"))
      assert.include(result.text, "install bubblewrap")
      assert.include(result.text, "sandbox.allow_host_bash: true")
      assert.strictEqual(result.status, "error")
      assert.isFalse(Fs.existsSync(Path.join(paths.workspace, "should-not-exist")))
    }))

  it.live("with allow_host_bash, runs on the host in the workspace with virtual paths rewritten and masked", () =>
    Effect.gen(function*() {
      const { bash, paths, home } = setup({ bwrap: "off", sandbox: { allow_host_bash: true } })
      process.env.ANTLER_TEST_SECRET = "s3cr3t-value"
      const result = yield* bash("pwd; echo out > /mnt/user-data/outputs/h.txt; cat /mnt/user-data/outputs/h.txt; env")
      assert.isTrue(result.text.startsWith("/mnt/user-data/workspace\n"))
      assert.notInclude(result.text, home)
      assert.notInclude(result.text, "s3cr3t-value")
      assert.strictEqual(Fs.readFileSync(Path.join(paths.outputs, "h.txt"), "utf8"), "out\n")
    }))

  it.live("with allow_host_bash, refuses paths outside the virtual roots", () =>
    Effect.gen(function*() {
      const { bash } = setup({ bwrap: "off", sandbox: { allow_host_bash: true } })
      for (const command of ["cat /etc/passwd", "cd .. && ls", "curl file:///etc/passwd"]) {
        const result = yield* bash(command)
        assert.isTrue(result.text.startsWith("Error: Command refused:"), `${command}: ${result.text}`)
      }
    }))

  it.live("with allow_host_bash, the timeout still kills the command's process group", () =>
    Effect.gen(function*() {
      const { bash } = setup({ bwrap: "off", sandbox: { allow_host_bash: true, bash_command_timeout: 1 } })
      const seconds = 5000 + Math.floor(Math.random() * 900)
      const result = yield* bash(`sleep ${seconds} & sleep ${seconds + 1}`)
      assert.isTrue(result.text.startsWith("Error: The command did not finish within 1 s"))
      yield* eventually("the sleeps are gone", () => sleepsGone(seconds))
    }))
})
