import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import type { SandboxConfig } from "../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { SandboxError } from "../../src/services/Sandbox.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import * as Bwrap from "../support/bwrap.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const bwrapInstalled = await Bwrap.installed()

const appConfig = (options: { sandbox?: Partial<SandboxConfig>; skills?: string; source?: string } = {}) => {
  const home = tempDir("antler-local-")
  const base = defaults()
  return AppConfigService.of({
    config: {
      ...base,
      sandbox: { ...base.sandbox, ...options.sandbox },
      skills: options.skills === undefined ? base.skills : { ...base.skills, path: options.skills }
    },
    source: options.source,
    home,
    ignored: []
  })
}

const failure = <A>(effect: Effect.Effect<A, SandboxError>) =>
  Effect.flip(effect)

describe("LocalSandbox provider", () => {
  it.effect("acquire creates the thread's directories and is idempotent; id is local:{user}:{thread}", () =>
    Effect.gen(function*() {
      const app = appConfig()
      const provider = LocalSandbox.make(app, { bwrap: "off" })
      assert.isTrue(Option.isNone(yield* provider.current("t1", "u1")))
      const first = yield* provider.acquire("t1", "u1")
      const paths = threadPaths(app.home, "u1", "t1")
      assert.strictEqual(first.id, "local:u1:t1")
      assert.deepStrictEqual(first.paths, paths)
      assert.strictEqual(paths.workspace, Path.join(app.home, "users/u1/threads/t1/user-data/workspace"))
      assert.isTrue(first.usesThreadDataMounts)
      for (const dir of [paths.workspace, paths.uploads, paths.outputs]) assert.isTrue(Fs.statSync(dir).isDirectory())
      Fs.rmSync(paths.workspace, { recursive: true })
      const second = yield* provider.acquire("t1", "u1")
      assert.strictEqual(second, first)
      assert.isTrue(Fs.statSync(paths.workspace).isDirectory(), "a removed directory is made again")
      assert.strictEqual(Option.getOrThrow(yield* provider.current("t1", "u1")), first)
      assert.strictEqual(Option.getOrThrow(yield* provider.get("local:u1:t1")), first)
      const other = yield* provider.acquire("t1", "u2")
      assert.strictEqual(other.id, "local:u2:t1")
      assert.notStrictEqual(other.paths.workspace, first.paths.workspace)
    }))

  it.effect("release is a no-op: the sandbox and its files stay", () =>
    Effect.gen(function*() {
      const provider = LocalSandbox.make(appConfig(), { bwrap: "off" })
      const sandbox = yield* provider.acquire("t1", "u1")
      yield* sandbox.writeText("/mnt/user-data/workspace/keep.txt", "kept")
      yield* provider.release(sandbox.id)
      assert.isTrue(Option.isSome(yield* provider.get(sandbox.id)))
      assert.strictEqual(yield* sandbox.readText("/mnt/user-data/workspace/keep.txt"), "kept")
    }))

  it.effect("rejects unsafe thread and user ids without creating anything", () =>
    Effect.gen(function*() {
      const app = appConfig()
      const provider = LocalSandbox.make(app, { bwrap: "off" })
      const bad = [["../x", "u1"], ["", "u1"], ["a/b", "u1"], [".hidden", "u1"], ["t1", ".."], ["x".repeat(129), "u"], [
        "t\u0000",
        "u"
      ]]
      for (const [thread, user] of bad) {
        const error = yield* failure(provider.acquire(thread!, user!))
        assert.strictEqual(error.reason, "invalid_id")
      }
      assert.deepStrictEqual(Fs.readdirSync(app.home), [])
    }))

  it.effect("keeps a bounded cache; an evicted sandbox is re-made on the next acquire with its files intact", () =>
    Effect.gen(function*() {
      const provider = LocalSandbox.make(appConfig(), { bwrap: "off", maxCached: 2 })
      const one = yield* provider.acquire("t1", "u")
      yield* one.writeText("/mnt/user-data/outputs/r.md", "report")
      yield* provider.acquire("t2", "u")
      yield* provider.acquire("t3", "u")
      assert.isTrue(Option.isNone(yield* provider.get("local:u:t1")))
      const again = yield* provider.acquire("t1", "u")
      assert.strictEqual(again.id, "local:u:t1")
      assert.strictEqual(yield* again.readText("/mnt/user-data/outputs/r.md"), "report")
    }))

  it.effect("the layer reads the data directory from AppConfigService", () =>
    Effect.gen(function*() {
      const app = appConfig()
      const sandbox = yield* Effect.flatMap(SandboxProvider, (p) => p.acquire("t9", "u9")).pipe(
        Effect.provide(LocalSandbox.layer({ bwrap: "off" })),
        Effect.provideService(AppConfigService, app)
      )
      assert.isTrue(sandbox.paths.root.startsWith(app.home))
    }))
})

describe("bashMode", () => {
  it.effect("says how bash will run", () =>
    Effect.gen(function*() {
      const off = yield* LocalSandbox.bashMode(appConfig(), { bwrap: "off" })
      assert.strictEqual(off.mode, "disabled")
      assert.include(off.mode === "disabled" ? off.message : "", "sandbox.allow_host_bash: true")
      const host = yield* LocalSandbox.bashMode(appConfig({ sandbox: { allow_host_bash: true } }), { bwrap: "off" })
      assert.strictEqual(host.mode, "host")
      if (bwrapInstalled) assert.strictEqual((yield* LocalSandbox.bashMode(appConfig())).mode, "bwrap")
    }))
})

describe("paths", () => {
  it.effect("resolves virtual paths to the thread's host directories and masks them back", () =>
    Effect.gen(function*() {
      const app = appConfig()
      const sandbox = yield* LocalSandbox.make(app, { bwrap: "off" }).acquire("t1", "u1")
      const real = Fs.realpathSync(sandbox.paths.workspace)
      assert.strictEqual(yield* sandbox.resolve("/mnt/user-data/workspace/a/b.txt", "write"), `${real}/a/b.txt`)
      assert.strictEqual(yield* sandbox.resolve("/mnt/user-data/workspace//./a", "read"), `${real}/a`)
      assert.strictEqual(
        sandbox.mask(`cp ${sandbox.paths.workspace}/x ${Fs.realpathSync(sandbox.paths.outputs)}/y`),
        "cp /mnt/user-data/workspace/x /mnt/user-data/outputs/y"
      )
      assert.strictEqual(sandbox.mask(`${app.home}/users/other`), "<antler-home>/users/other")
    }))

  // DeerFlow's test_sandbox_path_patterns: test_boundary_still_rejects_prefix_siblings_and_accepts_real_segments
  it("masks whole path segments only: a longer name or path merely containing a host directory is left alone", () => {
    const mask = LocalSandbox.makeMask([
      ["/srv/skills", "/mnt/skills"],
      ["/srv/data/ws", "/mnt/user-data/workspace"],
      ["/srv/data", "<antler-home>"]
    ])
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["/srv/skills-extra/x", "/srv/skills-extra/x"],
      ["/srv/skills.bak/x", "/srv/skills.bak/x"],
      ["/srv/skillsx", "/srv/skillsx"],
      ["/srv/skills2/x /srv/skills_backup/y", "/srv/skills2/x /srv/skills_backup/y"],
      ["/srv/skills, ok /srv/skills:/other", "/mnt/skills, ok /mnt/skills:/other"],
      ["cwd: /srv/skills", "cwd: /mnt/skills"],
      ["/srv/skills\\a\\b.md", "/mnt/skills\\a\\b.md"],
      ["/x/srv/skills/y", "/x/srv/skills/y"],
      ["./srv/skills/y", "./srv/skills/y"],
      ["/srv/skills", "/mnt/skills"],
      ["/srv/skills/", "/mnt/skills/"],
      ["cat /srv/skills/a.md:3: text", "cat /mnt/skills/a.md:3: text"],
      ["see /srv/skills.", "see /mnt/skills."],
      ["'/srv/skills' \"/srv/data/ws/a\" (/srv/data)", "'/mnt/skills' \"/mnt/user-data/workspace/a\" (<antler-home>)"],
      ["HOME=/srv/data/ws PATH=/bin:/srv/skills/bin", "HOME=/mnt/user-data/workspace PATH=/bin:/mnt/skills/bin"],
      ["/srv/data/ws2/a /srv/data/ws/a", "<antler-home>/ws2/a /mnt/user-data/workspace/a"],
      ["file:///srv/data/ws/a", "file:///mnt/user-data/workspace/a"]
    ]
    for (const [text, expected] of cases) assert.strictEqual(mask(text), expected, text)
  })

  it.effect("mounts the configured skills directory read-only at /mnt/skills (relative to the config file)", () =>
    Effect.gen(function*() {
      const configDir = tempDir("antler-config-")
      Fs.mkdirSync(Path.join(configDir, "my-skills", "s"), { recursive: true })
      Fs.writeFileSync(Path.join(configDir, "my-skills", "s", "SKILL.md"), "skill")
      const app = appConfig({ skills: "my-skills", source: Path.join(configDir, "config.yaml") })
      const sandbox = yield* LocalSandbox.make(app, { bwrap: "off" }).acquire("t1", "u1")
      assert.strictEqual(yield* sandbox.readText("/mnt/skills/s/SKILL.md"), "skill")
      const error = yield* failure(sandbox.writeText("/mnt/skills/s/SKILL.md", "x"))
      assert.strictEqual(error.reason, "read_only")
      assert.strictEqual(Fs.readFileSync(Path.join(configDir, "my-skills", "s", "SKILL.md"), "utf8"), "skill")
      // Without a configured directory there is no /mnt/skills at all.
      const plain = yield* LocalSandbox.make(appConfig(), { bwrap: "off" }).acquire("t1", "u1")
      const missing = yield* failure(plain.readText("/mnt/skills/s/SKILL.md"))
      assert.strictEqual(missing.reason, "not_found")
      assert.include(missing.message, "there is no skills directory")
    }))

  it.effect("file operations: stat, walk, readBytes limits", () =>
    Effect.gen(function*() {
      const sandbox = yield* LocalSandbox.make(appConfig(), { bwrap: "off" }).acquire("t1", "u1")
      yield* sandbox.writeText("/mnt/user-data/workspace/d/e/f.txt", "12345")
      assert.deepStrictEqual(yield* sandbox.stat("/mnt/user-data/workspace/d/e/f.txt"), { kind: "file", size: 5 })
      assert.deepStrictEqual(yield* sandbox.stat("/mnt/user-data/workspace/d"), { kind: "directory", size: 0 })
      const walked = yield* sandbox.walk("/mnt/user-data/workspace")
      assert.deepStrictEqual(walked.entries.map((e) => [e.path, e.relative, e.kind, e.depth]), [
        ["/mnt/user-data/workspace/d", "d", "directory", 1],
        ["/mnt/user-data/workspace/d/e", "d/e", "directory", 2],
        ["/mnt/user-data/workspace/d/e/f.txt", "d/e/f.txt", "file", 3]
      ])
      assert.isTrue((yield* sandbox.walk("/mnt/user-data/workspace", { maxEntries: 1 })).truncated)
      const tooLarge = yield* failure(sandbox.readBytes("/mnt/user-data/workspace/d/e/f.txt", 4))
      assert.strictEqual(tooLarge.reason, "too_large")
      assert.strictEqual((yield* failure(sandbox.walk("/mnt/user-data/workspace/d/e/f.txt"))).reason, "not_a_directory")
    }))

  it.prop(
    "parseVirtual: anything it accepts lies under its mount, and any '..' segment or encoded dot/slash is refused",
    [
      FastCheck.array(
        FastCheck.constantFrom(
          ..."mnt user-data workspace outputs skills .. . a %2e%2e %2F b.txt".split(" "),
          "",
          "x\u0000"
        ),
        { maxLength: 8 }
      )
    ],
    ([segments]) => {
      const mounts: Array<LocalSandbox.MountPoint> = [
        { virtual: "/mnt/user-data/workspace", host: "/h/ws", real: "/h/ws", writable: true },
        { virtual: "/mnt/user-data/outputs", host: "/h/out", real: "/h/out", writable: true },
        { virtual: "/mnt/user-data", host: "/h", real: "/h", writable: false }
      ]
      const input = `/${segments.join("/")}`
      const parsed = LocalSandbox.parseVirtual(input, mounts, (s) => s)
      const bad = segments.includes("..") || /%2e|%2f|\u0000/i.test(input)
      if (Either.isLeft(parsed)) return true
      if (bad) return false
      const candidate = [parsed.right.mount.host, ...parsed.right.rest].join("/")
      const { mount, rest, virtual } = parsed.right
      return candidate.startsWith(mount.host) && !rest.some((s) => s === ".." || s === "" || s === ".") &&
        virtual.startsWith(mount.virtual)
    }
  )
})

describe("file lock", () => {
  it.live("serialises work on one file and lets different files proceed together", () =>
    Effect.gen(function*() {
      const sandbox = yield* LocalSandbox.make(appConfig(), { bwrap: "off" }).acquire("t1", "u1")
      const track = () => {
        let active = 0
        let peak = 0
        const step = Effect.acquireUseRelease(
          Effect.sync(() => {
            active++
            peak = Math.max(peak, active)
          }),
          () => Effect.sleep("20 millis"),
          () => Effect.sync(() => active--)
        )
        return { step, peak: () => peak }
      }
      const same = track()
      yield* Effect.all(
        Array.from({ length: 5 }, () => sandbox.withFileLock("/mnt/user-data/workspace/a.txt", same.step)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(same.peak(), 1)
      const different = track()
      yield* Effect.all(
        Array.from({ length: 5 }, (_, i) => sandbox.withFileLock(`/mnt/user-data/workspace/f${i}.txt`, different.step)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(different.peak(), 5)
      // Two virtual spellings of one file share a lock.
      const alias = track()
      yield* Effect.all([
        sandbox.withFileLock("/mnt/user-data/workspace/a.txt", alias.step),
        sandbox.withFileLock("/mnt/user-data/workspace//./a.txt", alias.step)
      ], { concurrency: "unbounded" })
      assert.strictEqual(alias.peak(), 1)
    }))
})

describe.skipIf(!bwrapInstalled)("exec timeouts", () => {
  it.live("a caller may pass a shorter timeout; a longer one is capped at the configured timeout", () =>
    Effect.gen(function*() {
      const provider = LocalSandbox.make(appConfig({ sandbox: { bash_command_timeout: 1 } }))
      const sandbox = yield* provider.acquire("t1", "u1")
      const shorter = yield* sandbox.exec("sleep 20", { timeoutMs: 300 })
      assert.isTrue(shorter.timedOut)
      assert.strictEqual(shorter.timeoutMs, 300)
      assert.isNull(shorter.exitCode)
      const longer = yield* sandbox.exec("sleep 20", { timeoutMs: 60_000 })
      assert.isTrue(longer.timedOut)
      assert.strictEqual(longer.timeoutMs, 1000)
      const quick = yield* sandbox.exec("echo $FOO", { env: { FOO: "bar" } })
      assert.deepStrictEqual([quick.output, quick.exitCode, quick.timedOut], ["bar\n", 0, false])
    }))
})

describe("paths as DeerFlow refuses them", () => {
  it.effect("a backslash traversal is refused as traversal; the bare /mnt/user-data root takes no writes", () =>
    Effect.gen(function*() {
      const sandbox = yield* LocalSandbox.make(appConfig(), { bwrap: "off" }).acquire("t1", "u1")
      for (const path of ["workspace\\..\\..\\etc", "/mnt/user-data/workspace\\..\\..\\..\\etc\\passwd", "a\\..\\b"]) {
        const error = yield* failure(sandbox.resolve(path, "read"))
        assert.strictEqual(error.reason, "path_escape", path)
        assert.include(error.message, "'..'")
      }
      // a file named with a backslash but no `..` is still just a name
      yield* sandbox.writeText("/mnt/user-data/workspace/a\\b.txt", "x")
      for (const path of ["/mnt/user-data", "/mnt/user-data/", "/mnt/user-data/notes.txt"]) {
        const error = yield* failure(sandbox.writeText(path, "x"))
        assert.notStrictEqual(error.reason, undefined, path)
      }
    }))

  it.effect("output masking: siblings of the skills root are left alone, siblings of the thread's data are hidden", () =>
    Effect.gen(function*() {
      const skills = tempDir("antler-skills-")
      const app = appConfig({ skills })
      const sandbox = yield* LocalSandbox.make(app, { bwrap: "off" }).acquire("t1", "u1")
      const root = threadPaths(app.home, "u1", "t1").root
      assert.strictEqual(sandbox.mask(`${skills}/demo/SKILL.md ${skills}-extra/x`), `/mnt/skills/demo/SKILL.md ${skills}-extra/x`)
      const masked = sandbox.mask(`${root}/workspace/a.txt ${root}-extra/b ${Path.dirname(root)}/other/c`)
      assert.strictEqual(masked.split(" ")[0], "/mnt/user-data/workspace/a.txt")
      assert.notInclude(masked, app.home)
    }))
})
