import { assert, describe, it } from "@effect/vitest"
import * as Synopsis from "../../../src/middleware/internal/Synopsis.js"

const SAVED =
  /^\[Full (\S+) output saved to (\/mnt\/user-data\/outputs\/\.tool-results\/\S+) \((\d+) chars, ~(\d+) tokens\)\.\]$/

describe("typed synopsis", () => {
  it("recognises each kind of output", () => {
    const cases: Array<[string, Synopsis.PreviewKind]> = [
      [JSON.stringify({ items: [{ id: 1, name: "a" }], total: 1 }), "json"],
      ["{\"a\":1}\n{\"a\":2}\n{\"a\":3}", "json"],
      ["<?xml version=\"1.0\"?><feed><entry>a</entry><entry>b</entry></feed>", "xml"],
      ["name\tsize\n" + Array.from({ length: 8 }, (_, i) => `f${i}\t${i}`).join("\n"), "tsv"],
      ["id,city,pop\n" + Array.from({ length: 8 }, (_, i) => `${i},"Paris, FR",${i * 10}`).join("\n"), "csv"],
      ["server:\n  port: 80\n  host: x\nworkers: 4\nlogging:\n  level: info\n", "yaml"],
      ["import os\n\ndef main():\n    return os.getcwd()\n", "code"],
      ["INFO: started\nWARN: slow\nERROR: failed\nnothing else to say here", "text"],
      ["total 8\n-rw-r--r-- 1 root root 0 a\n-rw-r--r-- 1 root root 0 b", "text"],
      ["\u0000\u0001binary", "unknown"],
      ["", "unknown"]
    ]
    for (const [text, kind] of cases) assert.strictEqual(Synopsis.synopsisOf(text).kind, kind, text.slice(0, 40))
  })

  it("describes JSON by its keys, paths and sample values", () => {
    const s = Synopsis.synopsisOf(JSON.stringify({ users: [{ id: 1, email: "a@b.c" }], "next-page": null }))
    assert.deepStrictEqual(s.summary, ["A JSON object with 2 top-level keys.", "Top-level keys: users, next-page"])
    assert.include(s.structure, "$.users: array of 1, first item object")
    assert.include(s.notable, "$.users[0].id: 1")
    assert.include(s.notable, "$[\"next-page\"]: null")
  })

  it("renders a preview that names the file, the kind, a raw sample and how to read the rest", () => {
    const text = JSON.stringify(Array.from({ length: 500 }, (_, i) => ({ i, v: "value" })), null, 1)
    const virtualPath = "/mnt/user-data/outputs/.tool-results/api-0123456789ab.txt"
    const preview = Synopsis.renderPreview(text, { tool: "api", virtualPath, headChars: 200, tailChars: 100 })
    const [first, second] = preview.split("\n")
    assert.deepStrictEqual(SAVED.exec(first!)?.slice(1), [
      "api",
      virtualPath,
      String(text.length),
      String(Math.floor(text.length / 4))
    ])
    assert.isTrue(second!.startsWith("[Preview kind: json."))
    assert.include(preview, "A JSON array of 500 items.")
    assert.include(preview, "Raw sample")
    assert.include(preview, text.slice(0, 50))
    assert.match(preview, /Access:\n- .*read_file.*start_line.*end_line/)
    assert.isBelow(preview.length, 2000)
  })
})
