/**
 * PDF → Markdown: unpdf (pdf.js) text, one `## Page N` heading per page. A PDF has no structural headings (only
 * positioned text runs), so the page headings are the outline.
 */
import { converterPackage, joinBlocks, plainLine } from "./Markdown.js"

/** The Markdown of a PDF file: its text, page by page. */
export const pdfToMarkdown = async (bytes: Uint8Array): Promise<string> => {
  const { extractText, getDocumentProxy } = await converterPackage("unpdf", ".pdf", () => import("unpdf"))
  // pdf.js may take over (detach) the buffer it is given: hand it a copy.
  const document = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0, isEvalSupported: false })
  try {
    const { text } = await extractText(document, { mergePages: false })
    return joinBlocks(text.map((page, i) => {
      const lines = page.split(/\r?\n/).map((line) => line.trimEnd())
      const body = lines.some((line) => line.trim() !== "")
        ? lines.map(plainLine).join("\n").replace(/\n{3,}/g, "\n\n").trim()
        : "_(no text on this page: it may be a scanned image)_"
      return `## Page ${i + 1}\n\n${body}`
    }))
  } finally {
    await document.destroy()
  }
}
