/**
 * Document → Markdown (DeerFlow's markitdown step, ECOSYSTEM §5), for the `{stem}.md` sibling that the upload
 * writes next to an uploaded document: the Uploads middleware (SPEC §5.5) turns its headings into the outline
 * it shows the model, and the model reads sections of it with `read_file`. So every format is rendered with
 * headings where it has structure, and tables as GFM tables. One module per format under `documents/`:
 *
 * - HTML (`documents/Html.ts`): turndown + the GFM plugin.
 * - DOCX (`documents/Docx.ts`): mammoth (DOCX → HTML), then the HTML path.
 * - XLSX (`documents/Xlsx.ts`): exceljs; a heading and a table per sheet.
 * - PPTX (`documents/Pptx.ts`): jszip + fast-xml-parser; a heading per slide, speaker notes as `> Note:`.
 * - PDF (`documents/Pdf.ts`): unpdf (pdf.js) text, a heading per page.
 *
 * This module picks the converter by the file's extension, guards the Office (zip) formats against encrypted
 * files and zip bombs (`documents/OfficeArchive.ts`) and turns failures into a `ConversionError`. Everything
 * runs in memory, offline, with no external file access (mammoth's is off).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import * as ZipDirectory from "../state/ZipDirectory.js"
import { docxToMarkdown } from "./documents/Docx.js"
import { decodeHtml, htmlToMarkdown } from "./documents/Html.js"
import { isOleFile } from "./documents/OfficeArchive.js"
import { pdfToMarkdown } from "./documents/Pdf.js"
import { pptxToMarkdown } from "./documents/Pptx.js"
import { xlsxToMarkdown } from "./documents/Xlsx.js"

export { decodeHtml, htmlToMarkdown } from "./documents/Html.js"
export { markdownTable, plainLine, tableCell } from "./documents/Markdown.js"
export { zipExpandedSize } from "./documents/OfficeArchive.js"
export { cellText } from "./documents/Xlsx.js"

// The converters' libraries (several MB of JavaScript) load when a document of their format is first converted,
// not with this module: a command that converts nothing does not pay for them. They are optional packages (see
// internal/OptionalPackage.ts): a missing one fails the conversion with a `MissingPackageError` naming it.

/** A format that can be converted. */
export const Format = Schema.Literal("html", "docx", "xlsx", "pptx", "pdf")
export type Format = typeof Format.Type

const EXTENSIONS: Readonly<Record<string, Format>> = {
  ".html": "html",
  ".htm": "html",
  ".xhtml": "html",
  ".docx": "docx",
  ".xlsx": "xlsx",
  ".xlsm": "xlsx",
  ".pptx": "pptx",
  ".pdf": "pdf"
}

/** The format of a file, by its extension (case-insensitive); none for files that are not converted. */
export const formatOf = (filename: string): Option.Option<Format> =>
  Option.fromNullable(EXTENSIONS[Path.extname(filename).toLowerCase()])

/** An uploaded document that could not be converted; `message` names the file and says why. */
export class ConversionError extends Schema.TaggedError<ConversionError>()("ConversionError", {
  /**
   * `unreadable`: corrupt or not this format; `encrypted`: password-protected; `too_large`: expands too far;
   * `missing_package`: the converter's optional package is not installed (`detail` names it).
   */
  reason: Schema.Literal("unreadable", "encrypted", "too_large", "missing_package"),
  filename: Schema.String,
  format: Format,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message() {
    return `${this.filename} could not be converted to Markdown (${this.format}): ${this.detail}`
  }
}

/** Options of `toMarkdown`. */
export interface Options {
  /**
   * Office files (zip archives) whose entries declare more than this many bytes in all are not opened, so a
   * zip bomb cannot exhaust memory. Default 256 MiB.
   */
  readonly maxExpandedBytes?: number
}

const DEFAULT_MAX_EXPANDED = 256 * 1024 * 1024

/**
 * The most parts (zip entries) an Office file may hold to be converted: the zip reader builds an object for each
 * before anything else can be checked (a document of real use holds hundreds).
 */
const MAX_OFFICE_PARTS = 10_000

const formatMiB = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(0)} MiB`

const causeText = (cause: unknown): string => {
  const text = cause instanceof Error ? cause.message : String(cause)
  const firstLine = text.split("\n")[0]!.trim()
  return firstLine.length > 300 ? `${firstLine.slice(0, 299)}…` : firstLine === "" ? "unknown error" : firstLine
}

const CONVERTERS: Readonly<Record<Format, (bytes: Uint8Array) => Promise<string>>> = {
  html: (bytes) => Promise.resolve(htmlToMarkdown(decodeHtml(bytes))),
  docx: docxToMarkdown,
  xlsx: xlsxToMarkdown,
  pptx: pptxToMarkdown,
  pdf: pdfToMarkdown
}

/**
 * The Markdown of an uploaded file, by its extension: none for formats that are not converted (`.md`, `.txt`,
 * images, legacy `.doc`/`.xls`/`.ppt`, ...); a `ConversionError` naming the file when the bytes cannot be read
 * as the format the name claims. The result may be empty when the document has no text.
 */
export const toMarkdown = (
  file: { readonly name: string; readonly bytes: Uint8Array },
  options: Options = {}
): Effect.Effect<Option.Option<string>, ConversionError> => {
  const format = formatOf(file.name)
  if (Option.isNone(format)) return Effect.succeedNone
  const fail = (reason: ConversionError["reason"], detail: string, cause?: unknown) =>
    new ConversionError({ reason, filename: file.name, format: format.value, detail, cause })
  if (format.value === "docx" || format.value === "xlsx" || format.value === "pptx") {
    if (isOleFile(file.bytes)) {
      return Effect.fail(fail(
        "encrypted",
        "it is an OLE compound file, i.e. password-protected or saved in the legacy binary format; " +
          "save it unprotected as .docx/.xlsx/.pptx"
      ))
    }
    const directory = ZipDirectory.read(file.bytes, MAX_OFFICE_PARTS)
    if (directory === undefined) return Effect.fail(fail("unreadable", "it is not a valid Office Open XML (zip) file"))
    if (directory.entries > MAX_OFFICE_PARTS) {
      return Effect.fail(fail("too_large", `it holds more than ${MAX_OFFICE_PARTS} parts`))
    }
    const expanded = directory.declared
    const limit = options.maxExpandedBytes ?? DEFAULT_MAX_EXPANDED
    if (expanded > limit) {
      return Effect.fail(fail(
        "too_large",
        `its contents would expand to ${Number.isFinite(expanded) ? formatMiB(expanded) : "more than 4 GiB"}, ` +
          `over the ${formatMiB(limit)} limit`
      ))
    }
  }
  return Effect.tryPromise({
    try: () => CONVERTERS[format.value](file.bytes),
    catch: (cause) => {
      const name = (cause as { name?: unknown } | null)?.name
      return cause instanceof OptionalPackage.MissingPackageError
        ? fail("missing_package", cause.message, cause)
        : name === "PasswordException"
        ? fail("encrypted", "the PDF is password-protected", cause)
        : fail("unreadable", causeText(cause), cause)
    }
  }).pipe(
    Effect.map(Option.some),
    Effect.withSpan("DocumentConverter.toMarkdown", { attributes: { format: format.value } })
  )
}
