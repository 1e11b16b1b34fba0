/**
 * The package directory is found from each place its code runs: the sources, the compiled modules and the
 * bundled CLI, in a clone and in a project's node_modules (where another package.json, the project's, is above
 * it). The web page and the CLI's version are read from it (see Bundle.test.ts for `antler serve` itself).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import * as PackageRoot from "../../src/programs/PackageRoot.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const write = (file: string, text = "") => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

describe("PackageRoot.find", () => {
  it("finds the antler package from src/, dist/programs/ and dist/cli/, in a clone and when installed", () => {
    const project = tempDir("antler-root-")
    write(Path.join(project, "package.json"), JSON.stringify({ name: "my-app" }))
    const installed = Path.join(project, "node_modules", "antler")
    const clone = Path.join(tempDir("antler-clone-"), "antler")
    for (const dir of [installed, clone]) {
      write(Path.join(dir, "package.json"), JSON.stringify({ name: "antler", version: "0.1.0" }))
      // a package.json of another name under the package (a fixture) is not the package
      write(Path.join(dir, "dist", "package.json"), JSON.stringify({ type: "module" }))
      for (const module of ["src/programs/gateway/Web.ts", "dist/programs/gateway/Web.js", "dist/cli/main.cjs"]) {
        const file = Path.join(dir, module)
        write(file)
        assert.strictEqual(PackageRoot.find(file), dir, module)
        assert.strictEqual(PackageRoot.find(pathToFileURL(file).href), dir, module)
      }
    }
    // outside any antler package: none (the project's own package.json is not antler's)
    assert.isUndefined(PackageRoot.find(Path.join(project, "index.js")))
  })

  it("this code's package holds the web page's files", () => {
    assert.isTrue(Fs.existsSync(Path.join(PackageRoot.root(), "src", "programs", "gateway", "web", "index.html")))
  })
})
