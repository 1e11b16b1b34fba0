/**
 * The bundled CLI, as `npm run build` makes it and bin/antler.js runs it: scripts/bundle-cli.mjs builds
 * dist/cli/ (the program in one CommonJS file and its V8 code cache) into a package laid out as installed
 * (package.json, bin/, dist/cli/, node_modules), and every test runs `node bin/antler.js ...` there. The bundle
 * is a different build of the same sources (one file, `import()` made `require()`, externals loaded from
 * node_modules), so what only it could break is run through it: start-up, a run against the scripted server,
 * the threads it saved, document conversion (each converter's library), an MCP server, the choice bin/
 * makes between the bundle and dist/programs/, and `antler serve`'s web page (from the bundle and from the
 * package as `npm pack` makes it and npm installs it).
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import * as docx from "docx"
import * as Effect from "effect/Effect"
import ExcelJS from "exceljs"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { PDFDocument, StandardFonts } from "pdf-lib"
import pptxgen from "pptxgenjs"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { childEnv } from "../support/cli.js"
import { tempDirs } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"

// pptxgenjs's types are read as CommonJS while its runtime import is ESM: take the class from either shape.
type PptxClass = typeof pptxgen.default
const PptxGenJS: PptxClass = (pptxgen as unknown as { default?: PptxClass }).default ?? pptxgen as unknown as PptxClass

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const SLOW = 180_000
const tempDir = tempDirs()
const VERSION = JSON.parse(Fs.readFileSync(Path.join(ROOT, "package.json"), "utf8")).version as string

/** Packages the bundle loads only when a command needs them (see scripts/bundle-cli.mjs). */
const LAZY = ["exceljs", "mammoth", "jszip", "unpdf", "turndown", "@modelcontextprotocol/sdk", "gpt-tokenizer"]

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const spawn = (args: ReadonlyArray<string>, options: { cwd: string; env: NodeJS.ProcessEnv }) =>
  new Promise<Result>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** A package laid out as installed, with the bundle built by the build's own script. */
let pkg = ""
let home = ""
let config = ""
const bin = () => Path.join(pkg, "bin", "antler.js")
const bundleFile = () => Path.join(pkg, "dist", "cli", "main.cjs")

/** `node [nodeArgs] bin/antler.js args` in the package, over its own data directory (memory off). */
const antler = (args: ReadonlyArray<string>, options: { nodeArgs?: ReadonlyArray<string>; env?: Record<string, string> } = {}) =>
  Effect.promise(() =>
    spawn([...(options.nodeArgs ?? []), bin(), ...args], {
      cwd: home,
      env: childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config, ...options.env })
    })
  )

beforeAll(() => {
  pkg = tempDir("antler-bundle-pkg-")
  home = tempDir("antler-bundle-home-")
  config = Path.join(home, "config.yaml")
  Fs.writeFileSync(config, "memory:\n  enabled: false\n")
  Fs.copyFileSync(Path.join(ROOT, "package.json"), Path.join(pkg, "package.json"))
  Fs.mkdirSync(Path.join(pkg, "bin"))
  for (const file of ["antler.js", "cli-loader.js", "choose.js"]) {
    Fs.copyFileSync(Path.join(ROOT, "bin", file), Path.join(pkg, "bin", file))
  }
  Fs.symlinkSync(Path.join(ROOT, "node_modules"), Path.join(pkg, "node_modules"), "dir")
  const built = ChildProcess.spawnSync(process.execPath, [Path.join(ROOT, "scripts", "bundle-cli.mjs"), Path.join(pkg, "dist", "cli")], {
    cwd: ROOT,
    encoding: "utf8"
  })
  assert.strictEqual(built.status, 0, `${built.stdout}${built.stderr}`)
  assert.isTrue(Fs.existsSync(`${bundleFile()}.cache`), built.stdout)
}, SLOW)

describe("the bundled CLI (bin/antler.js over dist/cli/)", () => {
  it.live("--version is answered by bin/ alone, and the bundled program says the same; --help lists every command", () =>
    Effect.gen(function*() {
      const fast = yield* antler(["--version"])
      assert.strictEqual(fast.code, 0, fast.stderr)
      assert.strictEqual(fast.stdout, `antler ${VERSION}\n`)
      // with another option, the program answers (there is no dist/programs/ here: it is the bundle)
      const program = yield* antler(["--version", "--log-level", "error"])
      assert.strictEqual(program.code, 0, program.stderr)
      assert.strictEqual(program.stdout, fast.stdout)
      const help = yield* antler(["--help"])
      assert.strictEqual(help.code, 0, help.stderr)
      for (const command of ["run", "threads", "upload", "tools", "skills", "memory", "demo"]) {
        assert.match(help.stdout, new RegExp(`^  (antler )?${command}\\b`, "m"))
      }
    }), SLOW)

  it.live("its code cache is used by the same Node; a stale or damaged cache is ignored and the program still runs", () =>
    Effect.gen(function*() {
      const loader = Path.join(pkg, "bin", "cli-loader.js")
      // loads the bundle as bin/ does and reports whether V8 took the cache (undefined: none was offered)
      const probe = () =>
        Effect.promise(() =>
          spawn([
            "--input-type=module",
            "--eval",
            `process.argv = [process.execPath, "antler", "--version", "--log-level", "error"]
             const { loadCli } = await import(${JSON.stringify(loader)})
             process.stderr.write(JSON.stringify(loadCli(${JSON.stringify(bundleFile())})) + "\\n")`
          ], { cwd: home, env: childEnv({ ANTLER_HOME: home }) })
        )
      const fresh = yield* probe()
      assert.strictEqual(fresh.stdout, `antler ${VERSION}\n`, fresh.stderr)
      assert.deepStrictEqual(JSON.parse(fresh.stderr), { cacheRejected: false })

      const cache = `${bundleFile()}.cache`
      const stampFile = Path.join(Path.dirname(bundleFile()), "build.json")
      const saved = Fs.readFileSync(cache)
      const stamp = Fs.readFileSync(stampFile, "utf8")
      try {
        // file times decide nothing: a cache older than its bundle (as npm may unpack them) is still offered
        const later = new Date(Fs.statSync(cache).mtimeMs + 60_000)
        Fs.utimesSync(bundleFile(), later, later)
        assert.deepStrictEqual(JSON.parse((yield* probe()).stderr), { cacheRejected: false })
        // a stamp of another build (the bundle rebuilt, its cache not): the cache is not offered
        Fs.writeFileSync(stampFile, JSON.stringify({ ...JSON.parse(stamp), id: "0123456789abcdef" }))
        const stale = yield* probe()
        assert.strictEqual(stale.stdout, `antler ${VERSION}\n`, stale.stderr)
        assert.deepStrictEqual(JSON.parse(stale.stderr), {})
        // bytes that are not this bundle's cache: V8 refuses them
        Fs.writeFileSync(stampFile, stamp)
        Fs.writeFileSync(cache, saved.subarray(0, 1000))
        const damaged = yield* probe()
        assert.strictEqual(damaged.stdout, `antler ${VERSION}\n`, damaged.stderr)
        assert.deepStrictEqual(JSON.parse(damaged.stderr), { cacheRejected: true })
      } finally {
        Fs.writeFileSync(cache, saved)
        Fs.writeFileSync(stampFile, stamp)
      }
    }), SLOW)

  it.live("a run against the scripted server answers and saves its thread; no converter, MCP SDK or tokenizer is loaded", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["Hello from the bundle."])
      const modules = Path.join(tempDir("antler-bundle-modules-"), "modules.txt")
      const recorder = Path.join(Path.dirname(modules), "record.cjs")
      // every CommonJS module the process loaded (the bundle loads its externals with require)
      Fs.writeFileSync(
        recorder,
        `process.on("exit", () => require("node:fs").writeFileSync(${
          JSON.stringify(modules)
        }, Object.keys(require.cache).join("\\n")))\n`
      )
      const run = yield* antler(["run", "--base-url", server.url, "--api-key", "x", "--thread", "b1", "Say hello."], {
        nodeArgs: ["--require", recorder]
      })
      assert.strictEqual(run.code, 0, run.stderr)
      assert.include(run.stdout, "Hello from the bundle.")
      assert.strictEqual(server.requests.length, 1)
      assert.include(JSON.stringify(server.requests[0]!.messages), "Say hello.")
      const loaded = Fs.readFileSync(modules, "utf8").split("\n")
      // the store's driver is required from node_modules (so the list is complete), the lazy packages are not
      assert.isTrue(loaded.some((file) => file.includes("/node_modules/better-sqlite3/")), loaded.join("\n"))
      for (const name of LAZY) {
        assert.isFalse(loaded.some((file) => file.includes(`/node_modules/${name}/`)), `${name} was loaded`)
      }

      const list = yield* antler(["threads", "list", "--json"])
      assert.strictEqual(list.code, 0, list.stderr)
      assert.deepInclude(JSON.parse(list.stdout).map((t: { thread_id: string; status: string }) => [t.thread_id, t.status]), [
        "b1",
        "success"
      ])
      const show = yield* antler(["threads", "show", "b1"])
      assert.strictEqual(show.code, 0, show.stderr)
      assert.include(show.stdout, "Hello from the bundle.")
    })), SLOW)

  it.live("uploads are converted by each converter's library (HTML, DOCX, XLSX, PPTX, PDF)", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = tempDir("antler-bundle-docs-")
      const files: Record<string, Uint8Array | string> = {
        "page.html": "<h1>Field guide</h1><p>Bring water.</p><table><tr><th>Item</th></tr><tr><td>Tent</td></tr></table>",
        "report.docx": yield* Effect.promise(() =>
          docx.Packer.toBuffer(
            new docx.Document({
              sections: [{
                children: [
                  new docx.Paragraph({ text: "Quarterly Report", heading: docx.HeadingLevel.HEADING_1 }),
                  new docx.Paragraph({ text: "Revenue grew." })
                ]
              }]
            })
          )
        ),
        "sales.xlsx": yield* Effect.promise(async () => {
          const workbook = new ExcelJS.Workbook()
          workbook.addWorksheet("Sales").addRows([["Item", "Qty"], ["Apples", 3]])
          return new Uint8Array(await workbook.xlsx.writeBuffer())
        }),
        "deck.pptx": yield* Effect.promise(async () => {
          const deck = new PptxGenJS()
          deck.addSlide().addText("Launch plan", { x: 1, y: 1, w: 8, h: 1 })
          return new Uint8Array(await deck.write({ outputType: "nodebuffer" }) as Buffer)
        }),
        "study.pdf": yield* Effect.promise(async () => {
          const pdf = await PDFDocument.create()
          const font = await pdf.embedFont(StandardFonts.Helvetica)
          pdf.addPage().drawText("Introduction to the study", { x: 50, y: 700, font, size: 12 })
          return pdf.save()
        })
      }
      for (const [name, bytes] of Object.entries(files)) Fs.writeFileSync(Path.join(dir, name), bytes)
      const server = yield* ScriptedChatServer.start(["I read them."])
      const up = yield* antler([
        "run",
        "--base-url",
        server.url,
        "--api-key",
        "x",
        "--thread",
        "docs1",
        ...Object.keys(files).flatMap((name) => ["--file", Path.join(dir, name)]),
        "Summarise these."
      ])
      assert.strictEqual(up.code, 0, up.stderr)
      // the model was shown each document's outline, from its Markdown copy
      const sent = JSON.stringify(server.requests[0]!.messages)
      for (const heading of ["Field guide", "Quarterly Report", "Sales", "Slide 1: Launch plan", "Page 1"]) {
        assert.include(sent, heading)
      }
      const uploads = Path.join(home, "users", "default", "threads", "docs1", "user-data", "uploads")
      const markdown = (name: string) => Fs.readFileSync(Path.join(uploads, name), "utf8")
      assert.match(markdown("page.md"), /^# Field guide\n[\s\S]*\| Item \|\n\| --- \|\n\| Tent \|/)
      assert.match(markdown("report.md"), /^# Quarterly Report\n\nRevenue grew\./)
      assert.match(markdown("sales.md"), /^## Sales\n\n\| Item \| Qty \|\n\| --- \| --- \|\n\| Apples \| 3 \|/)
      assert.include(markdown("deck.md"), "## Slide 1: Launch plan")
      assert.match(markdown("study.md"), /^## Page 1\n\nIntroduction to the study/)
    })), SLOW)

  it.live("an MCP server's tools are listed (the SDK is loaded when the server starts)", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-bundle-mcp-")
      const mcpConfig = Path.join(dir, "config.yaml")
      Fs.writeFileSync(mcpConfig, "memory:\n  enabled: false\n")
      Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
        mcpServers: { everything: { type: "stdio", command: process.execPath, args: [Servers.EVERYTHING, "stdio"] } }
      }))
      const tools = yield* antler(["tools", "list", "--config", mcpConfig])
      assert.strictEqual(tools.code, 0, tools.stderr)
      assert.match(tools.stdout, /everything_echo\s+mcp:everything/)
      assert.match(tools.stdout, /everything\s+stdio\s+running, \d+ tools/)
    }), SLOW)

  it.live("bin/ runs the bundle when its build's stamp is there, whatever the file times; else dist/programs/", () =>
    Effect.gen(function*() {
      const layout = tempDir("antler-bundle-choice-")
      Fs.mkdirSync(Path.join(layout, "bin"))
      for (const file of ["antler.js", "cli-loader.js", "choose.js"]) {
        Fs.copyFileSync(Path.join(pkg, "bin", file), Path.join(layout, "bin", file))
      }
      Fs.copyFileSync(Path.join(pkg, "package.json"), Path.join(layout, "package.json"))
      const run = (...args: ReadonlyArray<string>) =>
        Effect.promise(() => spawn([Path.join(layout, "bin", "antler.js"), ...args], { cwd: layout, env: childEnv({}) }))

      const none = yield* run("threads", "list")
      assert.strictEqual(none.code, 2)
      assert.include(none.stderr, "antler is not built yet")
      assert.include(none.stderr, "npm run build")

      // stand-ins for the two programs, each saying which it is
      Fs.mkdirSync(Path.join(layout, "dist", "programs"), { recursive: true })
      Fs.mkdirSync(Path.join(layout, "dist", "cli"), { recursive: true })
      const compiled = Path.join(layout, "dist", "programs", "main.js")
      const bundled = Path.join(layout, "dist", "cli", "main.cjs")
      Fs.writeFileSync(compiled, "process.stdout.write(\"compiled \" + process.argv.slice(2).join(\" \"))\n")
      Fs.writeFileSync(bundled, "process.stdout.write(\"bundled \" + process.argv.slice(2).join(\" \"))\n")
      // a bundle whose build did not finish (no stamp) is not run
      assert.strictEqual((yield* run("threads", "list")).stdout, "compiled threads list")
      Fs.writeFileSync(Path.join(layout, "dist", "cli", "build.json"), JSON.stringify({ id: "00aa", version: VERSION }))
      const at = (file: string, seconds: number) => Fs.utimesSync(file, seconds, seconds)
      at(compiled, 1_000_000)
      at(bundled, 2_000_000)
      assert.strictEqual((yield* run("threads", "list")).stdout, "bundled threads list")
      // older than the compiled program, as npm's unpacking may leave it: still the bundle
      at(bundled, 999_999.5)
      assert.strictEqual((yield* run("threads", "list")).stdout, "bundled threads list")
      const forced = yield* Effect.promise(() =>
        spawn([Path.join(layout, "bin", "antler.js"), "threads", "list"], {
          cwd: layout,
          env: childEnv({ ANTLER_CLI: "compiled" })
        })
      )
      assert.strictEqual(forced.stdout, "compiled threads list")
      Fs.rmSync(compiled)
      assert.strictEqual((yield* run("threads", "list")).stdout, "bundled threads list")
      // --version alone never loads either
      assert.strictEqual((yield* run("--version")).stdout, `antler ${VERSION}\n`)
    }), SLOW)
})

/**
 * `antler serve` started from the bundle (`node bin/antler.js`, a clone after `npm ci`), from the compiled program
 * (`dist/programs/main.js`, when there is no bundle) and from the package as npm installs it (`npm pack` of that layout, unpacked into a project's node_modules): the gateway answers `/`
 * with its web page, whose files the package ships under `src/` (the bundle lives in `dist/cli/`).
 */
describe("the web page of antler serve, from the bundle, the compiled program and the installed package", () => {
  /** `node <bin> serve --port 0` from `cwd`; resolves with its URL once it listens, and the child to stop. */
  const serve = (binFile: string, cwd: string, modelUrl: string) =>
    Effect.acquireRelease(
      Effect.promise(() =>
        new Promise<{ url: string; child: ChildProcess.ChildProcess }>((resolve, reject) => {
          const child = ChildProcess.spawn(process.execPath, [
            binFile, "serve", "--port", "0", "--base-url", modelUrl, "--api-key", "x", "--config", config
          ], { cwd, env: childEnv({ ANTLER_HOME: home }), stdio: ["ignore", "pipe", "pipe"] })
          let output = ""
          child.stdout.on("data", (chunk: Buffer) => {
            output += chunk.toString("utf8")
            const match = /listening on (http:\/\/\S+)/.exec(output)
            if (match !== null) resolve({ url: match[1]!, child })
          })
          child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
          child.on("exit", (code, signal) => reject(new Error(`antler serve exited (${code ?? signal}): ${output}`)))
        })
      ),
      ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
    )

  const page = (url: string) =>
    Effect.promise(async () => {
      const response = await fetch(`${url}/`)
      return { status: response.status, type: response.headers.get("content-type"), body: await response.text() }
    })

  const shipped = () => Fs.readFileSync(Path.join(ROOT, "src", "programs", "gateway", "web", "index.html"), "utf8")

  /** The package's shipped `src/` beside its bundle (what a clone has, and what `files` puts in the tarball). */
  const withSources = () => {
    if (!Fs.existsSync(Path.join(pkg, "src"))) Fs.cpSync(Path.join(ROOT, "src"), Path.join(pkg, "src"), { recursive: true })
  }

  it.live("started through bin/antler.js over dist/cli/main.cjs, GET / answers the page", () =>
    Effect.scoped(Effect.gen(function*() {
      withSources()
      const model = yield* ScriptedChatServer.start([])
      const { url } = yield* serve(bin(), home, model.url)
      const answer = yield* page(url)
      assert.strictEqual(answer.status, 200, answer.body)
      assert.strictEqual(answer.type, "text/html; charset=utf-8")
      assert.strictEqual(answer.body, shipped())
    })), SLOW)

  it.live("started through bin/antler.js over dist/programs/main.js (the compiled program, no bundle), GET / answers the page", () =>
    Effect.scoped(Effect.gen(function*() {
      // the compiled layout: each module of src/ as its own file under dist/ (as tsc lays them out; esbuild
      // transpiles them in a second, where tsc takes a minute), package.json, bin/, src/ and node_modules
      const compiled = tempDir("antler-compiled-pkg-")
      Fs.copyFileSync(Path.join(ROOT, "package.json"), Path.join(compiled, "package.json"))
      Fs.cpSync(Path.join(pkg, "bin"), Path.join(compiled, "bin"), { recursive: true })
      Fs.cpSync(Path.join(ROOT, "src"), Path.join(compiled, "src"), { recursive: true })
      Fs.symlinkSync(Path.join(ROOT, "node_modules"), Path.join(compiled, "node_modules"), "dir")
      const modules = Fs.readdirSync(Path.join(ROOT, "src"), { recursive: true, encoding: "utf8" })
        .filter((file) => file.endsWith(".ts"))
        .map((file) => Path.join(ROOT, "src", file))
      const esbuild = yield* Effect.promise(() => import("esbuild"))
      yield* Effect.promise(() =>
        esbuild.build({
          entryPoints: modules,
          outdir: Path.join(compiled, "dist"),
          outbase: Path.join(ROOT, "src"),
          bundle: false,
          format: "esm",
          platform: "node",
          target: "node20",
          logLevel: "warning"
        })
      )
      assert.isTrue(Fs.existsSync(Path.join(compiled, "dist", "programs", "main.js")))
      assert.isFalse(Fs.existsSync(Path.join(compiled, "dist", "cli")))
      const model = yield* ScriptedChatServer.start([])
      const { url } = yield* serve(Path.join(compiled, "bin", "antler.js"), home, model.url)
      const answer = yield* page(url)
      assert.strictEqual(answer.status, 200, answer.body)
      assert.strictEqual(answer.type, "text/html; charset=utf-8")
      assert.strictEqual(answer.body, shipped())
    })), SLOW)

  it.live("started from the package npm pack made, installed into a project's node_modules, GET / answers the page", () =>
    Effect.scoped(Effect.gen(function*() {
      withSources()
      const project = tempDir("antler-installed-")
      // the tarball holds what package.json's `files` lists (no prepare script: the bundle is built already)
      const packed = ChildProcess.spawnSync("npm", ["pack", "--ignore-scripts", "--pack-destination", project], {
        cwd: pkg,
        encoding: "utf8"
      })
      assert.strictEqual(packed.status, 0, `${packed.stdout}${packed.stderr}`)
      const tarball = Path.join(project, packed.stdout.trim().split("\n").at(-1)!)
      const installed = Path.join(project, "node_modules", "antler")
      Fs.mkdirSync(installed, { recursive: true })
      const unpacked = ChildProcess.spawnSync("tar", ["xzf", tarball, "--strip-components=1", "-C", installed], {
        encoding: "utf8"
      })
      assert.strictEqual(unpacked.status, 0, unpacked.stderr)
      // its dependencies, as npm would have installed them
      Fs.symlinkSync(Path.join(ROOT, "node_modules"), Path.join(installed, "node_modules"), "dir")
      // npm's unpacking may leave the bundle older than the rest (than the compiled program, when there is one):
      // the bundle still runs, and its code cache is still offered
      Fs.utimesSync(Path.join(installed, "dist/cli/main.cjs"), 1_000_000, 1_000_000)
      const chosen = ChildProcess.spawnSync(process.execPath, [
        "--input-type=module",
        "--eval",
        `const { choose } = await import(${JSON.stringify(pathToFileURL(Path.join(installed, "bin/choose.js")).href)})
         process.stdout.write(choose(new URL(${JSON.stringify(pathToFileURL(`${installed}/`).href)})).kind)`
      ], { encoding: "utf8" })
      assert.strictEqual(chosen.stdout, "bundle", chosen.stderr)
      const model = yield* ScriptedChatServer.start([])
      const { url } = yield* serve(Path.join(installed, "bin", "antler.js"), project, model.url)
      const answer = yield* page(url)
      assert.strictEqual(answer.status, 200, answer.body)
      assert.strictEqual(answer.type, "text/html; charset=utf-8")
      assert.strictEqual(answer.body, shipped())
    })), SLOW)
})
