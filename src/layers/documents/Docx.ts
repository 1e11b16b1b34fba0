/** DOCX → Markdown: mammoth (DOCX → HTML; heading styles become `#` headings), then the HTML path. */
import { htmlToMarkdown } from "./Html.js"
import { converterPackage } from "./Markdown.js"

const DOCX_STYLES = ["p[style-name='Title'] => h1:fresh", "p[style-name='Subtitle'] => h2:fresh"]

/** The Markdown of a DOCX file, with no external file access and images dropped (their alt text stays). */
export const docxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
  const { default: mammoth } = await converterPackage("mammoth", ".docx", () => import("mammoth"))
  const result = await mammoth.convertToHtml(
    { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
    {
      styleMap: DOCX_STYLES,
      externalFileAccess: false,
      // Images are dropped (their alt text stays), rather than inlined as base64.
      convertImage: mammoth.images.imgElement(() => Promise.resolve({ src: "" }))
    }
  )
  return htmlToMarkdown(result.value)
}
