import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Bash from "../../../src/layers/sandbox/Bash.js"
import * as Cgroup from "../../../src/layers/sandbox/Cgroup.js"
import * as DiskQuota from "../../../src/layers/sandbox/DiskQuota.js"
import * as BashTool from "../../../src/layers/sandbox/tools/BashTool.js"
import * as LocalSandbox from "../../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../../src/layers/SandboxTools.js"
import * as Toolkit from "../../../src/layers/Toolkit.js"
import type { SandboxConfig } from "../../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths, WORKSPACE } from "../../../src/services/Sandbox.js"
import type { JsonObject } from "../../../src/state/Message.js"
import * as Bwrap from "../../support/bwrap.js"
import { inRun } from "../../support/fixtures.js"

// ---------------------------------------------------------------------------------------------------------
// A thread sandbox with the real tools, over a temp data directory.

const homes: Array<string> = []
afterAll(() => {
  for (const home of homes) Fs.rmSync(home, { recursive: true, force: true })
})

// Skipped only where bubblewrap is not installed at all; installed but broken fails the tests (and with
// ANTLER_REQUIRE_BWRAP=1, as in CI, not installed fails them too: test/support/bwrap.ts).
const bwrapInstalled = await Bwrap.installed()

const setup = (
  options: { sandbox?: Partial<SandboxConfig>; bwrap?: "auto" | "off"; cgroup?: "auto" | "off" } = {}
) => {
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-bash-"))
  homes.push(home)
  const base = defaults()
  const app = AppConfigService.of({
    config: { ...base, sandbox: { ...base.sandbox, ...options.sandbox } },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap: options.bwrap ?? "auto", cgroup: options.cgroup ?? "auto" })
  // Warnings the sandbox logs, as an operator would see them.
  const logs: Array<string> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => logs.push(Array.isArray(message) ? message.join(" ") : String(message)))
  )
  const call = (name: string, args: JsonObject) =>
    SandboxTools.tools({ vision: false }).pipe(
      Effect.flatMap((tools) => Toolkit.make(tools).call({ id: "call-1", name, args })),
      Effect.map((result) => ({ text: String(result.message.content), status: result.message.status })),
      Effect.provideService(SandboxProvider, provider),
      Effect.provideService(AppConfigService, app),
      Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
      Effect.provide(logger)
    )
  const bash = (command: string) => call("bash", { description: "test", command })
  return { home, paths: threadPaths(home, "u1", "t1"), bash, call, logs }
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

describe("middle truncation counts characters as DeerFlow does (code points)", () => {
  const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
  const points = (text: string) => Array.from(text).length

  it("an output of emoji within the cap is kept whole, also when the runner collects it", () => {
    const text = "😀".repeat(15_000) // 30,000 code units, 15,000 characters
    assert.strictEqual(Bash.middleTruncate(text, 20_000), text)
    const collector = new Bash.OutputCollector(20_000)
    for (let i = 0; i < 15; i++) collector.push("😀".repeat(1000))
    assert.strictEqual(collector.render(20_000), text)
  })

  it.prop(
    "never over the cap in characters, never half an emoji, head + skipped + tail add up to the input",
    [FastCheck.string({ unit: "binary", maxLength: 3000 }), FastCheck.integer({ min: 1, max: 2000 })],
    ([text, max]) => {
      const out = Bash.middleTruncate(text, max)
      if (points(text) <= max) return out === text
      if (points(out) > max || LONE.test(out)) return false
      const match = /\n\.\.\. \[middle truncated: (\d+) chars skipped\] \.\.\.\n/.exec(out)
      if (match === null) return out === Array.from(text).slice(0, max).join("")
      const head = out.slice(0, match.index)
      const tail = out.slice(match.index + match[0].length)
      return text.startsWith(head) && text.endsWith(tail) &&
        points(head) + points(tail) + Number(match[1]) === points(text)
    }
  )

  it.prop(
    "the streaming collector gives the same result however output of any characters is chunked",
    [
      FastCheck.array(FastCheck.string({ unit: "binary", maxLength: 400 }), { maxLength: 30 }),
      FastCheck.integer({ min: 1, max: 1500 })
    ],
    ([chunks, max]) => {
      const collector = new Bash.OutputCollector(max)
      for (const chunk of chunks) collector.push(chunk)
      return collector.render(max) === Bash.middleTruncate(chunks.join(""), max)
    }
  )
})

describe("the timeout notice", () => {
  it("says how long, as DeerFlow's does (test_local_sandbox_command_timeout): 1 second, 1.5, 0.25 seconds", () => {
    assert.strictEqual(BashTool.timeoutDuration(1000), "1 second")
    assert.strictEqual(BashTool.timeoutDuration(1500), "1.5 seconds")
    assert.strictEqual(BashTool.timeoutDuration(600_000), "600 seconds")
    assert.strictEqual(BashTool.timeoutDuration(250), "0.25 seconds")
  })
})

describe("host-bash guard (validateHostCommand)", () => {
  const roots = ["/mnt/user-data/workspace", "/mnt/user-data/uploads", "/mnt/user-data/outputs", "/mnt/skills"]
  const allowed = [
    "ls -la",
    "cat /mnt/user-data/workspace/a.txt > /mnt/user-data/outputs/b.txt",
    "python3 /mnt/skills/x/run.py 2>/dev/null",
    "/usr/bin/env python3 -c 'print(1)'",
    "curl -s https://example.com/a/b",
    "echo a/b c=d",
    // DeerFlow's test_sandbox_tools_security: a URL's `..`, `cd` as an argument, text that only looks like a path
    "curl https://example.com/packages/../archive.tar.gz -o /mnt/user-data/workspace/archive.tar.gz",
    "echo cd $HOME",
    "cd /mnt/user-data/workspace && cat data/input.csv > reports/out.txt",
    "cd sub && ls",
    "python3 -c \"print(10 / 2)\"",
    "echo $((6 / 3))",
    "python3 -c \"print(f'/端口{port}')\"",
    "echo '健康检查 /端口 状态'",
    "python3 -c \"print('/devices/{id}/port')\""
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
    "X=/home/user/.aws/credentials; cat $X",
    // DeerFlow's test_sandbox_tools_security: working-directory escapes, / as an argument, brace expansion
    "cd $HOME && cat .ssh/id_rsa",
    "echo ok\ncd $HOME && cat .ssh/id_rsa",
    "builtin cd $HOME && cat .ssh/id_rsa",
    "if cd $HOME; then cat .ssh/id_rsa; fi",
    "{ cd /; cat etc/passwd; }",
    "echo \"$(cd $HOME && cat .ssh/id_rsa)\"",
    "cd ~ && ls",
    "cd && ls",
    "cd - && ls",
    "pushd \"$HOME\"",
    "cd /usr/bin && ls",
    "cat ~/.ssh/id_rsa",
    "ln -s / root && cat root/etc/passwd",
    "command ls /",
    "cat /etc/{passwd,shadow}",
    "cat /home/${USER}/.ssh/id_rsa",
    "python3 -c \"open('/etc/passwd').read()\"",
    // a real path with a non-ASCII name further down is still a path (DeerFlow lets it through)
    "cat /home/用户/.ssh/id_rsa",
    "ls /root/文档"
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
      assert.isTrue(result.text.endsWith("\nExit Code: 7"))
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
        socket.on("error", () => undefined) // the probe closes without reading
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
      // DeerFlow's notice after the output so far, not an error (as there)
      assert.isTrue(result.text.startsWith("started\nCommand timed out after 1 second and was terminated"))
      assert.strictEqual(result.status, "success")
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

// ---------------------------------------------------------------------------------------------------------
// Hardening: each test runs the attack through the real bash tool and shows it now fails safely.

/** Each line of a text reversed (undoes `| rev` inside the sandbox, which defeats output masking). */
const unrev = (text: string) => text.split("\n").map((line) => [...line].reverse().join("")).join("\n")

/** The account names in the host's /etc/passwd. */
const hostAccounts = () =>
  Fs.readFileSync("/etc/passwd", "utf8").split("\n").map((line) => line.split(":")[0]!).filter((name) => name !== "")

const isRoot = typeof process.getuid === "function" && process.getuid() === 0

describe.skipIf(!bwrapInstalled)("sandbox hardening (real bash tool)", () => {
  it.live("kernel settings cannot be written: /proc/sys is read-only, core_pattern cannot be opened for writing", () =>
    Effect.gen(function*() {
      const statInterval = Fs.readFileSync("/proc/sys/vm/stat_interval", "utf8")
      const corePattern = Fs.readFileSync("/proc/sys/kernel/core_pattern", "utf8")
      const result = yield* setup().bash(
        `v=$(cat /proc/sys/vm/stat_interval); echo "$v" > /proc/sys/vm/stat_interval && echo SYSCTL-WRITTEN; ` +
          "exec 3>>/proc/sys/kernel/core_pattern && echo CORE-PATTERN-OPEN; " +
          `python3 -c "open('/proc/sys/kernel/core_pattern', 'w')" 2>&1 | tail -1; ` +
          "echo 0 > /proc/sys/kernel/randomize_va_space && echo ASLR-OFF; " +
          "grep -w /proc/sys /proc/self/mountinfo"
      )
      assert.notInclude(result.text, "SYSCTL-WRITTEN")
      assert.notInclude(result.text, "CORE-PATTERN-OPEN")
      assert.notInclude(result.text, "ASLR-OFF")
      assert.include(result.text, "/proc/sys/vm/stat_interval: Read-only file system")
      assert.include(result.text, "/proc/sys/kernel/core_pattern: Read-only file system")
      assert.include(result.text, "OSError: [Errno 30] Read-only file system: '/proc/sys/kernel/core_pattern'")
      assert.match(result.text, / \/proc\/sys ro,/)
      assert.strictEqual(Fs.readFileSync("/proc/sys/vm/stat_interval", "utf8"), statInterval)
      assert.strictEqual(Fs.readFileSync("/proc/sys/kernel/core_pattern", "utf8"), corePattern)
    }))

  it.live("commands run as the unprivileged sandbox user: no capabilities, no user namespaces, no mounts", () =>
    Effect.gen(function*() {
      const result = yield* setup().bash(
        "id -u; id -un; grep -E '^(CapPrm|CapEff|NoNewPrivs)' /proc/self/status; " +
          "unshare --user --map-root-user true 2>/dev/null || echo NO-USERNS; " +
          "mount -t tmpfs none /tmp 2>/dev/null || echo NO-MOUNT; " +
          "touch /root-file 2>&1; touch /dev/dev-file 2>&1"
      )
      const lines = result.text.split("\n")
      assert.deepStrictEqual(lines.slice(0, 2), ["65534", "sandbox"])
      assert.match(result.text, /CapPrm:\s+0000000000000000/)
      assert.match(result.text, /CapEff:\s+0000000000000000/)
      assert.match(result.text, /NoNewPrivs:\s+1/)
      assert.include(result.text, "NO-USERNS")
      assert.include(result.text, "NO-MOUNT")
      assert.include(result.text, "touch: cannot touch '/root-file': Read-only file system")
      assert.include(result.text, "touch: cannot touch '/dev/dev-file': Read-only file system")
    }))

  it.live("mountinfo, mounts and process command lines hold no host path, even read backwards (| rev)", () =>
    Effect.gen(function*() {
      const { bash, home, paths } = setup()
      const result = yield* bash(
        "cat /proc/self/mountinfo | rev; echo; cat /proc/self/mounts | rev; echo; " +
          "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | rev; " +
          "ls -l /proc/self/fd/ /proc/self/cwd | rev; findmnt -n -o SOURCE,TARGET,FSROOT,OPTIONS | rev"
      )
      const text = unrev(result.text)
      // The thread's directories are there (the reads worked), and named only by sandbox paths.
      assert.match(
        text,
        / \/mnt\/user-data\/workspace rw,.* - overlay overlay .*upperdir=\/\.stage\/thread\/user-data\/workspace/
      )
      assert.include(text, " /mnt/user-data/outputs ")
      for (const host of [home, Fs.realpathSync(home), paths.root, Path.basename(home), "antler-bash-"]) {
        assert.notInclude(text, host)
      }
    }))

  it.live("/etc is the sandbox's own: no host accounts, not the host's name", () =>
    Effect.gen(function*() {
      const result = yield* setup().bash(
        "cat /etc/passwd; echo ===; cat /etc/group; echo ===; cat /etc/hostname; hostname; echo ===; " +
          "getent passwd root || echo NO-ROOT; whoami; " +
          "ls /etc/shadow /etc/ssh /etc/npmrc /etc/machine-id 2>&1 | wc -l; " +
          "ls /etc/ | tr '\\n' ' '"
      )
      const [passwd, group, names, rest] = result.text.split("===\n")
      assert.strictEqual(passwd, "sandbox:x:65534:65534:sandbox:/mnt/user-data/workspace:/bin/bash\n")
      assert.strictEqual(group, "sandbox:x:65534:\n")
      assert.strictEqual(names, "sandbox\nsandbox\n")
      for (const account of hostAccounts().filter((name) => name !== "sandbox")) {
        assert.notMatch(result.text, new RegExp(`^${account}:`, "m"), account)
      }
      const hostName = Os.hostname()
      if (hostName !== "sandbox") assert.notInclude(result.text, hostName)
      assert.isTrue(rest!.startsWith("NO-ROOT\nsandbox\n4\n"), rest)
      assert.include(rest!, "alternatives ") // what programs need is there
      assert.include(rest!, "ld.so.cache ")
    }))

  it.live("normal programs still work: coreutils, pipes, /dev/fd, python3, node, git, ps, $HOME, /tmp", () =>
    Effect.gen(function*() {
      const { bash, paths } = setup()
      const result = yield* bash(
        "set -e; echo piped | tr a-z A-Z; cat <(echo procsub); diff <(echo same) <(echo same) && echo no-diff; " +
          `python3 -c 'import os, getpass; print("python", os.getcwd(), getpass.getuser(), os.environ["HOME"])'; ` +
          `node -e 'console.log("node", require("os").userInfo().username, process.cwd())'; ` +
          "git init -q repo && cd repo && echo x > f && git add f && " +
          "git -c user.name=t -c user.email=t@example.com commit -qm first && git log --format=%s && cd ..; " +
          "ps -e -o user=,comm= | grep -c sandbox; awk 'BEGIN { print \"awk\" }'; " +
          "echo tmp > /tmp/t && cat /tmp/t; echo shm > /dev/shm/s && cat /dev/shm/s; " +
          "getent hosts 127.0.0.1; echo home=$HOME; touch made-here"
      )
      assert.strictEqual(result.status, "success", result.text)
      const lines = result.text.trim().split("\n")
      assert.deepStrictEqual(lines.slice(0, 3), ["PIPED", "procsub", "no-diff"])
      assert.include(lines, "python /mnt/user-data/workspace sandbox /mnt/user-data/workspace")
      assert.include(lines, "node sandbox /mnt/user-data/workspace")
      assert.include(lines, "first")
      assert.include(lines, "awk")
      assert.include(lines, "tmp")
      assert.include(lines, "shm")
      assert.match(result.text, /^127\.0\.0\.1\s+localhost$/m)
      assert.include(lines, "home=/mnt/user-data/workspace")
      assert.isTrue(Fs.existsSync(Path.join(paths.workspace, "made-here")))
      assert.isTrue(Fs.existsSync(Path.join(paths.workspace, "repo/.git/HEAD")))
    }))
})

describe.skipIf(!bwrapInstalled)("the direct sandbox (bubblewrap alone, where the staged setup cannot run)", () => {
  it.live("is hardened the same way; only mountinfo shows the bound directory's host path", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-direct-"))
      homes.push(dir)
      const invocation = Bash.bwrapInvocation({
        mode: "direct",
        layout: Bash.hostRootLayout(),
        mounts: [{ host: dir, target: WORKSPACE, writable: true }],
        cwd: WORKSPACE,
        env: { PATH: Bash.SANDBOX_PATH, HOME: WORKSPACE },
        command: "id -un; echo made > file; echo 1 > /proc/sys/vm/stat_interval; " +
          "unshare --user true 2>/dev/null || echo NO-USERNS; cat /etc/passwd; " +
          "grep ' /mnt/user-data/workspace ' /proc/self/mountinfo; head -c 2M /dev/zero > /tmp/x",
        limits: { ...Bash.NO_LIMITS, tmpBytes: 1024 * 1024 }
      })
      const outcome = yield* Bash.run({
        file: "bwrap",
        args: invocation.argv,
        inputs: [invocation.options.join("\0"), ...invocation.files],
        env: { PATH: Bash.SANDBOX_PATH },
        timeoutMs: 20_000,
        maxOutputChars: 0
      })
      assert.isUndefined(invocation.statusFd)
      assert.isTrue(outcome.output.startsWith("sandbox\n"), outcome.output)
      assert.include(outcome.output, "/proc/sys/vm/stat_interval: Read-only file system")
      assert.include(outcome.output, "NO-USERNS")
      assert.include(outcome.output, "\nsandbox:x:65534:65534:sandbox:/mnt/user-data/workspace:/bin/bash\n")
      assert.include(outcome.output, "No space left on device")
      // What the staged sandbox avoids: a bind mount shows its host directory.
      assert.include(outcome.output, `${Path.basename(dir)} /mnt/user-data/workspace rw,`)
      assert.strictEqual(Fs.readFileSync(Path.join(dir, "file"), "utf8"), "made\n")
    }))
})

describe.skipIf(!bwrapInstalled)("hidden directories (a disabled skill's folder)", () => {
  it.live("show empty and read-only in the direct sandbox as in the staged one; their siblings as they are", () =>
    Effect.gen(function*() {
      const skills = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-hidden-"))
      homes.push(skills)
      for (const name of ["alpha", "beta"]) {
        Fs.mkdirSync(Path.join(skills, name))
        Fs.writeFileSync(Path.join(skills, name, "SKILL.md"), `SECRET-${name}\n`)
      }
      const stage = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-hidden-stage-"))
      homes.push(stage)
      Fs.mkdirSync(Path.join(stage, "ws"))
      Fs.mkdirSync(Path.join(stage, "work/0"), { recursive: true })
      for (const mode of ["direct", "staged"] as const) {
        const invocation = Bash.bwrapInvocation({
          mode,
          layout: Bash.hostRootLayout(),
          mounts: [
            mode === "direct"
              ? { host: Path.join(stage, "ws"), target: WORKSPACE, writable: true }
              : { host: Path.join(stage, "ws"), target: WORKSPACE, writable: true, work: Path.join(stage, "work/0") },
            { host: skills, target: "/mnt/skills", writable: false }
          ],
          hidden: ["/mnt/skills/beta"],
          stage,
          cwd: WORKSPACE,
          env: { PATH: Bash.SANDBOX_PATH, HOME: WORKSPACE },
          command: "cat /mnt/skills/*/SKILL.md; ls -A /mnt/skills/beta | wc -l; touch /mnt/skills/beta/x",
          limits: Bash.NO_LIMITS
        })
        const outcome = yield* Bash.run({
          file: "bwrap",
          args: invocation.argv,
          inputs: [invocation.options.join("\0"), ...invocation.files],
          statusFd: invocation.statusFd,
          env: { PATH: Bash.SANDBOX_PATH },
          timeoutMs: 20_000,
          maxOutputChars: 0
        })
        assert.include(outcome.output, "SECRET-alpha", mode)
        assert.notInclude(outcome.output, "SECRET-beta", mode)
        assert.match(outcome.output, /^0$/m, mode)
        assert.include(outcome.output, "Read-only file system", mode)
        assert.isFalse(Fs.existsSync(Path.join(skills, "beta", "x")), mode)
      }
    }))
})

describe.skipIf(!bwrapInstalled || !isRoot)("the sandbox built by an unprivileged user", () => {
  it.live("a staged sandbox works as uid 65534 on the host (no cgroups, no root)", () =>
    Effect.gen(function*() {
      const stage = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-nonroot-"))
      homes.push(stage)
      Fs.mkdirSync(Path.join(stage, "user-data/workspace"), { recursive: true })
      Fs.mkdirSync(Path.join(stage, "work/0"), { recursive: true })
      for (const dir of ["", "/user-data", "/user-data/workspace", "/work", "/work/0"]) {
        Fs.chownSync(`${stage}${dir}`, 65534, 65534)
      }
      Fs.chmodSync(stage, 0o755)
      const invocation = Bash.bwrapInvocation({
        mode: "staged",
        layout: Bash.hostRootLayout(),
        mounts: [{
          host: `${stage}/user-data/workspace`,
          target: WORKSPACE,
          writable: true,
          work: `${stage}/work/0`
        }],
        stage,
        cwd: WORKSPACE,
        env: { PATH: Bash.SANDBOX_PATH, HOME: WORKSPACE },
        command: "id -un; echo made > file; grep -c overlay /proc/self/mountinfo; cat /proc/self/mountinfo | rev",
        limits: { ...Bash.NO_LIMITS, memoryBytes: 2 * 1024 ** 3, processes: 100 }
      })
      const outcome = yield* Bash.run({
        file: "setpriv",
        args: ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "bwrap", ...invocation.argv],
        inputs: [invocation.options.join("\0"), ...invocation.files],
        statusFd: invocation.statusFd,
        env: { PATH: Bash.SANDBOX_PATH },
        timeoutMs: 20_000,
        maxOutputChars: 0
      })
      assert.strictEqual(outcome.exitCode, 0, outcome.output)
      assert.strictEqual(outcome.status, "") // no fallback to bind mounts, no failure
      assert.isTrue(outcome.output.startsWith("sandbox\n1\n"), outcome.output)
      assert.notInclude(unrev(outcome.output), stage)
      const made = Path.join(stage, "user-data/workspace/file")
      assert.strictEqual(Fs.readFileSync(made, "utf8"), "made\n")
      assert.strictEqual(Fs.statSync(made).uid, 65534)
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Resource limits: each test runs the runaway command through the real bash tool.

/** This process's command groups in a cgroup directory (none once every command is cleaned up). */
const ownGroups = (dir: string) => Fs.readdirSync(dir).filter((name) => name.startsWith(`antler-${process.pid}-`))

describe.skipIf(!bwrapInstalled)("resource limits (real bash tool)", () => {
  it.live("a fork bomb is capped and stopped with a readable message; host processes stay bounded", () =>
    Effect.gen(function*() {
      const groups = yield* Cgroup.detect()
      if (isRoot) assert.isTrue(groups.available, groups.available ? "" : groups.reason)
      if (!groups.available) return // bounded by RLIMIT_NPROC instead (see the degradation test)
      const tag = `bomb-${unique()}`
      const { bash } = setup({ sandbox: { max_processes: 40, bash_command_timeout: 60 } })
      let peak = 0
      const sampler = yield* Effect.fork(Effect.forever(Effect.zipRight(
        Effect.sync(() => {
          peak = Math.max(peak, processesMatching(tag).length)
        }),
        Effect.sleep("5 millis")
      )))
      const result = yield* bash(`: ${tag}; bomb() { bomb | bomb & }; bomb; sleep 50; echo survived`)
      yield* Fiber.interrupt(sampler)
      assert.isTrue(
        result.text.startsWith(
          "Error: The command was stopped, together with every process it started: it tried to run more than 40 " +
            "processes and threads at once, the sandbox's limit (sandbox.max_processes)."
        ),
        result.text.slice(0, 300)
      )
      assert.notInclude(result.text, "survived")
      // (that the bomb ran up to the limit is what the message says, from the cgroup's own count: the sampler, every
      // 5 ms, may see only a few of its processes on a loaded machine before they are all stopped)
      assert.isAbove(peak, 0, "the bomb ran")
      assert.isAtMost(peak, 40, "never more processes than the limit")
      yield* eventually("the bomb is gone", () => processesMatching(tag).length === 0)
      yield* eventually("its cgroup is removed", () => ownGroups(groups.hierarchy.dir).length === 0)
    }))

  it.live("a process allocating past the memory limit fails (python3, node) with a note naming the limit", () =>
    Effect.gen(function*() {
      const python = yield* setup({ sandbox: { max_memory_mb: 256 } }).bash(
        `python3 -c "x = bytearray(400 * 1024 * 1024); print('allocated')"`
      )
      assert.include(python.text, "MemoryError")
      assert.notInclude(python.text, "allocated")
      assert.include(
        python.text,
        "Exit Code: 1\n[limit: Each process may use at most 256 MB of memory (sandbox.max_memory_mb)"
      )
      // node itself needs about 1 GB of address space to start.
      const node = yield* setup({ sandbox: { max_memory_mb: 1536 } }).bash(
        `node -e "const b = Buffer.alloc(2 * 1024 ** 3, 1); console.log('allocated', b.length)"`
      )
      assert.include(node.text, "RangeError: Array buffer allocation failed")
      assert.notInclude(node.text, "allocated 2")
      assert.include(node.text, "[limit: Each process may use at most 1536 MB of memory (sandbox.max_memory_mb)")
    }))

  it.live("/tmp and /dev/shm fill up at sandbox.tmp_size_mb, with a note naming the limit", () =>
    Effect.gen(function*() {
      const result = yield* setup({ sandbox: { tmp_size_mb: 8, max_file_size_mb: 64 } }).bash(
        "head -c 20M /dev/zero > /tmp/fill; stat -c 'tmp %s' /tmp/fill; " +
          "head -c 20M /dev/zero > /dev/shm/fill; stat -c 'shm %s' /dev/shm/fill"
      )
      assert.strictEqual(result.text.split("No space left on device").length, 3, result.text)
      for (const where of ["tmp", "shm"]) {
        const size = Number(new RegExp(`^${where} (\\d+)$`, "m").exec(result.text)?.[1])
        assert.isAtMost(size, 8 * 1024 * 1024, where)
        assert.isAbove(size, 4 * 1024 * 1024, where)
      }
      assert.include(result.text, "[limit: /tmp and /dev/shm hold at most 8 MB each (sandbox.tmp_size_mb).")
    }))

  it.live("a file stops growing at sandbox.max_file_size_mb", () =>
    Effect.gen(function*() {
      const { bash, paths } = setup({ sandbox: { max_file_size_mb: 4 } })
      const result = yield* bash("head -c 10M /dev/zero > big.bin; echo status=$?")
      assert.include(result.text, "File size limit exceeded")
      assert.include(result.text, "status=153")
      assert.include(result.text, "[limit: A file may be at most 4 MB (sandbox.max_file_size_mb).]")
      assert.strictEqual(Fs.statSync(Path.join(paths.workspace, "big.bin")).size, 4 * 1024 * 1024)
    }))

  it.live("filling the workspace stops the command at the disk quota; writes are refused until files are deleted", () =>
    Effect.gen(function*() {
      const { bash, call, paths } = setup({
        sandbox: { disk_quota_mb: 16, max_file_size_mb: 4, bash_command_timeout: 120 }
      })
      const result = yield* bash(
        "for i in $(seq 1 60); do head -c 2M /dev/zero > f$i.bin; sleep 0.05; done; echo finished"
      )
      assert.isTrue(
        result.text.startsWith(
          "Error: The command was stopped, together with every process it started: the thread's files grew to "
        ),
        result.text
      )
      assert.include(result.text, "MB, over the disk quota of 16 MB (sandbox.disk_quota_mb). Delete files")
      assert.notInclude(result.text, "finished")
      const used = yield* Effect.promise(() => DiskQuota.measure([paths.root]))
      assert.isAbove(used, 16 * 1024 * 1024)
      assert.isBelow(used, 40 * 1024 * 1024, "stopped near the quota (the loop would write 120 MB)")
      const refused = yield* call("write_file", { description: "x", path: `${WORKSPACE}/note.txt`, content: "note" })
      assert.isTrue(
        refused.text.startsWith(
          `Error: Writing ${WORKSPACE}/note.txt would take the thread's files to `
        ),
        refused.text
      )
      assert.include(refused.text, "over the disk quota of 16 MB (sandbox.disk_quota_mb)")
      assert.isFalse(Fs.existsSync(Path.join(paths.workspace, "note.txt")))
      // Over the quota, a command may still delete files; then writes work again.
      const cleaned = yield* bash("rm -f f*.bin && echo cleaned")
      assert.strictEqual(cleaned.text, "cleaned\n")
      const written = yield* call("write_file", { description: "x", path: `${WORKSPACE}/note.txt`, content: "note" })
      assert.strictEqual(written.text, "OK")
    }))

  it.live("command cgroups are removed after each command, also after a timeout and an interruption", () =>
    Effect.gen(function*() {
      const groups = yield* Cgroup.detect()
      if (isRoot) assert.isTrue(groups.available)
      if (!groups.available) return
      const dir = groups.hierarchy.dir
      const { bash, paths } = setup({ sandbox: { bash_command_timeout: 1 } })
      const seconds = 6000 + Math.floor(Math.random() * 900)
      const timedOut = yield* bash(`sleep ${seconds}`)
      assert.isTrue(timedOut.text.startsWith("Command timed out after 1 second and was terminated"))
      yield* eventually("the timed-out command's group is removed", () => ownGroups(dir).length === 0)
      const fiber = yield* Effect.fork(bash(`touch started; sleep ${seconds + 1}`))
      yield* eventually("the command started", () => Fs.existsSync(Path.join(paths.workspace, "started")))
      assert.strictEqual(ownGroups(dir).length, 1, "the running command has its group")
      yield* Fiber.interrupt(fiber)
      yield* eventually("the interrupted command's group is removed", () => ownGroups(dir).length === 0)
      yield* eventually("every sleep is gone", () => sleepsGone(seconds))
    }))

  it.live("without a usable cgroup, bash still works and one warning says what is not enforced", () =>
    Effect.gen(function*() {
      const { bash, logs } = setup({ cgroup: "off", sandbox: { max_processes: 32 } })
      assert.strictEqual((yield* bash("echo one")).text, "one\n")
      assert.strictEqual((yield* bash("echo two")).text, "two\n")
      const warnings = logs.filter((line) => line.includes("sandbox.max_processes"))
      assert.strictEqual(warnings.length, 1, logs.join("\n"))
      assert.include(warnings[0]!, isRoot ? "cannot be enforced" : "RLIMIT_NPROC")
    }))
})

describe("cgroup detection", () => {
  it("finds Antler's own group in cgroup v2, a hybrid unified mount, and the v1 pids hierarchy", () => {
    const v2 = Cgroup.locate(
      "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
      "0::/system.slice/antler.service\n"
    )
    assert.deepStrictEqual(v2, { v2: "/sys/fs/cgroup/system.slice/antler.service" })
    const hybrid = Cgroup.locate(
      [
        "35 30 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw",
        "40 30 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids",
        "41 30 0:36 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct"
      ].join("\n"),
      "4:cpu,cpuacct:/x\n8:pids:/\n0::/\n"
    )
    assert.deepStrictEqual(hybrid, { v2: "/sys/fs/cgroup/unified", v1Pids: "/sys/fs/cgroup/pids" })
    // A container sees its hierarchy from a mount whose root is its own group.
    const container = Cgroup.locate(
      "50 40 0:40 /docker/abc /sys/fs/cgroup/my\\040pids rw - cgroup cgroup rw,pids\n",
      "9:pids:/docker/abc/antler\n"
    )
    assert.deepStrictEqual(container, { v1Pids: "/sys/fs/cgroup/my pids/antler" })
    assert.deepStrictEqual(Cgroup.locate("", "0::/\n"), {})
  })

  it.effect("cgroup v2 with delegated pids and memory: a command group gets pids.max, memory.max and no swap", () =>
    Effect.gen(function*() {
      // A stand-in hierarchy of plain files (what Antler writes is checked, not what the kernel does with it).
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-cgroup-"))
      homes.push(root)
      const own = Path.join(root, "antler.service")
      Fs.mkdirSync(own)
      Fs.writeFileSync(Path.join(own, "cgroup.controllers"), "cpu memory pids\n")
      Fs.writeFileSync(Path.join(own, "cgroup.subtree_control"), "memory pids\n")
      const found = yield* Cgroup.detect({
        mountinfo: `30 1 0:26 / ${root} rw,nosuid - cgroup2 cgroup2 rw\n`,
        selfCgroup: "0::/antler.service\n"
      })
      assert.deepStrictEqual(found, { available: true, hierarchy: { version: 2, dir: own, memory: true } })
      if (!found.available) return
      const group = yield* Cgroup.create(found.hierarchy, { processes: 40, memoryBytes: 256 * 1024 * 1024 })
      const dir = Path.dirname(group.procs)
      assert.strictEqual(Path.dirname(dir), own)
      assert.match(Path.basename(dir), new RegExp(`^antler-${process.pid}-[0-9a-f]+$`))
      assert.strictEqual(Fs.readFileSync(Path.join(dir, "pids.max"), "utf8"), "40")
      assert.strictEqual(Fs.readFileSync(Path.join(dir, "memory.max"), "utf8"), String(256 * 1024 * 1024))
      assert.strictEqual(Fs.readFileSync(Path.join(dir, "memory.swap.max"), "utf8"), "0")
      Fs.writeFileSync(Path.join(dir, "pids.events"), "max 3\n")
      Fs.writeFileSync(Path.join(dir, "memory.events"), "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n")
      assert.deepStrictEqual([group.forkFailures(), group.oomKills()], [3, 1])
    }))

  it.effect("without the pids controller for Antler's group, detection says why", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-cgroup-"))
      homes.push(root)
      Fs.writeFileSync(Path.join(root, "cgroup.controllers"), "cpu memory\n")
      const found = yield* Cgroup.detect({
        mountinfo: `30 1 0:26 / ${root} rw - cgroup2 cgroup2 rw\n`,
        selfCgroup: "0::/\n"
      })
      const reason = `cgroup v2 (${root}) has no pids controller for Antler`
      assert.deepStrictEqual(found, { available: false, reason })
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
      assert.isTrue(result.text.startsWith("Command timed out after 1 second and was terminated"))
      yield* eventually("the sleeps are gone", () => sleepsGone(seconds))
    }))
})

describe("Bash.buildSkillsView (the skills host bash sees while one is disabled)", () => {
  /** A skills directory with `public/{alpha,beta}`, a linked category `linked/` holding `delta`, and links. */
  const skillsTree = () => {
    const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-view-"))
    homes.push(base)
    const root = Path.join(base, "skills")
    const file = (relative: string, content: string) => {
      Fs.mkdirSync(Path.dirname(Path.join(root, relative)), { recursive: true })
      Fs.writeFileSync(Path.join(root, relative), content)
    }
    file("public/alpha/SKILL.md", "SECRET-alpha\n")
    file("public/beta/SKILL.md", "SECRET-beta\n")
    file("README.md", "read me\n")
    Fs.mkdirSync(Path.join(base, "elsewhere/delta"), { recursive: true })
    Fs.writeFileSync(Path.join(base, "elsewhere/delta/SKILL.md"), "SECRET-delta\n")
    Fs.writeFileSync(Path.join(base, "outside.txt"), "outside\n")
    Fs.symlinkSync(Path.join(base, "elsewhere"), Path.join(root, "linked"))
    const alpha = Path.join(root, "public/alpha")
    Fs.symlinkSync("../beta/SKILL.md", Path.join(alpha, "to-beta"))
    Fs.symlinkSync("..", Path.join(alpha, "up"))
    Fs.symlinkSync(root, Path.join(alpha, "root"))
    Fs.symlinkSync("/", Path.join(alpha, "slash"))
    Fs.symlinkSync(Path.join(alpha, "SKILL.md"), Path.join(alpha, "self"))
    Fs.symlinkSync(Path.join(base, "outside.txt"), Path.join(alpha, "outside"))
    return { base, root, view: Path.join(base, "view") }
  }
  const read = (path: string) => Fs.readFileSync(path, "utf8")

  it("leaves out the hidden folders and links into or above them; keeps the rest, links pointing into the view", () => {
    const { base, root, view } = skillsTree()
    Bash.buildSkillsView(root, view, ["public/beta", "linked/delta"])
    assert.deepStrictEqual(Fs.readdirSync(view).sort(), ["README.md", "linked", "public"])
    assert.deepStrictEqual(Fs.readdirSync(Path.join(view, "public")), ["alpha"])
    assert.deepStrictEqual(Fs.readdirSync(Path.join(view, "linked")), [])
    assert.deepStrictEqual(
      Fs.readdirSync(Path.join(view, "public/alpha")).sort(),
      ["SKILL.md", "outside", "self"]
    )
    assert.strictEqual(read(Path.join(view, "public/alpha/SKILL.md")), "SECRET-alpha\n")
    assert.strictEqual(read(Path.join(view, "README.md")), "read me\n")
    // a link into the skills points into the view; one out of them where it did
    assert.strictEqual(Fs.realpathSync(Path.join(view, "public/alpha/self")), Path.join(Fs.realpathSync(view),
      "public/alpha/SKILL.md"))
    assert.strictEqual(read(Path.join(view, "public/alpha/outside")), "outside\n")
    // the skills directory is as it was
    assert.strictEqual(read(Path.join(root, "public/beta/SKILL.md")), "SECRET-beta\n")
    assert.strictEqual(read(Path.join(base, "elsewhere/delta/SKILL.md")), "SECRET-delta\n")
    Bash.removeTree(view)
    assert.strictEqual(read(Path.join(root, "public/alpha/SKILL.md")), "SECRET-alpha\n")
    assert.isTrue(Fs.existsSync(Path.join(root, "public/alpha/self")))
  })

  it.live("a FIFO is left out (the view never waits on one); the whole directory hidden is an empty view", () =>
    Effect.gen(function*() {
      const { root, view } = skillsTree()
      const made = yield* Bash.run({
        file: "/bin/sh",
        args: ["-c", `mkfifo "${Path.join(root, "public/alpha/pipe")}"`],
        env: { PATH: Bash.SANDBOX_PATH },
        timeoutMs: 10_000,
        maxOutputChars: 0
      })
      assert.strictEqual(made.exitCode, 0)
      Bash.buildSkillsView(root, view, ["public/beta"])
      assert.notInclude(Fs.readdirSync(Path.join(view, "public/alpha")), "pipe")
      const empty = `${view}-empty`
      Bash.buildSkillsView(root, empty, [""])
      assert.deepStrictEqual(Fs.readdirSync(empty), [])
    }))
})

describe("Bash.LineBuffer (output shown while a command runs)", () => {
  it("passes whole lines (\\n or \\r), holds a partial one, and lets a line past its limit through in pieces", () => {
    const lines = new Bash.LineBuffer(8)
    assert.strictEqual(lines.push("one\ntw"), "one\n")
    assert.strictEqual(lines.push("o\r50%"), "two\r")
    assert.strictEqual(lines.push("..."), "")
    assert.strictEqual(lines.push("......"), "50%.........")
    assert.strictEqual(lines.push("tail"), "")
    assert.strictEqual(lines.end(), "tail")
    assert.strictEqual(lines.end(), "")
  })

  it.prop(
    "what comes out, ended, is what went in, in order",
    [FastCheck.array(FastCheck.string({ unit: "binary" }))],
    ([chunks]) => {
      const lines = new Bash.LineBuffer(16)
      const out = chunks.map((chunk) => lines.push(chunk)).join("") + lines.end()
      return out === chunks.join("")
    }
  )
})
