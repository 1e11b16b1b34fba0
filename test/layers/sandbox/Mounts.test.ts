/**
 * Custom mounts (`sandbox.mounts`), the skills container path (`skills.container_path`) and an enabled MCP
 * filesystem server's roots, as the model meets them through the real file tools and bash (DeerFlow's sandbox
 * path mapping, issue 28 item 1).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../../src/layers/LocalSandbox.js"
import * as McpReloadable from "../../../src/layers/McpReloadable.js"
import * as SandboxTools from "../../../src/layers/SandboxTools.js"
import * as Toolkit from "../../../src/layers/Toolkit.js"
import * as AgentPrompt from "../../../src/programs/AgentPrompt.js"
import { AppConfigService } from "../../../src/services/AppConfig.js"
import { McpServerConfig } from "../../../src/services/Extensions.js"
import { Mcp } from "../../../src/services/Mcp.js"
import { SandboxProvider } from "../../../src/services/Sandbox.js"
import type { JsonObject } from "../../../src/state/Message.js"
import * as Bwrap from "../../support/bwrap.js"
import { inRun, tempDirs } from "../../support/fixtures.js"

const tempDir = tempDirs()
const bwrapInstalled = await Bwrap.installed()

/** The configuration errors of a `config.yaml` in object form, one line each. */
const configErrors = (raw: Record<string, unknown>, home = tempDir("antler-mounts-home-")) =>
  ConfigFile.fromObject(raw, { home }).pipe(
    Effect.flip,
    Effect.map((error) => error.message)
  )

/** Host directories for two mounts: `data` (read-only, with a file) and `scratch` (read-write). */
const hostDirs = () => {
  const data = tempDir("antler-mount-data-")
  Fs.writeFileSync(Path.join(data, "report.txt"), "quarterly numbers\n")
  const scratch = tempDir("antler-mount-scratch-")
  return { data, scratch }
}

/** The real sandbox tools over a configuration in `config.yaml`'s shape. */
const setup = (raw: Record<string, unknown>, options: { bwrap?: "auto" | "off"; mcp?: Mcp["Type"] } = {}) =>
  Effect.gen(function*() {
    const home = tempDir("antler-mounts-home-")
    const app = yield* ConfigFile.fromObject(raw, { home })
    const sandboxLayer = LocalSandbox.layer({ bwrap: options.bwrap ?? "off", cgroup: "off" }).pipe(
      Layer.provide(Layer.succeed(AppConfigService, app)),
      Layer.provide(options.mcp === undefined ? Layer.empty : Layer.succeed(Mcp, options.mcp))
    )
    const provider = yield* Effect.provide(SandboxProvider, sandboxLayer)
    const call = (name: string, args: JsonObject) =>
      SandboxTools.tools({ vision: false }).pipe(
        Effect.flatMap((tools) => Toolkit.make(tools).call({ id: `call-${name}`, name, args })),
        Effect.map((result) => ({ text: String(result.message.content), status: result.message.status })),
        Effect.provideService(SandboxProvider, provider),
        Effect.provideService(AppConfigService, app),
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
      )
    const tools = yield* SandboxTools.tools({ vision: false }).pipe(
      Effect.provideService(SandboxProvider, provider),
      Effect.provideService(AppConfigService, app)
    )
    return { app, home, call, tools }
  })

const mountsConfig = (dirs: { data: string; scratch: string }) => ({
  sandbox: {
    mounts: [
      { host_path: dirs.data, container_path: "/mnt/data", read_only: true },
      { host_path: dirs.scratch, container_path: "/mnt/scratch/" }
    ]
  }
})

describe("sandbox.mounts in config.yaml", () => {
  it.effect("a relative or missing host path, a relative container path are readable errors", () =>
    Effect.gen(function*() {
      const message = yield* configErrors({
        sandbox: {
          mounts: [
            { host_path: "projects/mine", container_path: "/mnt/mine" },
            { host_path: "/nonexistent/antler-mount", container_path: "/mnt/gone" },
            { host_path: "/", container_path: "mnt/relative" }
          ]
        }
      })
      assert.include(message, "sandbox.mounts[0].host_path")
      assert.include(message, "expected an absolute host path")
      assert.include(message, "sandbox.mounts[2].container_path")
      assert.include(message, "expected an absolute path")
      // (existence is checked once the shapes are right)
      const missing = yield* configErrors({
        sandbox: { mounts: [{ host_path: "/nonexistent/antler-mount", container_path: "/mnt/gone" }] }
      })
      assert.include(missing, "sandbox.mounts[0].host_path: /nonexistent/antler-mount does not exist")
    }))

  it.effect("a container path at, inside or around /mnt/user-data or the skills path is refused", () =>
    Effect.gen(function*() {
      const { data } = hostDirs()
      for (const target of ["/mnt/user-data", "/mnt/user-data/workspace/extra", "/mnt", "/mnt/skills/more"]) {
        const message = yield* configErrors({ sandbox: { mounts: [{ host_path: data, container_path: target }] } })
        assert.include(message, "sandbox.mounts[0].container_path", target)
        assert.include(message, "keeps for itself", target)
      }
      const traversal = yield* configErrors({
        sandbox: { mounts: [{ host_path: data, container_path: "/mnt/data/../user-data" }] }
      })
      assert.include(traversal, "no '.', '..' or empty segments")
      const system = yield* configErrors({ sandbox: { mounts: [{ host_path: data, container_path: "/usr/local" }] } })
      assert.include(system, "the sandbox's system directory /usr")
      const nested = yield* configErrors({
        sandbox: {
          mounts: [{ host_path: data, container_path: "/mnt/data" }, {
            host_path: data,
            container_path: "/mnt/data/inner"
          }]
        }
      })
      assert.include(nested, "sandbox.mounts[1].container_path: /mnt/data/inner overlaps sandbox.mounts[0]")
      // With the skills elsewhere, /mnt/skills is free for a mount; the skills path itself is checked too.
      yield* ConfigFile.fromObject({
        skills: { container_path: "/opt/skills" },
        sandbox: { mounts: [{ host_path: data, container_path: "/mnt/skills" }] }
      }, { home: tempDir("antler-mounts-home-") })
      const skills = yield* configErrors({ skills: { container_path: "/mnt/user-data/skills" } })
      assert.include(skills, "skills.container_path: /mnt/user-data/skills overlaps /mnt/user-data")
    }))

  it.effect("a host path holding the data directory (every thread's files) is refused", () =>
    Effect.gen(function*() {
      const parent = tempDir("antler-mount-parent-")
      const home = Path.join(parent, "home")
      Fs.mkdirSync(home)
      const message = yield* configErrors(
        { sandbox: { mounts: [{ host_path: parent, container_path: "/mnt/parent" }] } },
        home
      )
      assert.include(message, "contains Antler's data directory")
    }))
})

describe("custom mounts through the file tools", () => {
  it.effect("reads a mount, writes a read-write one, refuses writes to a read-only one", () =>
    Effect.gen(function*() {
      const dirs = hostDirs()
      const { call } = yield* setup(mountsConfig(dirs))
      const read = yield* call("read_file", { description: "d", path: "/mnt/data/report.txt" })
      assert.include(read.text, "quarterly numbers")
      const listed = yield* call("ls", { description: "d", path: "/mnt/data" })
      assert.include(listed.text, "report.txt")
      const found = yield* call("grep", { description: "d", pattern: "quarterly", path: "/mnt/data" })
      assert.include(found.text, "/mnt/data/report.txt")

      const written = yield* call("write_file", { description: "d", path: "/mnt/scratch/notes/a.txt", content: "hi" })
      assert.notStrictEqual(written.status, "error", written.text)
      assert.strictEqual(Fs.readFileSync(Path.join(dirs.scratch, "notes/a.txt"), "utf8"), "hi")

      const refused = yield* call("write_file", { description: "d", path: "/mnt/data/new.txt", content: "x" })
      assert.strictEqual(refused.status, "error")
      assert.include(refused.text, "/mnt/data/new.txt is read-only: /mnt/data is mounted read-only")
      assert.isFalse(Fs.existsSync(Path.join(dirs.data, "new.txt")))
      const replaced = yield* call("str_replace", {
        description: "d",
        path: "/mnt/data/report.txt",
        old_str: "quarterly",
        new_str: "yearly"
      })
      assert.strictEqual(replaced.status, "error")
      assert.include(replaced.text, "read-only")
      assert.strictEqual(Fs.readFileSync(Path.join(dirs.data, "report.txt"), "utf8"), "quarterly numbers\n")
    }))

  it.effect("traversal out of a mount is refused: '..', backslashes, a symlink leading out", () =>
    Effect.gen(function*() {
      const dirs = hostDirs()
      const outside = tempDir("antler-mount-outside-")
      Fs.writeFileSync(Path.join(outside, "secret.txt"), "do not show")
      Fs.symlinkSync(outside, Path.join(dirs.scratch, "link"))
      const { call } = yield* setup(mountsConfig(dirs))
      const attempts = ["/mnt/data/../../etc/passwd", "/mnt/scratch\\..\\..\\etc\\passwd", "/mnt/scratch/link/secret.txt"]
      for (const path of attempts) {
        const result = yield* call("read_file", { description: "d", path })
        assert.strictEqual(result.status, "error", path)
        assert.notInclude(result.text, "do not show")
        assert.notInclude(result.text, outside)
      }
      const escape = yield* call("write_file", { description: "d", path: "/mnt/scratch/link/x.txt", content: "x" })
      assert.strictEqual(escape.status, "error")
      assert.isFalse(Fs.existsSync(Path.join(outside, "x.txt")))
      // A mount's host path never shows: it is masked to its container path.
      const missing = yield* call("read_file", { description: "d", path: "/mnt/scratch/none.txt" })
      assert.notInclude(missing.text, dirs.scratch)
      // Paths outside every mount are still refused, and the refusal names the mounts.
      const other = yield* call("read_file", { description: "d", path: "/mnt/other/x.txt" })
      assert.strictEqual(other.status, "error")
      assert.include(other.text, "/mnt/data")
    }))

  it.effect("the prompt lists the mounts (the bash tool's description is DeerFlow's, naming none)", () =>
    Effect.gen(function*() {
      const dirs = hostDirs()
      const { app, tools } = yield* setup(mountsConfig(dirs))
      const prompt = yield* AgentPrompt.defaultSystemPrompt(app)
      assert.include(prompt, "- Custom mount: `/mnt/data` - Host directory mapped into the sandbox (read-only)")
      assert.include(prompt, "- Custom mount: `/mnt/scratch` - Host directory mapped into the sandbox (read-write)")
      const bash = tools.find((t) => t.name === "bash")!
      assert.notInclude(bash.description, "/mnt/data")
    }))
})

describe.skipIf(!bwrapInstalled)("custom mounts in bash (bubblewrap)", () => {
  it.effect("bash reads a mount, writes a read-write one, cannot write a read-only one", () =>
    Effect.gen(function*() {
      const dirs = hostDirs()
      const { call } = yield* setup(mountsConfig(dirs), { bwrap: "auto" })
      const bash = (command: string) => call("bash", { description: "d", command })
      const read = yield* bash("cat /mnt/data/report.txt")
      assert.include(read.text, "quarterly numbers")
      const written = yield* bash("echo from-bash > /mnt/scratch/out.txt && echo done")
      assert.include(written.text, "done")
      assert.strictEqual(Fs.readFileSync(Path.join(dirs.scratch, "out.txt"), "utf8"), "from-bash\n")
      const refused = yield* bash("echo no > /mnt/data/new.txt; echo status=$?")
      assert.include(refused.text, "status=1")
      assert.include(refused.text, "Read-only file system")
      assert.isFalse(Fs.existsSync(Path.join(dirs.data, "new.txt")))
      // The thread's own directories still work beside the mounts.
      const own = yield* bash("cp /mnt/data/report.txt /mnt/user-data/outputs/ && ls /mnt/user-data/outputs")
      assert.include(own.text, "report.txt")
    }))
})

describe("custom mounts in host bash (allow_host_bash, no bubblewrap)", () => {
  it.effect("the mounts' paths are mapped to their host directories and masked back", () =>
    Effect.gen(function*() {
      const dirs = hostDirs()
      const config = mountsConfig(dirs)
      const { call } = yield* setup({ sandbox: { ...config.sandbox, allow_host_bash: true } }, { bwrap: "off" })
      const bash = (command: string) => call("bash", { description: "d", command })
      const read = yield* bash("cat /mnt/data/report.txt && echo hi > /mnt/scratch/h.txt && ls -d /mnt/scratch")
      assert.include(read.text, "quarterly numbers")
      assert.include(read.text, "/mnt/scratch")
      assert.notInclude(read.text, dirs.scratch)
      assert.strictEqual(Fs.readFileSync(Path.join(dirs.scratch, "h.txt"), "utf8"), "hi\n")
      const outside = yield* bash("cat /mnt/elsewhere/x")
      assert.strictEqual(outside.status, "error")
      assert.include(outside.text, "outside the sandbox")
    }))
})

describe("skills.container_path", () => {
  const skillsDir = () => {
    const root = tempDir("antler-mount-skills-")
    const dir = Path.join(root, "public", "charts")
    Fs.mkdirSync(dir, { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, "SKILL.md"),
      "---\nname: charts\ndescription: Draw charts from tables\n---\n# Charts\nUse the chart recipe.\n"
    )
    return root
  }

  it.effect("a changed skills path is what the prompt shows and the file tools use", () =>
    Effect.gen(function*() {
      const { app, call, tools } = yield* setup({ skills: { path: skillsDir(), container_path: "/opt/skills" } })
      const prompt = yield* AgentPrompt.defaultSystemPrompt(app)
      assert.include(prompt, "**Skills are located at:** /opt/skills\n")
      assert.include(prompt, "/opt/skills/public/charts/SKILL.md")
      assert.notInclude(prompt, "/mnt/skills")
      const read = yield* call("read_file", { description: "d", path: "/opt/skills/public/charts/SKILL.md" })
      assert.include(read.text, "Use the chart recipe.")
      const old = yield* call("read_file", { description: "d", path: "/mnt/skills/public/charts/SKILL.md" })
      assert.strictEqual(old.status, "error")
      const write = yield* call("write_file", { description: "d", path: "/opt/skills/public/x.md", content: "x" })
      assert.strictEqual(write.status, "error")
      assert.include(write.text, "skills cannot be changed from the sandbox")
      // (the bash tool's description is DeerFlow's, naming no skills path: the prompt gives it)
      const bash = tools.find((t) => t.name === "bash")!
      assert.notInclude(bash.description, "/mnt/skills")
    }))

  it.effect.skipIf(!bwrapInstalled)("bash sees the skills at the changed path", () =>
    Effect.gen(function*() {
      const { call } = yield* setup({ skills: { path: skillsDir(), container_path: "/opt/skills" } }, {
        bwrap: "auto"
      })
      const result = yield* call("bash", {
        description: "d",
        command: "cat /opt/skills/public/charts/SKILL.md; ls /mnt/skills 2>&1 | head -1"
      })
      assert.include(result.text, "Use the chart recipe.")
      assert.include(result.text, "No such file or directory")
    }))
})

describe("an MCP filesystem server's roots", () => {
  const server = (root: string, enabled: boolean): McpServerConfig =>
    Schema.decodeUnknownSync(McpServerConfig)({
      enabled,
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", root]
    })

  it.scoped("are usable from the file tools while the server is enabled, refused once it is disabled", () =>
    Effect.gen(function*() {
      const root = tempDir("antler-mcp-root-")
      Fs.writeFileSync(Path.join(root, "shared.txt"), "shared through mcp")
      // The app's MCP service (servers start only when their tools are asked for: never here).
      const mcp = yield* McpReloadable.make({ servers: { files: server(root, true) } })
      const { call } = yield* setup({}, { mcp })
      const read = yield* call("read_file", { description: "d", path: `${root}/shared.txt` })
      assert.include(read.text, "shared through mcp")
      const written = yield* call("write_file", { description: "d", path: `${root}/new.txt`, content: "w" })
      assert.notStrictEqual(written.status, "error", written.text)
      assert.strictEqual(Fs.readFileSync(Path.join(root, "new.txt"), "utf8"), "w")
      // (a root outside /mnt is named in messages like any other mount)
      const dotted = yield* call("read_file", { description: "d", path: `${root}/a/../shared.txt` })
      assert.strictEqual(dotted.status, "error")
      assert.include(dotted.text, `'..' segments: ${root}/a/../shared.txt`)

      // The gateway's MCP settings switch the server off (extensions_config.json hot-reloads).
      yield* mcp.replace!({ files: server(root, false) })
      const refused = yield* call("read_file", { description: "d", path: `${root}/shared.txt` })
      assert.strictEqual(refused.status, "error")
      assert.notInclude(refused.text, "shared through mcp")
      const write = yield* call("write_file", { description: "d", path: `${root}/later.txt`, content: "w" })
      assert.strictEqual(write.status, "error")
      assert.isFalse(Fs.existsSync(Path.join(root, "later.txt")))
    }))

  it.scoped.skipIf(!bwrapInstalled)("are bound in bash while enabled, gone once disabled", () =>
    Effect.gen(function*() {
      const root = tempDir("antler-mcp-root-")
      Fs.writeFileSync(Path.join(root, "shared.txt"), "shared through mcp")
      const mcp = yield* McpReloadable.make({ servers: { files: server(root, true) } })
      const { call } = yield* setup({}, { mcp, bwrap: "auto" })
      const bash = (command: string) => call("bash", { description: "d", command })
      const read = yield* bash(`cat ${root}/shared.txt && echo x > ${root}/from-bash.txt && echo ok`)
      assert.include(read.text, "shared through mcp")
      assert.include(read.text, "ok")
      assert.strictEqual(Fs.readFileSync(Path.join(root, "from-bash.txt"), "utf8"), "x\n")
      yield* mcp.replace!({ files: server(root, false) })
      const gone = yield* bash(`cat ${root}/shared.txt; echo status=$?`)
      assert.notInclude(gone.text, "shared through mcp")
      assert.include(gone.text, "status=1")
    }))
})
