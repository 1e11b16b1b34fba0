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
    assert.deepStrictEqual(s.summary, ["JSON object with 2 top-level keys.", "Top-level keys: users, next-page"])
    assert.include(s.structure, "$.users: array length 1; first item object")
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
    assert.include(preview, "JSON array with 500 items.")
    assert.include(preview, "Raw sample (head + tail")
    assert.include(preview, text.slice(0, 50))
    assert.match(preview, /Access:\n- .*read_file.*start_line.*end_line/)
    assert.isBelow(preview.length, 2000)
  })

  // The labels DeerFlow's test_tool_output_budget_middleware.py (TestBuildPreview, TestToolOutputSynopsis) matches on
  describe("in DeerFlow's words", () => {
    const preview = (text: string, tool: string, headChars: number, tailChars: number) =>
      Synopsis.renderPreview(text, { tool, virtualPath: "/mnt/test/out.txt", headChars, tailChars })

    it("JSON: top-level keys, nested container paths and sample values, then a raw sample", () => {
      const text = "{\"meta\":{\"source\":\"unit\"},\"items\":[{\"id\":1,\"name\":\"alpha\"},{\"id\":2,\"name\":\"beta\"}]," +
        `"payload":"${"x".repeat(5000)}","tail_marker":"SHOULD_NOT_NEED_TAIL"}`
      const p = preview(text, "mcp_json", 80, 40)
      for (const words of [
        "Preview kind: json",
        "JSON object with 4 top-level keys",
        "Top-level keys: meta, items, payload, tail_marker",
        "items: array length 2",
        "$.meta.source: \"unit\"",
        "Raw sample (head + tail"
      ]) assert.include(p, words)
      const nested = preview(
        JSON.stringify({
          data: { items: Array.from({ length: 47 }, (_, i) => ({ id: i, name: `item-${i}` })), next_cursor: "c" },
          meta: { source: "unit" }
        }, null, 2),
        "api_tool",
        80,
        40
      )
      assert.include(nested, "$.data: object keys 2; keys items, next_cursor")
      assert.include(nested, "$.data.items: array length 47; first item object")
      assert.notInclude(nested.split("Access:")[0], "line ")
    })

    it("CSV, code, YAML and XML", () => {
      const csv = "name,score\n" + Array.from({ length: 10 }, (_, i) => `Ada${i},${90 + i}`).join("\n") + "\n"
      const p = preview(csv, "csv_tool", 80, 40)
      for (const words of [
        "Preview kind: csv",
        "CSV table with 10 data rows and 2 columns",
        "columns: name, score",
        "first data row: name=Ada0 | score=90"
      ]) assert.include(p, words)
      const code = Synopsis.synopsisOf(
        "import os\nfrom pathlib import Path\n\nclass Runner:\n    pass\n\ndef main():\n    return Path(os.getcwd())\n",
        "python"
      )
      assert.strictEqual(code.kind, "code")
      assert.include(code.structure[0], "line count")
      assert.isTrue(code.structure.some((item) => item.includes("imports: os, pathlib")))
      assert.includeMembers([...code.notable], ["class Runner", "def main"])
      const yaml = Synopsis.synopsisOf("name: deer\nsettings:\n  enabled: true\n  retries: 3\nitems:\n  - alpha\n")
      assert.strictEqual(yaml.kind, "yaml")
      assert.include(yaml.summary, "Top-level keys: name, settings, items")
      assert.includeMembers([...yaml.structure], ["settings: object", "items: array"])
      const xml = Synopsis.synopsisOf("<feed><entry id=\"1\"/><entry id=\"2\"/><meta/></feed>")
      assert.strictEqual(xml.kind, "xml")
      assert.include(xml.summary, "XML document with root tag feed.")
      assert.includeMembers([...xml.structure], ["root tag: feed", "entry: 2"])
    })

    it("text: an opening excerpt, and a closing one only when the text is longer than the opening", () => {
      const short = Synopsis.synopsisOf("hello world ".repeat(30))
      assert.isTrue(short.summary.some((line) => line.startsWith("Opening excerpt: ")))
      assert.isFalse(short.summary.some((line) => line.startsWith("Closing excerpt: ")))
      const long = Synopsis.synopsisOf("hello world ".repeat(100))
      assert.isTrue(long.summary.some((line) => line.startsWith("Closing excerpt: ")))
      const log = preview("log line 1\n".repeat(200), "bash", 400, 400)
      assert.include(log, "Raw sample (head + tail")
      assert.isAtLeast(log.split("log line 1").length - 1, 70)
    })
  })
})
