/**
 * Profiles of the bundled CLI read through its source map: a frame of the bundle is charged to the module it
 * was bundled from, and the bundle's body (the CommonJS wrapper bin/cli-loader.js compiles) to the module whose
 * top-level code was running. The bundle here is a real esbuild bundle of two small modules.
 */
import { assert, describe, it } from "@effect/vitest"
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import type { CpuProfile } from "../../bench/cpuProfile.js"
import * as P from "../../bench/cpuProfile.js"
import * as S from "../../bench/sourceMap.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const APP = `import { helper } from "dep"

export const table = helper(3)

export function alpha(n: number): number {
  return n * 2
}
`
const DEP = `exports.helper = function helper(n) {
  const rows = []
  for (let i = 0; i < n; i++) rows.push(i)
  return rows
}
`

/** Bundles app.ts (importing the CommonJS package `dep`) as bundle-cli.mjs does: CommonJS, external map. */
const bundle = () => {
  const root = tempDir("antler-sourcemap-")
  Fs.mkdirSync(Path.join(root, "src"))
  Fs.mkdirSync(Path.join(root, "node_modules", "dep"), { recursive: true })
  Fs.writeFileSync(Path.join(root, "src", "app.ts"), APP)
  Fs.writeFileSync(Path.join(root, "node_modules", "dep", "index.js"), DEP)
  Fs.writeFileSync(Path.join(root, "node_modules", "dep", "package.json"), JSON.stringify({ name: "dep", main: "index.js" }))
  const outfile = Path.join(root, "dist", "cli", "main.cjs")
  esbuild.buildSync({
    absWorkingDir: root,
    entryPoints: ["src/app.ts"],
    outfile,
    bundle: true,
    format: "cjs",
    platform: "node",
    sourcemap: "external",
    sourcesContent: false,
    logLevel: "silent"
  })
  const code = Fs.readFileSync(outfile, "utf8")
  const map = JSON.parse(Fs.readFileSync(`${outfile}.map`, "utf8")) as S.SourceMapV3
  /** The 0-based line and column of the first occurrence of `text` in the bundle. */
  const at = (text: string) => {
    const index = code.indexOf(text)
    assert.isAbove(index, -1, `${text} is not in the bundle`)
    const before = code.slice(0, index).split("\n")
    return { line: before.length - 1, column: before.at(-1)!.length }
  }
  return { root, outfile, map, at }
}

describe("source maps", () => {
  it("decode VLQ segments: fields are relative to the previous segment, columns reset on each line", () => {
    // "AAAA" = [0,0,0,0]; "CAAC" = [1,0,0,1]; ";" ends the line; "AACA" = [0,0,1,0]
    const lines = S.decodeMappings("AAAA,CAAC;AACA")
    assert.deepStrictEqual(lines, [
      [{ column: 0, source: 0, line: 0, sourceColumn: 0 }, { column: 1, source: 0, line: 0, sourceColumn: 1 }],
      [{ column: 0, source: 0, line: 1, sourceColumn: 1 }]
    ])
    // a negative delta and a multi-digit value: "gB" = 16, "D" = -1
    assert.deepStrictEqual(S.decodeMappings("gBAgBD")[0], [{ column: 16, source: 0, line: 16, sourceColumn: -1 }])
  })

  it("map a position of an esbuild bundle back to the file and line it came from", () => {
    const { outfile, map, at } = bundle()
    const mapper = S.makeMapper(map, `${outfile}.map`)
    const alpha = at("function alpha")
    const mappedAlpha = mapper(alpha.line, alpha.column)!
    assert.strictEqual(mappedAlpha.url, pathToFileURL(Path.join(Path.dirname(outfile), "../../src/app.ts")).href)
    assert.strictEqual(mappedAlpha.line, APP.split("\n").findIndex((l) => l.includes("function alpha")))
    const loop = at("for (let i = 0")
    const mappedLoop = mapper(loop.line, loop.column)!
    assert.match(mappedLoop.url, /\/node_modules\/dep\/index\.js$/)
    assert.strictEqual(mappedLoop.line, 2)
  })

  it("a profile of the bundle is summarised by the modules bundled in it", () => {
    const { root, outfile, map, at } = bundle()
    const url = pathToFileURL(outfile).href
    const loop = at("for (let i = 0")
    const alpha = at("return n * 2")
    const frame = (functionName: string, line: number, column: number) =>
      ({ functionName, url, lineNumber: line, columnNumber: column })
    // the loader's wrapper function is the body (line 1, column 10); under it dep's helper runs at top level,
    // and later alpha runs from the event loop
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: "(root)", url: "", lineNumber: -1, columnNumber: -1 }, children: [2, 5] },
        { id: 2, callFrame: frame("", 0, 10), children: [3] },
        { id: 3, callFrame: frame("helper", loop.line, loop.column) },
        { id: 5, callFrame: frame("alpha", alpha.line, alpha.column) }
      ],
      startTime: 0,
      endTime: 600,
      samples: [2, 3, 5],
      timeDeltas: [0, 100, 300]
    }
    const mapped = S.mapProfile(profile, url, map, `${outfile}.map`)
    assert.deepStrictEqual(mapped.nodes[1]!.callFrame, frame("", 0, 0))
    const s = P.summarize([{ profile: mapped }], { root, bundles: [url] })
    assert.deepStrictEqual(s.phases, { load: 0, evaluate: 0.4, run: 0.2, node: 0, gc: 0, program: 0, idle: 0 })
    assert.deepStrictEqual(s.modules.map((m) => [m.module, m.package, m.evaluateMs]), [
      ["dep/index.js", "dep", 0.3],
      ["dist/cli/main.cjs", "antler", 0.1]
    ])
    assert.deepInclude(s.packages, { package: "antler", evaluateMs: 0.1, runMs: 0.2, modulesSampled: 1 })
    assert.deepInclude(s.functions, { function: "alpha", module: "src/app.ts:6", selfMs: 0.2 })
    // unmapped, the wrapper is not seen as a module body, and nothing is charged to the bundled modules
    const raw = P.summarize([{ profile }], { root })
    assert.deepInclude(raw.phases, { evaluate: 0, run: 0.6 })
    assert.deepStrictEqual(raw.modules, [])
  })
})
