/**
 * npm's `prepare` (scripts/prepare.mjs): `npm ci` in a clone builds the package once; `npx antler` in the clone,
 * which installs the clone into npx's cache and so runs `prepare` again, does not build it a second time when dist/
 * was built from the same sources; a changed source, a missing build output or a build that did not finish builds
 * again. Run on a copy of the script in a scratch package whose `tsc` and bundler record that they ran (the real
 * ones take 40 s of CPU and are tested by the build itself, test/programs/Bundle.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDirs } from "../support/fixtures.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const tempDir = tempDirs()
// each case starts node a few times, slow on a busy machine
const SLOW = 120_000

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

/** A package laid out as a clone: the real prepare and link scripts, a build that logs each tool it runs. */
const layout = (dir: string) => {
  Fs.mkdirSync(Path.join(dir, "scripts"), { recursive: true })
  for (const script of ["prepare.mjs", "link-bin.mjs"]) {
    Fs.copyFileSync(Path.join(ROOT, "scripts", script), Path.join(dir, "scripts", script))
  }
  const log = (tool: string) => `require("node:fs").appendFileSync(${JSON.stringify(Path.join(dir, "ran.log"))}, "${tool}\\n")`
  write(
    Path.join(dir, "node_modules", "typescript", "bin", "tsc"),
    `${log("tsc")}\nconst fs = require("node:fs"), p = require("node:path")\n` +
      `for (const f of ["dist/index.js", "dist/programs/main.js"]) {\n` +
      `  fs.mkdirSync(p.dirname(f), { recursive: true }); fs.writeFileSync(f, "")\n}\n`
  )
  write(
    Path.join(dir, "scripts", "bundle-cli.mjs"),
    `import * as fs from "node:fs"\n${log("bundle").replace("require(\"node:fs\")", "fs")}\n` +
      `if (fs.existsSync("fail-bundle")) process.exit(1)\n` +
      `fs.mkdirSync("dist/cli", { recursive: true }); fs.writeFileSync("dist/cli/build.json", '{"id":"x"}')\n`
  )
  write(Path.join(dir, "scripts", "bundle-externals.mjs"), "export const external = []\n")
  write(Path.join(dir, "package.json"), JSON.stringify({ name: "antler", type: "module" }))
  write(Path.join(dir, "package-lock.json"), "{}")
  write(Path.join(dir, "tsconfig.base.json"), "{}")
  write(Path.join(dir, "tsconfig.build.json"), "{}")
  write(Path.join(dir, "src", "index.ts"), "export const a = 1\n")
  write(Path.join(dir, "src", "programs", "main.ts"), "export {}\n")
  return dir
}

/** Runs prepare in `dir` (not blocking the test's worker: a spawn there stalls vitest's own messages). */
const runPrepare = (dir: string) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, [Path.join(dir, "scripts", "prepare.mjs")], { cwd: dir })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

const prepare = async (dir: string) => {
  const result = await runPrepare(dir)
  assert.strictEqual(result.status, 0, `${result.stdout}${result.stderr}`)
  const ran = Fs.existsSync(Path.join(dir, "ran.log")) ? Fs.readFileSync(Path.join(dir, "ran.log"), "utf8") : ""
  Fs.rmSync(Path.join(dir, "ran.log"), { force: true })
  return { ran: ran.trim().split("\n").filter((line) => line !== ""), stdout: result.stdout }
}

describe("prepare", () => {
  it("builds once; run again on the same sources (npx antler in the clone) it does not build again", async () => {
    const dir = layout(tempDir("antler-prepare-"))
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    const again = await prepare(dir)
    assert.deepStrictEqual(again.ran, [])
    assert.include(again.stdout, "already built from these sources")
    // and the clone's command is linked either way
    assert.strictEqual(
      Fs.readlinkSync(Path.join(dir, "node_modules", ".bin", "antler")),
      Path.join("..", "..", "bin", "antler.js")
    )
  }, SLOW)

  it("builds again when a source, a tsconfig or the lock changed, or an output is missing", async () => {
    const dir = layout(tempDir("antler-prepare-"))
    await prepare(dir)
    Fs.appendFileSync(Path.join(dir, "src", "programs", "main.ts"), "export const b = 2\n")
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    write(Path.join(dir, "src", "programs", "added.ts"), "export {}\n")
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    write(Path.join(dir, "tsconfig.build.json"), `{"compilerOptions":{}}`)
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    write(Path.join(dir, "package-lock.json"), `{"lockfileVersion":3}`)
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    Fs.rmSync(Path.join(dir, "dist", "cli", "build.json"))
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
    assert.deepStrictEqual((await prepare(dir)).ran, [])
  }, SLOW)

  it("a build that failed leaves no stamp: the next prepare on the same sources builds again", async () => {
    const dir = layout(tempDir("antler-prepare-"))
    await prepare(dir)
    Fs.appendFileSync(Path.join(dir, "src", "index.ts"), "export const c = 3\n")
    write(Path.join(dir, "fail-bundle"), "")
    assert.strictEqual((await runPrepare(dir)).status, 1)
    Fs.rmSync(Path.join(dir, "fail-bundle"))
    Fs.rmSync(Path.join(dir, "ran.log"), { force: true })
    assert.deepStrictEqual((await prepare(dir)).ran, ["tsc", "bundle"])
  })
})
