/**
 * The house limits of src/ (docs/architecture.md, STYLE): no line wider than 120 columns (counted in characters,
 * as an editor shows them), and no module longer than 600 lines (a longer one is split by concept, not grown).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const SRC = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../src")
const MAX_COLUMNS = 120
const MAX_LINES = 600

const files = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? files(Path.join(dir, entry.name))
      : /\.(ts|js|css|html)$/.test(entry.name)
      ? [Path.join(dir, entry.name)]
      : []
  )

const lines = files(SRC).map((file) => ({
  file: Path.relative(SRC, file),
  lines: Fs.readFileSync(file, "utf8").split("\n")
}))

describe("src/ sizes", () => {
  it("has no line wider than 120 columns", () => {
    const wide = lines.flatMap(({ file, lines }) =>
      lines.flatMap((line, i) => [...line].length > MAX_COLUMNS ? [`${file}:${i + 1} (${[...line].length})`] : [])
    )
    assert.deepStrictEqual(wide, [])
  })

  it("has no module longer than 600 lines", () => {
    const long = lines.flatMap(({ file, lines }) => lines.length > MAX_LINES ? [`${file} (${lines.length})`] : [])
    assert.deepStrictEqual(long, [])
  })
})
