import { assert, describe, it } from "@effect/vitest"
import * as docx from "docx"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import * as Option from "effect/Option"
import ExcelJS from "exceljs"
import JSZip from "jszip"
import { PDFDocument, StandardFonts } from "pdf-lib"
import pptxgen from "pptxgenjs"
import * as DocumentConverter from "../../src/layers/DocumentConverter.js"
import { extractOutline } from "../../src/middleware/Uploads.js"

// ---------------------------------------------------------------------------------------------------------
// Fixtures, made with the writer libraries

// pptxgenjs's types are read as CommonJS while its runtime import is ESM: take the class from either shape.
type PptxClass = typeof pptxgen.default
const PptxGenJS: PptxClass = (pptxgen as unknown as { default?: PptxClass }).default ?? pptxgen as unknown as PptxClass

const cell = (text: string) => new docx.TableCell({ children: [new docx.Paragraph(text)] })

/** A DOCX with a heading, a paragraph, a bulleted list and a table without a header-row mark (as Word saves). */
const makeDocx = () =>
  docx.Packer.toBuffer(
    new docx.Document({
      sections: [{
        children: [
          new docx.Paragraph({ text: "Quarterly Report", heading: docx.HeadingLevel.HEADING_1 }),
          new docx.Paragraph({ text: "Revenue grew strongly this quarter." }),
          new docx.Paragraph({ text: "Highlights", heading: docx.HeadingLevel.HEADING_2 }),
          new docx.Paragraph({ text: "New customers in the north", bullet: { level: 0 } }),
          new docx.Paragraph({ text: "Lower churn", bullet: { level: 0 } }),
          new docx.Table({
            rows: [
              new docx.TableRow({ children: [cell("Region"), cell("Sales")] }),
              new docx.TableRow({ children: [cell("North"), cell("1200")] }),
              new docx.TableRow({ children: [cell("South"), cell("800")] })
            ]
          })
        ]
      }]
    })
  )

/** An XLSX with two sheets: numbers, formulas (one with a cached result, one without) and dates. */
const makeXlsx = async () => {
  const workbook = new ExcelJS.Workbook()
  const sales = workbook.addWorksheet("Sales")
  sales.addRow(["Item", "Qty", "Price", "Total", "Date"])
  sales.addRow(["Apples", 3, 1.5, { formula: "B2*C2", result: 4.5 }, new Date(Date.UTC(2024, 0, 15))])
  sales.addRow(["Pears", 2, 2, { formula: "B3*C3", result: 4 }, new Date(Date.UTC(2024, 1, 1, 13, 30))])
  sales.addRow(["Sum", { formula: "SUM(B2:B3)" }])
  const notes = workbook.addWorksheet("Notes")
  notes.addRow(["Key", "Value"])
  notes.addRow(["owner", "ops|finance"])
  return new Uint8Array(await workbook.xlsx.writeBuffer())
}

/** A PPTX: a title slide, a bullet slide with speaker notes, a table slide, and a slide of plain text boxes. */
const makePptx = async () => {
  const deck = new PptxGenJS()
  deck.defineSlideMaster({
    title: "CONTENT",
    objects: [
      { placeholder: { options: { name: "title", type: "title", x: 0.5, y: 0.2, w: 9, h: 1 }, text: "" } },
      { placeholder: { options: { name: "body", type: "body", x: 0.5, y: 1.5, w: 9, h: 4 }, text: "" } }
    ]
  })
  const title = deck.addSlide({ masterName: "CONTENT" })
  title.addText("Launch Plan 2025", { placeholder: "title" })
  title.addText("Prepared by the product team", { x: 1, y: 4, w: 8, h: 1 })
  const bullets = deck.addSlide({ masterName: "CONTENT" })
  bullets.addText("Agenda", { placeholder: "title" })
  bullets.addText([
    { text: "Market overview", options: { bullet: true } },
    { text: "Regional detail", options: { bullet: true, indentLevel: 1 } },
    { text: "Pricing", options: { bullet: true } }
  ], { placeholder: "body" })
  bullets.addNotes("Keep this under five minutes")
  const table = deck.addSlide({ masterName: "CONTENT" })
  table.addText("Revenue by quarter", { placeholder: "title" })
  table.addTable([[{ text: "Quarter" }, { text: "Revenue" }], [{ text: "Q1" }, { text: "10.5" }], [{ text: "Q2" }, {
    text: "12.25"
  }]], { x: 1, y: 2, w: 8 })
  const plain = deck.addSlide()
  plain.addText("Closing thoughts", { x: 1, y: 0.5, w: 8, h: 1 })
  plain.addText("Questions welcome", { x: 1, y: 2, w: 8, h: 1 })
  return new Uint8Array(await deck.write({ outputType: "nodebuffer" }) as Buffer)
}

/** A PDF with two pages of text. */
const makePdf = async () => {
  const pdf = await PDFDocument.create()
  const font = await pdf.embedFont(StandardFonts.Helvetica)
  const pages = [
    ["Introduction to the study", "The sample covers 40 sites."],
    ["Results and discussion", "# 7 sites closed"]
  ]
  for (const lines of pages) {
    const page = pdf.addPage()
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 700 - 20 * i, font, size: 12 }))
  }
  return pdf.save()
}

const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="

const HTML = `<!doctype html>
<html>
  <head>
    <title>Leaky page title</title>
    <style>body { color: red }</style>
    <script>console.log("script text")</script>
  </head>
  <body>
    <h1>Field Guide</h1>
    <p>Read the <a href="https://example.test/guide">full guide</a> before <strong>starting</strong>.</p>
    <h2>Checklist</h2>
    <ul>
      <li>Boots</li>
      <li>Map
        <ul><li>Compass</li></ul>
      </li>
    </ul>
    <table>
      <thead><tr><th>Item</th><th>Weight</th></tr></thead>
      <tbody>
        <tr><td>Tent</td><td>2.1 kg</td></tr>
        <tr><td>Stove</td><td>0.4 kg</td></tr>
      </tbody>
    </table>
    <img src="data:image/png;base64,${PIXEL}" alt="route map">
  </body>
</html>`

const convert = (name: string, bytes: Uint8Array, options?: DocumentConverter.Options) =>
  DocumentConverter.toMarkdown({ name, bytes }, options)

const converted = (name: string, bytes: Uint8Array) =>
  Effect.map(convert(name, bytes), (markdown) => Option.getOrThrowWith(markdown, () => new Error(`${name}: none`)))

const headingsOf = (markdown: string) => extractOutline(markdown).headings.map((h) => h.title)

// ---------------------------------------------------------------------------------------------------------

describe("DocumentConverter", () => {
  it.effect("DOCX: headings, paragraph, list and a table whose first row becomes the header", () =>
    Effect.gen(function*() {
      const markdown = yield* converted("report.docx", yield* Effect.promise(makeDocx))
      assert.isTrue(markdown.startsWith("# Quarterly Report\n"))
      assert.include(markdown, "\nRevenue grew strongly this quarter.\n")
      assert.include(markdown, "\n## Highlights\n")
      assert.include(markdown, "- New customers in the north\n- Lower churn")
      assert.include(markdown, "| Region | Sales |\n| --- | --- |\n| North | 1200 |\n| South | 800 |")
      assert.deepStrictEqual(headingsOf(markdown), ["Quarterly Report", "Highlights"])
    }))

  it.effect("XLSX: one heading and one table per sheet, cached formula results, ISO dates, escaped pipes", () =>
    Effect.gen(function*() {
      const markdown = yield* converted("sales.xlsx", yield* Effect.promise(makeXlsx))
      assert.strictEqual(
        markdown,
        [
          "## Sales",
          "",
          "| Item | Qty | Price | Total | Date |",
          "| --- | --- | --- | --- | --- |",
          "| Apples | 3 | 1.5 | 4.5 | 2024-01-15 |",
          "| Pears | 2 | 2 | 4 | 2024-02-01T13:30:00 |",
          "| Sum | =SUM(B2:B3) |  |  |  |",
          "",
          "## Notes",
          "",
          "| Key | Value |",
          "| --- | --- |",
          "| owner | ops\\|finance |",
          ""
        ].join("\n")
      )
    }))

  it.effect("PPTX: a heading per slide from the title (or first text), bullets, tables and speaker notes", () =>
    Effect.gen(function*() {
      const markdown = yield* converted("deck.pptx", yield* Effect.promise(makePptx))
      assert.deepStrictEqual(headingsOf(markdown), [
        "Slide 1: Launch Plan 2025",
        "Slide 2: Agenda",
        "Slide 3: Revenue by quarter",
        "Slide 4: Closing thoughts"
      ])
      assert.include(markdown, "## Slide 1: Launch Plan 2025\n\nPrepared by the product team\n")
      assert.include(
        markdown,
        "## Slide 2: Agenda\n\n- Market overview\n  - Regional detail\n- Pricing\n\n" +
          "> Note: Keep this under five minutes"
      )
      assert.include(markdown, "| Quarter | Revenue |\n| --- | --- |\n| Q1 | 10.5 |\n| Q2 | 12.25 |")
      assert.include(markdown, "## Slide 4: Closing thoughts\n\nQuestions welcome")
      // Slide 1 has no notes of its own: the notes belong to slide 2 only.
      assert.strictEqual(markdown.split("> Note:").length, 2)
    }))

  it.effect("PDF: the text of each page under a `## Page N` heading; text cannot forge headings", () =>
    Effect.gen(function*() {
      const markdown = yield* converted("study.pdf", yield* Effect.promise(makePdf))
      assert.strictEqual(
        markdown,
        "## Page 1\n\nIntroduction to the study\nThe sample covers 40 sites.\n\n" +
          "## Page 2\n\nResults and discussion\n\\# 7 sites closed\n"
      )
      assert.deepStrictEqual(headingsOf(markdown), ["Page 1", "Page 2"])
    }))

  it.effect("HTML: headings, link, emphasis, nested list, table; head, title, script and inline images dropped", () =>
    Effect.gen(function*() {
      const markdown = yield* converted("guide.html", new TextEncoder().encode(HTML))
      assert.isTrue(markdown.startsWith("# Field Guide\n"))
      assert.include(markdown, "Read the [full guide](https://example.test/guide) before **starting**.")
      assert.include(markdown, "\n## Checklist\n")
      assert.include(markdown, "- Boots\n- Map\n  - Compass")
      assert.include(markdown, "| Item | Weight |\n| --- | --- |\n| Tent | 2.1 kg |\n| Stove | 0.4 kg |")
      assert.include(markdown, "[image: route map]")
      for (const leak of ["Leaky page title", "color: red", "script text", "base64"]) assert.notInclude(markdown, leak)
    }))

  it("HTML tables: a header-less first row is the header, colspans and pipes kept, nested tables flattened", () => {
    assert.strictEqual(
      DocumentConverter.htmlToMarkdown(
        `<table><caption>Totals</caption><tr><td colspan="2">Region</td><td>Sales</td></tr>` +
          `<tr><td>N</td><td>a|b</td><td><p>one</p><p>two</p></td></tr></table>`
      ),
      "Totals\n\n| Region | | Sales |\n| --- | --- | --- |\n| N | a\\|b | one<br>two |\n"
    )
    assert.strictEqual(
      DocumentConverter.htmlToMarkdown(
        "<table><tr><td><table><tr><th>in1</th><th>in2</th></tr></table></td><td>outer</td></tr></table>" +
          "<table><tr><td>alone</td></tr></table>"
      ),
      "| in1 | in2 |\n| --- | --- |\n\nouter\n\nalone\n"
    )
  })

  it.effect("HTML in a declared legacy charset is decoded by it", () =>
    Effect.gen(function*() {
      const latin1 = Uint8Array.from([
        ...new TextEncoder().encode(`<meta charset="iso-8859-1"><h1>Caf`),
        0xe9,
        ...new TextEncoder().encode("</h1>")
      ])
      assert.strictEqual(yield* converted("menu.htm", latin1), "# Café\n")
    }))

  it.effect("files that are not documents are not converted", () =>
    Effect.gen(function*() {
      for (const name of ["notes.txt", "photo.png", "README.md", "legacy.doc", "archive.zip", "noextension"]) {
        assert.isTrue(Option.isNone(yield* convert(name, new TextEncoder().encode("# text"))), name)
      }
      assert.isTrue(Option.isSome(DocumentConverter.formatOf("REPORT.PDF")))
    }))

  it.effect("a corrupt DOCX or PDF fails with a ConversionError that names the file", () =>
    Effect.gen(function*() {
      const garbage = new TextEncoder().encode("this is not a document at all")
      for (const name of ["broken.docx", "broken.pdf", "broken.xlsx", "broken.pptx"]) {
        const result = yield* Effect.either(convert(name, garbage))
        assert.isTrue(Either.isLeft(result), name)
        const error = (result as Either.Left<DocumentConverter.ConversionError, unknown>).left
        assert.strictEqual(error._tag, "ConversionError")
        assert.strictEqual(error.filename, name)
        assert.strictEqual(error.reason, "unreadable")
        assert.include(error.message, name)
      }
      // A real zip that is not a Word document, and a PDF cut in half.
      const zip = new JSZip()
      zip.file("hello.txt", "hi")
      const zipped = yield* Effect.promise(() => zip.generateAsync({ type: "uint8array" }))
      const notWord = yield* Effect.flip(convert("fake.docx", zipped))
      assert.strictEqual(notWord.reason, "unreadable")
      assert.include(notWord.message, "fake.docx")
      const pdf = yield* Effect.promise(makePdf)
      const cut = yield* Effect.either(convert("cut.pdf", pdf.slice(0, 200)))
      assert.isTrue(Either.isLeft(cut))
    }))

  it.effect("password-protected or legacy Office files and zip bombs are refused before parsing", () =>
    Effect.gen(function*() {
      const ole = Uint8Array.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0, 0, 0, 0])
      const encrypted = yield* Effect.flip(convert("secret.xlsx", ole))
      assert.strictEqual(encrypted.reason, "encrypted")
      assert.include(encrypted.message, "secret.xlsx")
      const zip = new JSZip()
      zip.file("word/document.xml", "0".repeat(3 * 1024 * 1024))
      const bomb = yield* Effect.promise(() => zip.generateAsync({ type: "uint8array", compression: "DEFLATE" }))
      assert.isBelow(bomb.byteLength, 64 * 1024)
      assert.strictEqual(DocumentConverter.zipExpandedSize(bomb), 3 * 1024 * 1024)
      const refused = yield* Effect.flip(convert("bomb.docx", bomb, { maxExpandedBytes: 1024 * 1024 }))
      assert.strictEqual(refused.reason, "too_large")
      assert.include(refused.message, "3 MiB")
    }))

  it("cell values: cached formula results, the formula when there is none, ISO dates, rich text, errors", () => {
    assert.strictEqual(DocumentConverter.cellText({ formula: "A1*2", result: 84 }), "84")
    assert.strictEqual(DocumentConverter.cellText({ sharedFormula: "A1", result: "x" }), "x")
    assert.strictEqual(DocumentConverter.cellText({ formula: "NOW()" }), "=NOW()")
    assert.strictEqual(DocumentConverter.cellText(new Date(Date.UTC(2023, 11, 31))), "2023-12-31")
    const morning = new Date(Date.UTC(2023, 11, 31, 8, 5, 9, 250))
    assert.strictEqual(DocumentConverter.cellText(morning), "2023-12-31T08:05:09.250")
    assert.strictEqual(DocumentConverter.cellText({ richText: [{ text: "a" }, { text: "b" }] }), "ab")
    assert.strictEqual(DocumentConverter.cellText({ error: "#DIV/0!" }), "#DIV/0!")
    assert.strictEqual(DocumentConverter.cellText({ text: "site", hyperlink: "https://x.test" }), "site")
    assert.strictEqual(DocumentConverter.cellText(true), "TRUE")
  })

  it.prop(
    "markdownTable: every row has the same cells, whatever the cell text",
    [fc.array(fc.array(fc.string(), { maxLength: 5 }), { minLength: 1, maxLength: 6 })],
    ([rows]) => {
      const lines = DocumentConverter.markdownTable(rows).split("\n")
      const width = Math.max(1, ...rows.map((row) => row.length))
      assert.strictEqual(lines.length, rows.length + 1)
      assert.strictEqual(lines[1], `|${" --- |".repeat(width)}`)
      for (const line of lines) assert.strictEqual(line.match(/(?<!\\)\|/g)?.length, width + 1, line)
    }
  )

  it.prop(
    "plainLine: extracted text never adds a heading or hides the page headings in the outline",
    // Lines built from the characters that make Markdown structure, plus plain ones.
    [fc.array(fc.stringOf(fc.constantFrom("#", "`", "~", " ", "\t", "*", "a", "1"), { maxLength: 8 }), {
      maxLength: 8
    })],
    ([lines]) => {
      const page = lines.map(DocumentConverter.plainLine).join("\n")
      assert.deepStrictEqual(headingsOf(`## Page 1\n\n${page}\n\n## Page 2\n`), ["Page 1", "Page 2"])
    }
  )
})
