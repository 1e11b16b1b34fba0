/**
 * The file names an MCP result names, matched as DeerFlow's `deerflow/mcp/tools.py` matches them (its cases from
 * tests/test_mcp_file_migration.py): bare names of the files a call changed, relative paths in free text, and
 * the files two snapshots tell apart, a snapshot cut at its bound included.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as FileNames from "../../../src/layers/mcp/FileNames.js"

const WS = "/mnt/user-data/workspace"

describe("FileNames.replaceBareNames", () => {
  it("a bare name is the one file of that name the call changed; a sentence's period stays", () => {
    assert.strictEqual(
      FileNames.replaceBareNames("Saved as page-2026-06-16T10-21-46-864Z.yml.", [
        `${WS}/page-2026-06-16T10-21-46-864Z.yml`
      ]),
      `Saved as ${WS}/page-2026-06-16T10-21-46-864Z.yml.`
    )
    assert.strictEqual(
      FileNames.replaceBareNames("wrote a.png and b.png (a.png twice)", [`${WS}/shots/a.png`, `${WS}/b.png`]),
      `wrote ${WS}/shots/a.png and ${WS}/b.png (${WS}/shots/a.png twice)`
    )
  })

  it("no changed file, two changed files of one name, a longer name, another case, a folder: left as they are", () => {
    assert.strictEqual(FileNames.replaceBareNames("Saved as page.yml", []), "Saved as page.yml")
    assert.strictEqual(
      FileNames.replaceBareNames("Saved as page.yml", [`${WS}/a/page.yml`, `${WS}/b/page.yml`]),
      "Saved as page.yml"
    )
    const one = [`${WS}/page.yml`]
    for (const text of ["Backup is page.yml.bak", "saved as Page.yml", "nested page.yml/inner.txt path",
      "old-page.yml", "see /tmp/page.yml", "my_page.yml", "tmp.page.yml"]) {
      assert.strictEqual(FileNames.replaceBareNames(text, one), text)
    }
  })

  it("the longer of two names that end alike wins; a name with regex characters is taken literally", () => {
    assert.strictEqual(
      FileNames.replaceBareNames("report final.pdf, final.pdf", [`${WS}/report final.pdf`, `${WS}/out/final.pdf`]),
      `${WS}/report final.pdf, ${WS}/out/final.pdf`
    )
    assert.strictEqual(
      FileNames.replaceBareNames("a+b (1).txt axb (1)xtxt", [`${WS}/a+b (1).txt`]),
      `${WS}/a+b (1).txt axb (1)xtxt`
    )
    // (a name in another script is bounded by letters of that script too)
    assert.strictEqual(
      FileNames.replaceBareNames("报告.md 总报告.md", [`${WS}/报告.md`]),
      `${WS}/报告.md 总报告.md`
    )
  })

  const name = FastCheck.constantFrom("page.yml", "a.png", "shot.png", "报告.md", "x-1.txt", "page.yml.bak")
  const fragment = FastCheck.oneof(name, FastCheck.constantFrom(" ", ".", "/", "-", "(", ")", "\n", "saved "))
  const text = FastCheck.array(fragment, { maxLength: 12 }).map((parts) => parts.join(""))
  const files = FastCheck.uniqueArray(
    FastCheck.tuple(FastCheck.constantFrom("", "a/", "b/c/"), name).map(([dir, n]) => `${WS}/${dir}${n}`),
    { maxLength: 5 }
  )

  it.prop(
    "only swaps a name for its one file: put back, the text is as it was; done twice, as done once",
    { text, files },
    ({ files, text }) => {
      const out = FileNames.replaceBareNames(text, files)
      let back = out
      for (const file of [...files].sort((a, b) => b.length - a.length)) {
        back = back.replaceAll(file, file.slice(file.lastIndexOf("/") + 1))
      }
      assert.strictEqual(back, text)
      assert.strictEqual(FileNames.replaceBareNames(out, files), out)
      // a name two files share is never taken for either (the file's whole path: `page.yml.bak`'s holds
      // `page.yml`'s)
      const names = files.map((f) => f.slice(f.lastIndexOf("/") + 1))
      const whole = (file: string) => new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?!\\.?[\\w-])`)
      for (const file of files) {
        const n = file.slice(file.lastIndexOf("/") + 1)
        if (names.filter((m) => m === n).length > 1) assert.notMatch(out, whole(file))
      }
    }
  )
})

describe("FileNames.pathTokens and replacePaths", () => {
  it("relative paths with a folder, trailing punctuation and markup left off; absolute paths are not tokens", () => {
    assert.deepStrictEqual(
      FileNames.pathTokens(
        "Saved temp/a.png and ./b.png, ../c.png; see ![shot](temp/a.png) or /tmp/x.png file:///y.png"
      ),
      ["temp/a.png", "./b.png", "../c.png"]
    )
    assert.deepStrictEqual(FileNames.pathTokens("Saved as page.yml. https://example.com/a.png"), [])
  })

  it("each found path is replaced wherever it is named, its punctuation kept; the others stay", () => {
    const found = new Map([
      ["temp/a.png", `${WS}/temp/a.png`],
      [".playwright-mcp/page.png", `${WS}/.playwright-mcp/page.png`]
    ])
    assert.strictEqual(
      FileNames.replacePaths("See ![shot](temp/a.png) now, temp/a.png. temp/never.png", found),
      `See ![shot](${WS}/temp/a.png) now, ${WS}/temp/a.png. temp/never.png`
    )
    assert.strictEqual(
      FileNames.replacePaths("- [Screenshot](.playwright-mcp/page.png)\npath: '.playwright-mcp/page.png'", found),
      `- [Screenshot](${WS}/.playwright-mcp/page.png)\npath: '${WS}/.playwright-mcp/page.png'`
    )
  })

  it.prop(
    "tokens are relative and a token maps to what is found for it: nothing else in the text changes",
    { text: FastCheck.string({ maxLength: 60 }) },
    ({ text }) => {
      const tokens = FileNames.pathTokens(text)
      for (const token of tokens) assert.isFalse(token.startsWith("/") || token.startsWith("file:"))
      assert.strictEqual(FileNames.replacePaths(text, new Map()), text)
      assert.strictEqual(FileNames.replacePaths(text, new Map(tokens.map((t) => [t, t]))), text)
    }
  )
})

describe("FileNames.changed", () => {
  const snap = (files: Record<string, string>, cut?: string): FileNames.Snapshot =>
    cut === undefined ? { files: new Map(Object.entries(files)) } : { files: new Map(Object.entries(files)), cut }

  it("created and modified files count; a file left alone or deleted does not", () => {
    const before = snap({ "existing.txt": "1:3", "stable.txt": "1:4", "victim.txt": "1:1" })
    const after = snap({ "existing.txt": "2:11", "stable.txt": "1:4", "created.txt": "3:7" })
    assert.deepStrictEqual(FileNames.changed(before, after), ["existing.txt", "created.txt"])
    assert.deepStrictEqual(FileNames.changed(before, before), [])
  })

  it("past a cut before-snapshot's last entry, a file may have been there unseen: it does not count", () => {
    const before = snap({ "a.txt": "1:1", "m/x.txt": "1:1" }, "m/x.txt")
    const after = snap({ "a.txt": "1:1", "b.txt": "2:2", "m/x.txt": "2:2", "m/y.txt": "2:2", "m/z/deep.txt": "2:2" })
    // b.txt is one level up (seen before the cut), m/x.txt changed; m/y.txt and m/z/deep.txt lie past the cut
    assert.deepStrictEqual(FileNames.changed(before, after), ["b.txt", "m/x.txt"])
  })

  it("walk order: fewer levels first, then segment by segment", () => {
    const paths = ["b/a", "a", "a/z/y", ".mcp", "a/b", "B", "b"]
    assert.deepStrictEqual([...paths].sort(FileNames.walkOrder), [".mcp", "B", "a", "b", "a/b", "b/a", "a/z/y"])
  })

  const path = FastCheck.array(FastCheck.constantFrom("a", "b", "c.txt", ".x"), { minLength: 1, maxLength: 3 })
    .map((segments) => segments.join("/"))
  const files = FastCheck.dictionary(path, FastCheck.constantFrom("1:1", "2:2"), { maxKeys: 12 })

  it.prop(
    "a complete before-snapshot: exactly the new and re-signed files; a cut one: only those it could have seen",
    { before: files, after: files, cut: FastCheck.option(path, { nil: undefined }) },
    ({ after, before, cut }) => {
      const differ = Object.keys(after).filter((p) => before[p] !== after[p])
      assert.deepStrictEqual(FileNames.changed(snap(before), snap(after)), differ)
      const seen = Object.fromEntries(
        Object.entries(before).filter(([p]) => cut === undefined || FileNames.walkOrder(p, cut) <= 0)
      )
      // (a file of `before` past the cut is unseen: its being in `after` says nothing)
      const visible = differ.filter((p) => p in seen || cut === undefined || FileNames.walkOrder(p, cut) <= 0)
      assert.deepStrictEqual(FileNames.changed(snap(seen, cut), snap(after)), visible)
    }
  )
})
