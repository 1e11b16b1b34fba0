/**
 * The outline of an uploaded document, which the model reads in the uploads block, on DeerFlow's cases. Mirrors
 * `test_file_conversion.py` (`TestExtractOutline`): SEC filings' bold `ITEM` and `PART` headings, their cover
 * page's bold boilerplate left out, Chinese headings, bold spans merged in a heading, split bold headings of
 * papers and not a row of years, inline bold not taken for a heading, and the cap (exactly 50 is not cut).
 * Its converter choice (pymupdf4llm or markitdown) is Python's own; Antler's conversion is DocumentConverter.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Uploads from "../../src/middleware/Uploads.js"

const outline = (markdown: string) => Uploads.extractOutline(markdown).headings

describe("an upload's outline on DeerFlow's documents", () => {
  it("Markdown and SEC headings with their line numbers; a cover page's bold boilerplate is no heading", () => {
    assert.deepStrictEqual(outline("# Chapter One\n\nSome text.\n\n## Section 1.1\n\nMore text.\n\n### Sub 1.1.1\n"), [
      { line: 1, title: "Chapter One" },
      { line: 5, title: "Section 1.1" },
      { line: 9, title: "Sub 1.1.1" }
    ])
    const filing = "Cover page text.\n\n**ITEM 1. BUSINESS**\n\nBody.\n\n**ITEM 1A. RISK FACTORS**\n"
    assert.deepStrictEqual(outline(filing), [
      { line: 3, title: "ITEM 1. BUSINESS" },
      { line: 7, title: "ITEM 1A. RISK FACTORS" }
    ])
    assert.deepStrictEqual(outline("**PART I**\n\n**PART II**\n\n**PART III**\n").map((h) => h.title), [
      "PART I", "PART II", "PART III"
    ])
    const cover = "## **UNITED STATES SECURITIES AND EXCHANGE COMMISSION**\n\n**WASHINGTON, DC 20549**\n\n" +
      "**CURRENT REPORT**\n\n**SIGNATURES**\n\n**TESLA, INC.**\n\n**ITEM 2.02. RESULTS OF OPERATIONS**\n"
    assert.deepStrictEqual(outline(cover).map((h) => h.title), [
      "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
      "ITEM 2.02. RESULTS OF OPERATIONS"
    ])
  })

  it("Chinese headings, merged bold spans, papers' split headings; years and inline bold are no headings", () => {
    assert.deepStrictEqual(
      outline("# 第一节 公司简介\n\n内容。\n\n## 第三节 管理层讨论与分析\n\n分析内容。\n").map((h) => h.title),
      ["第一节 公司简介", "第三节 管理层讨论与分析"]
    )
    const spans = "## **UNITED STATES** **SECURITIES AND EXCHANGE COMMISSION**\n\nBody text.\n"
    assert.deepStrictEqual(outline(spans), [
      { line: 1, title: "UNITED STATES SECURITIES AND EXCHANGE COMMISSION" }
    ])
    const paper = "## **Attention Is All You Need**\n\n**1** **Introduction**\n\nBody text.\n\n" +
      "**2** **Background**\n\nMore text.\n\n**3.1** **Encoder and Decoder Stacks**\n"
    assert.includeMembers(outline(paper).map((h) => h.title), [
      "1 Introduction", "2 Background", "3.1 Encoder and Decoder Stacks"
    ])
    assert.deepStrictEqual(
      outline("# Financial Summary\n\n**2023** **2022** **2021**\n\nRevenue 100 90 80\n").map((h) => h.title),
      ["Financial Summary"]
    )
    assert.deepStrictEqual(
      outline("This sentence has **bold words** inside it.\n\nAnother with **MULTIPLE CAPS** inline.\n"),
      []
    )
    assert.deepStrictEqual(outline("\n\n# Title One\n\n\n\n# Title Two\n\n").map((h) => h.title), [
      "Title One", "Title Two"
    ])
  })

  it("exactly 50 headings are not cut; 60 are, and the outline says so", () => {
    const headings = (n: number) => Array.from({ length: n }, (_, i) => `# Heading ${i}`).join("\n")
    const exact = Uploads.extractOutline(headings(Uploads.MAX_OUTLINE_ENTRIES))
    assert.lengthOf(exact.headings, Uploads.MAX_OUTLINE_ENTRIES)
    assert.isFalse(exact.truncated)
    const over = Uploads.extractOutline(headings(Uploads.MAX_OUTLINE_ENTRIES + 10))
    assert.lengthOf(over.headings, Uploads.MAX_OUTLINE_ENTRIES)
    assert.isTrue(over.truncated)
    assert.isEmpty(Uploads.extractOutline("").headings)
  })
})
