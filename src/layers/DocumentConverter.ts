/**
 * Document → Markdown (DeerFlow's markitdown step, ECOSYSTEM §5), for the `{stem}.md` sibling that the upload
 * writes next to an uploaded document: the Uploads middleware (SPEC §5.5) turns its headings into the outline
 * it shows the model, and the model reads sections of it with `read_file`. So every format is rendered with
 * headings where it has structure, and tables as GFM tables:
 *
 * - HTML: turndown + the GFM plugin (tables by linear rules of ours, the first row as the header); `<head>`,
 *   `<title>`, scripts and styles are dropped, inline images keep only their alt text.
 * - DOCX: mammoth (DOCX → HTML; heading styles become `#` headings), then the HTML path.
 * - XLSX: exceljs; one `## {sheet}` heading and one table per sheet, formula cells as their cached result,
 *   dates as ISO 8601.
 * - PPTX: jszip + fast-xml-parser; `## Slide N: {title}` (the title placeholder, else the first text), text as
 *   bullets, tables as GFM tables, speaker notes as `> Note:`.
 * - PDF: unpdf (pdf.js) text, one `## Page N` heading per page. A PDF has no structural headings (only
 *   positioned text runs), so the page headings are the outline.
 *
 * Everything runs in memory, offline, with no external file access (mammoth's is off).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type ExcelJS from "exceljs"
import type JSZip from "jszip"
import { createRequire } from "node:module"
import * as Path from "node:path"
import type TurndownService from "turndown"
import * as OnDemand from "../internal/OnDemand.js"
import * as OptionalPackage from "../internal/OptionalPackage.js"

// The converters' libraries (several MB of JavaScript) load when a document of their format is first converted,
// not with this module: a command that converts nothing does not pay for them. They are optional packages (see
// internal/OptionalPackage.ts): a missing one fails the conversion with a `MissingPackageError` naming it.
// turndown (CommonJS) is required synchronously, as `htmlToMarkdown` is synchronous; the GFM plugin ships without
// types (plain turndown plugins).
const requireCjs = createRequire(import.meta.url)
const TURNDOWN = ["turndown", "@joplin/turndown-plugin-gfm"]
const turndown = () =>
  OptionalPackage.loadSync(TURNDOWN, "convert HTML to Markdown", () => ({
    TurndownService: requireCjs("turndown") as typeof TurndownService,
    gfm: (requireCjs("@joplin/turndown-plugin-gfm") as { gfm: TurndownService.Plugin }).gfm
  }))

/** Loads the package of a format's converter; a missing one is a `MissingPackageError` naming it. */
const converterPackage = <A>(name: string, format: string, loader: () => Promise<A>): Promise<A> =>
  OptionalPackage.load([name], `convert ${format} files to Markdown`, loader)

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

// ---------------------------------------------------------------------------------------------------------
// Markdown helpers

/** One GFM table cell: pipes escaped, line breaks as `<br>`. */
export const tableCell = (text: string): string =>
  text.trim().replace(/\r\n?|\n/g, "<br>").replace(/\|/g, "\\|")

/** A GFM table; the first row is the header. Rows are padded to the widest. Empty input gives "". */
export const markdownTable = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  if (rows.length === 0) return ""
  // A reduce, not Math.max(...rows): a sheet can have more rows than a call can take arguments.
  const width = rows.reduce((max, row) => Math.max(max, row.length), 1)
  const line = (row: ReadonlyArray<string>) =>
    `| ${Array.from({ length: width }, (_, i) => tableCell(row[i] ?? "")).join(" | ")} |`
  return [line(rows[0]!), `|${" --- |".repeat(width)}`, ...rows.slice(1).map(line)].join("\n")
}

/**
 * A line of extracted plain text made safe to place in Markdown: a leading `#` (a fake heading in the
 * outline) and a leading fence (which would hide every later heading from the outline) are escaped.
 */
export const plainLine = (line: string): string =>
  line.replace(/^(\s{0,3})(#|`{3,}|~{3,})/, (_, space: string, mark: string) => `${space}\\${mark}`)

const joinBlocks = (blocks: ReadonlyArray<string>) => {
  const text = blocks.filter((block) => block.trim() !== "").join("\n\n").trim()
  return text === "" ? "" : `${text}\n`
}

// ---------------------------------------------------------------------------------------------------------
// HTML (and DOCX through mammoth's HTML)

/** The DOM surface of the nodes turndown hands to rules (domino). */
interface DomNode {
  readonly nodeName: string
  readonly parentNode: DomNode | null
  readonly previousSibling: DomNode | null
  readonly nextSibling: DomNode | null
  readonly childNodes: ArrayLike<DomNode>
  readonly rows?: ArrayLike<DomNode>
  readonly textContent: string | null
  getAttribute?(name: string): string | null
  querySelector?(selector: string): DomNode | null
}

const closest = (node: DomNode, name: string): DomNode | null => {
  let parent = node.parentNode
  while (parent !== null && parent.nodeName !== name) parent = parent.parentNode
  return parent
}

const isCell = (node: DomNode) => node.nodeName === "TD" || node.nodeName === "TH"

const span = (cell: DomNode) => {
  const value = Number(cell.getAttribute?.("colspan") ?? 1)
  return Number.isInteger(value) && value > 1 ? Math.min(value, 1000) : 1
}

/** What a table's rules need to know, measured once per table. */
interface TableShape {
  /** Rendered as paragraphs: nested tables, or a single cell. */
  readonly skip: boolean
  readonly firstRow: DomNode | undefined
  readonly width: number
}

/**
 * The shape of a table. Measured once and cached: the GFM plugin's own table rules re-read `table.rows` for
 * every row, which domino rebuilds on each access, so a 2,000-row table took 20 s; these rules are linear.
 * One cache per converter (a converter is made per conversion), never one shared by the process.
 */
const tableShapes = () => {
  const cache = new WeakMap<DomNode, TableShape>()
  return (table: DomNode): TableShape => {
    const cached = cache.get(table)
    if (cached !== undefined) return cached
    const rows = Array.from(table.rows ?? [])
    let width = 0
    let cells = 0
    for (const row of rows) {
      let rowWidth = 0
      for (const child of Array.from(row.childNodes)) {
        if (isCell(child)) {
          rowWidth += span(child)
          cells++
        }
      }
      width = Math.max(width, rowWidth)
    }
    const shape = { skip: cells <= 1 || table.querySelector?.("table") != null, firstRow: rows[0], width }
    cache.set(table, shape)
    return shape
  }
}

/**
 * GFM tables: the first row is the header (DOCX, and many pages, have no header-row mark, and an empty
 * invented header would hide the column names); cells escape pipes and keep line breaks as `<br>`; tables
 * that cannot be GFM (nested tables, a single cell) become paragraphs.
 */
const tableRules = (service: TurndownService) => {
  const dom = (node: unknown) => node as DomNode
  const tableShape = tableShapes()
  const shapeOf = (node: DomNode): TableShape | undefined => {
    const table = node.nodeName === "TABLE" ? node : closest(node, "TABLE")
    return table === null ? undefined : tableShape(table)
  }
  service.addRule("tableCell", {
    filter: (node) => isCell(dom(node)),
    replacement: (content, node) => {
      const cell = dom(node)
      if (shapeOf(cell)?.skip !== false) return `\n\n${content}\n\n`
      let first = true
      for (let sibling = cell.previousSibling; sibling !== null; sibling = sibling.previousSibling) {
        if (isCell(sibling)) {
          first = false
          break
        }
      }
      const text = tableCell(content.replace(/\n+/g, "\n"))
      return `${first ? "|" : ""} ${text} |${" |".repeat(span(cell) - 1)}`
    }
  })
  service.addRule("tableRow", {
    filter: (node) => dom(node).nodeName === "TR",
    replacement: (content, node) => {
      const shape = shapeOf(dom(node))
      if (shape === undefined || shape.skip) return content
      return `\n${content}${shape.firstRow === dom(node) ? `\n|${" --- |".repeat(shape.width)}` : ""}`
    }
  })
  service.addRule("table", {
    filter: (node) => dom(node).nodeName === "TABLE",
    replacement: (content, node) => {
      const shape = tableShape(dom(node))
      if (shape.skip) return `\n\n${content}\n\n`
      const caption = dom(node).querySelector?.("caption")?.textContent?.trim() ?? ""
      return `\n\n${caption === "" ? "" : `${caption}\n\n`}${content.replace(/\n+/g, "\n").trim()}\n\n`
    }
  })
  service.addRule("tableParts", {
    filter: (node) => ["THEAD", "TBODY", "TFOOT"].includes(dom(node).nodeName),
    replacement: (content) => content
  })
  service.addRule("tableExtras", {
    filter: (node) => ["CAPTION", "COLGROUP", "COL"].includes(dom(node).nodeName),
    replacement: () => ""
  })
}

const makeTurndown = () => {
  const { TurndownService, gfm } = turndown()
  const service = new TurndownService({
    headingStyle: "atx",
    bulletListMarker: "-",
    codeBlockStyle: "fenced",
    emDelimiter: "_",
    strongDelimiter: "**"
  })
  // The plugin gives strikethrough, task lists and highlighted code; tables use the rules above, which,
  // added later, take precedence.
  service.use(gfm)
  tableRules(service)
  service.remove(["head", "title", "script", "style", "noscript", "template"] as Array<TurndownService.TagName>)
  // `- item` rather than turndown's `-   item`.
  service.addRule("compactListItem", {
    filter: "li" as TurndownService.TagName,
    replacement: (content, node) => {
      const dom = node as unknown as DomNode
      const parent = dom.parentNode
      let prefix = "- "
      if (parent?.nodeName === "OL") {
        const start = Number(parent.getAttribute?.("start") ?? "1")
        const index = Array.from(parent.childNodes).filter((n) => n.nodeName === "LI").indexOf(dom)
        prefix = `${(Number.isFinite(start) ? start : 1) + index}. `
      }
      const paragraph = /\n$/.test(content)
      const body = content.replace(/^\n+/, "").replace(/\n+$/, "") + (paragraph ? "\n" : "")
      return prefix + body.replace(/\n/g, `\n${" ".repeat(prefix.length)}`) + (dom.nextSibling ? "\n" : "")
    }
  })
  // Inline images (data: URIs, as mammoth and saved pages embed them) would flood the text: keep the alt text.
  service.addRule("inlineImage", {
    filter: (node) => {
      const dom = node as unknown as DomNode
      if (dom.nodeName !== "IMG") return false
      const src = dom.getAttribute?.("src") ?? ""
      return src === "" || src.startsWith("data:")
    },
    replacement: (_, node) => {
      const alt = ((node as unknown as DomNode).getAttribute?.("alt") ?? "").trim()
      return alt === "" ? "" : `[image: ${alt}]`
    }
  })
  return service
}

/**
 * HTML text → GitHub-flavoured Markdown (headings, lists, links, emphasis, tables). Throws a `MissingPackageError`
 * when turndown (an optional package) is not installed.
 */
export const htmlToMarkdown = (html: string): string => {
  const markdown = makeTurndown().turndown(html).replace(/\n{3,}/g, "\n\n").trim()
  return markdown === "" ? "" : `${markdown}\n`
}

/** The text of HTML bytes: a BOM, else a `charset` declared near the top, else UTF-8. */
export const decodeHtml = (bytes: Uint8Array): string => {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return new TextDecoder("utf-8").decode(bytes)
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder("utf-16le").decode(bytes)
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder("utf-16be").decode(bytes)
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, 2048))
  const declared = /<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head)?.[1]
  if (declared !== undefined) {
    try {
      return new TextDecoder(declared).decode(bytes)
    } catch {
      // An unknown label: fall through to UTF-8.
    }
  }
  return new TextDecoder("utf-8").decode(bytes)
}

const DOCX_STYLES = ["p[style-name='Title'] => h1:fresh", "p[style-name='Subtitle'] => h2:fresh"]

const docxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
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

// ---------------------------------------------------------------------------------------------------------
// XLSX

const isoDate = (date: Date): string => {
  if (Number.isNaN(date.getTime())) return ""
  const iso = date.toISOString()
  // Excel dates carry no zone (exceljs reads them as UTC): a date alone, or a local date-time.
  if (iso.endsWith("T00:00:00.000Z")) return iso.slice(0, 10)
  return iso.endsWith(".000Z") ? iso.slice(0, 19) : iso.slice(0, 23)
}

/** The text of one exceljs cell value: formulas as their cached result, dates ISO, rich text as plain text. */
export const cellText = (value: unknown): string => {
  if (value === null || value === undefined) return ""
  if (value instanceof Date) return isoDate(value)
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : ""
  if (typeof value === "boolean") return value ? "TRUE" : "FALSE"
  if (typeof value === "string") return value
  if (typeof value === "object") {
    const v = value as Record<string, unknown>
    if ("formula" in v || "sharedFormula" in v) {
      if (v.result !== undefined && v.result !== null) return cellText(v.result)
      return typeof v.formula === "string" ? `=${v.formula}` : ""
    }
    if (Array.isArray(v.richText)) return v.richText.map((run: { text?: unknown }) => String(run.text ?? "")).join("")
    if ("error" in v) return String(v.error)
    if ("text" in v) return cellText(v.text)
  }
  return String(value)
}

const sheetTable = (sheet: ExcelJS.Worksheet): ReadonlyArray<ReadonlyArray<string>> => {
  const rows: Array<Map<number, string>> = []
  let left = Infinity
  let right = 0
  sheet.eachRow({ includeEmpty: false }, (row) => {
    const cells = new Map<number, string>()
    row.eachCell({ includeEmpty: false }, (cell, column) => {
      // A merged range shows its value once, at its top-left cell.
      if (cell.isMerged && cell.master !== cell) return
      const text = cellText(cell.value)
      if (text === "") return
      cells.set(column, text)
      left = Math.min(left, column)
      right = Math.max(right, column)
    })
    if (cells.size > 0) rows.push(cells)
  })
  return rows.map((cells) => Array.from({ length: right - left + 1 }, (_, i) => cells.get(left + i) ?? ""))
}

const xlsxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
  const { default: ExcelJS } = await converterPackage("exceljs", ".xlsx", () => import("exceljs"))
  const workbook = new ExcelJS.Workbook()
  await workbook.xlsx.load(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) as never)
  const blocks: Array<string> = []
  workbook.eachSheet((sheet) => {
    const table = sheetTable(sheet)
    blocks.push(`## ${sheet.name}`, table.length === 0 ? "_(empty sheet)_" : markdownTable(table))
  })
  return joinBlocks(blocks)
}

// ---------------------------------------------------------------------------------------------------------
// PPTX

/** A node of fast-xml-parser's `preserveOrder` output: `{ [tag]: children, ":@"?: attributes }`. */
type XmlNode = Record<string, unknown>

const tagOf = (node: XmlNode): string | undefined => {
  for (const key in node) if (key !== ":@") return key
  return undefined
}
const childrenOf = (node: XmlNode): ReadonlyArray<XmlNode> => {
  const tag = tagOf(node)
  const value = tag === undefined ? undefined : node[tag]
  return Array.isArray(value) ? value as ReadonlyArray<XmlNode> : []
}
const attrOf = (node: XmlNode, name: string): string | undefined =>
  (node[":@"] as Record<string, string> | undefined)?.[name]
const childOf = (node: XmlNode | undefined, tag: string): XmlNode | undefined =>
  node === undefined ? undefined : childrenOf(node).find((child) => tagOf(child) === tag)
const pathOf = (node: XmlNode | undefined, ...tags: ReadonlyArray<string>): XmlNode | undefined =>
  tags.reduce<XmlNode | undefined>((current, tag) => childOf(current, tag), node)
const childrenNamed = (node: XmlNode | undefined, tag: string): ReadonlyArray<XmlNode> =>
  node === undefined ? [] : childrenOf(node).filter((child) => tagOf(child) === tag)
const textOf = (node: XmlNode): string =>
  childrenOf(node).map((child) => typeof child["#text"] === "string" ? child["#text"] : "").join("")
const parseXml = (text: string): XmlNode => {
  const parser = new (OnDemand.fastXmlParser().XMLParser)({
    preserveOrder: true,
    ignoreAttributes: false,
    attributeNamePrefix: "",
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false
  })
  return { "#document": parser.parse(text) as unknown }
}

interface Paragraph {
  readonly text: string
  readonly level: number
  readonly bullet: "none" | "bullet" | "number" | "inherit"
}

const paragraphOf = (p: XmlNode): Paragraph => {
  let text = ""
  for (const child of childrenOf(p)) {
    const tag = tagOf(child)
    if (tag === "a:r" || tag === "a:fld") {
      const t = childOf(child, "a:t")
      if (t !== undefined) text += textOf(t)
    } else if (tag === "a:br") text += "\n"
  }
  const props = childOf(p, "a:pPr")
  const level = Math.max(0, Math.min(8, Number(props === undefined ? 0 : attrOf(props, "lvl") ?? 0) || 0))
  const bullet = childOf(props, "a:buNone") !== undefined
    ? "none"
    : childOf(props, "a:buAutoNum") !== undefined
    ? "number"
    : childOf(props, "a:buChar") !== undefined
    ? "bullet"
    : "inherit"
  return { text: text.replace(/[\t\v\f\r ]+/g, " ").trim(), level, bullet }
}

const paragraphsOf = (txBody: XmlNode | undefined): ReadonlyArray<Paragraph> =>
  childrenNamed(txBody, "a:p").map(paragraphOf).filter((p) => p.text !== "")

type SlideItem =
  | { readonly _tag: "text"; readonly placeholder: string | undefined; readonly paragraphs: ReadonlyArray<Paragraph> }
  | { readonly _tag: "table"; readonly rows: ReadonlyArray<ReadonlyArray<string>> }

const placeholderOf = (shape: XmlNode, nv: string): string | undefined => {
  const ph = pathOf(shape, nv, "p:nvPr", "p:ph")
  return ph === undefined ? undefined : attrOf(ph, "type") ?? "obj"
}

const tableOf = (tbl: XmlNode): ReadonlyArray<ReadonlyArray<string>> =>
  childrenNamed(tbl, "a:tr").map((tr) =>
    childrenNamed(tr, "a:tc").map((tc) =>
      attrOf(tc, "hMerge") === "1" || attrOf(tc, "vMerge") === "1"
        ? ""
        : paragraphsOf(childOf(tc, "a:txBody")).map((p) => p.text).join("\n")
    )
  )

const slideItems = (tree: XmlNode | undefined, out: Array<SlideItem> = []): Array<SlideItem> => {
  for (const shape of tree === undefined ? [] : childrenOf(tree)) {
    switch (tagOf(shape)) {
      case "p:sp": {
        const paragraphs = paragraphsOf(childOf(shape, "p:txBody"))
        if (paragraphs.length > 0) out.push({ _tag: "text", placeholder: placeholderOf(shape, "p:nvSpPr"), paragraphs })
        break
      }
      case "p:graphicFrame": {
        const tbl = pathOf(shape, "a:graphic", "a:graphicData", "a:tbl")
        if (tbl !== undefined) {
          const rows = tableOf(tbl)
          if (rows.some((row) => row.some((cell) => cell !== ""))) out.push({ _tag: "table", rows })
        }
        break
      }
      case "p:grpSp":
        slideItems(shape, out)
        break
    }
  }
  return out
}

const TITLE_PLACEHOLDERS: ReadonlySet<string> = new Set(["title", "ctrTitle"])
const BODY_PLACEHOLDERS: ReadonlySet<string> = new Set(["body", "obj"])

const renderParagraphs = (item: Extract<SlideItem, { _tag: "text" }>): string =>
  item.paragraphs.map((p) => {
    const bulleted = p.bullet === "bullet" || p.bullet === "number" ||
      (p.bullet === "inherit" && item.placeholder !== undefined && BODY_PLACEHOLDERS.has(item.placeholder))
    const lines = p.text.split("\n")
    if (!bulleted) return lines.map(plainLine).join("\n")
    const indent = "  ".repeat(p.level)
    const marker = p.bullet === "number" ? "1. " : "- "
    return `${indent}${marker}${lines.join(`\n${indent}${" ".repeat(marker.length)}`)}`
  }).join("\n")

/** The Markdown of one slide: `## Slide N: title`, its text and tables in document order, then its notes. */
const renderSlide = (index: number, items: ReadonlyArray<SlideItem>, notes: ReadonlyArray<string>): string => {
  const rest = [...items]
  let title = ""
  const titleAt = rest.findIndex((item) => item._tag === "text" && TITLE_PLACEHOLDERS.has(item.placeholder ?? ""))
  if (titleAt >= 0) {
    const item = rest.splice(titleAt, 1)[0] as Extract<SlideItem, { _tag: "text" }>
    title = item.paragraphs.map((p) => p.text).join(" ")
  } else {
    // No title placeholder (e.g. plain text frames): the first text stands for the title.
    const firstAt = rest.findIndex((item) => item._tag === "text")
    if (firstAt >= 0) {
      const item = rest[firstAt] as Extract<SlideItem, { _tag: "text" }>
      title = item.paragraphs[0]!.text
      if (item.paragraphs.length === 1) rest.splice(firstAt, 1)
      else rest[firstAt] = { ...item, paragraphs: item.paragraphs.slice(1) }
    }
  }
  title = title.replace(/\s+/g, " ").trim()
  const blocks = [title === "" ? `## Slide ${index}` : `## Slide ${index}: ${title}`]
  for (const item of rest) blocks.push(item._tag === "table" ? markdownTable(item.rows) : renderParagraphs(item))
  if (notes.length > 0) blocks.push(notes.map((line, i) => i === 0 ? `> Note: ${line}` : `> ${line}`).join("\n"))
  return blocks.join("\n\n")
}

interface Relationship {
  readonly type: string
  readonly target: string
}

const readRelationships = async (zip: JSZip, part: string): Promise<Map<string, Relationship>> => {
  const rels = new Map<string, Relationship>()
  const file = zip.file(`${Path.posix.dirname(part)}/_rels/${Path.posix.basename(part)}.rels`)
  if (file === null) return rels
  const root = pathOf(parseXml(await file.async("string")), "Relationships")
  for (const rel of childrenNamed(root, "Relationship")) {
    const id = attrOf(rel, "Id")
    const target = attrOf(rel, "Target")
    if (id === undefined || target === undefined || attrOf(rel, "TargetMode") === "External") continue
    const resolved = target.startsWith("/")
      ? target.slice(1)
      : Path.posix.normalize(Path.posix.join(Path.posix.dirname(part), target))
    rels.set(id, { type: attrOf(rel, "Type") ?? "", target: resolved })
  }
  return rels
}

/** The slide parts in presentation order (`p:sldIdLst`), else by their number. */
const slideParts = async (zip: JSZip): Promise<ReadonlyArray<string>> => {
  const presentation = zip.file("ppt/presentation.xml")
  if (presentation !== null) {
    const rels = await readRelationships(zip, "ppt/presentation.xml")
    const list = pathOf(parseXml(await presentation.async("string")), "p:presentation", "p:sldIdLst")
    const parts = childrenNamed(list, "p:sldId")
      .map((id) => rels.get(attrOf(id, "r:id") ?? "")?.target)
      .filter((part): part is string => part !== undefined && zip.file(part) !== null)
    if (parts.length > 0) return parts
  }
  const number = (name: string) => Number(/slide(\d+)\.xml$/.exec(name)?.[1] ?? 0)
  return Object.keys(zip.files).filter((name) => /^ppt\/slides\/slide\d+\.xml$/.test(name))
    .sort((a, b) => number(a) - number(b))
}

const notesOf = async (zip: JSZip, slidePart: string): Promise<ReadonlyArray<string>> => {
  const rels = await readRelationships(zip, slidePart)
  const notes = [...rels.values()].find((rel) => rel.type.endsWith("/notesSlide"))
  const file = notes === undefined ? null : zip.file(notes.target)
  if (file === null) return []
  const tree = pathOf(parseXml(await file.async("string")), "p:notes", "p:cSld", "p:spTree")
  return slideItems(tree).flatMap((item) =>
    item._tag === "text" && item.placeholder === "body" ? item.paragraphs.flatMap((p) => p.text.split("\n")) : []
  )
}

const pptxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
  const { default: JSZip } = await converterPackage("jszip", ".pptx", () => import("jszip"))
  const zip = await JSZip.loadAsync(bytes)
  const parts = await slideParts(zip)
  if (parts.length === 0 && zip.file("ppt/presentation.xml") === null) throw new Error("not a PowerPoint file")
  const slides: Array<string> = []
  for (const [i, part] of parts.entries()) {
    const root = parseXml(await zip.file(part)!.async("string"))
    const items = slideItems(pathOf(root, "p:sld", "p:cSld", "p:spTree"))
    slides.push(renderSlide(i + 1, items, await notesOf(zip, part)))
  }
  return joinBlocks(slides)
}

// ---------------------------------------------------------------------------------------------------------
// PDF

const pdfToMarkdown = async (bytes: Uint8Array): Promise<string> => {
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

// ---------------------------------------------------------------------------------------------------------
// Archive guard

/**
 * The total uncompressed size the central directory of a zip archive declares, or undefined when the bytes
 * are not a zip archive (no end-of-central-directory record). Zip64 entries count as unbounded.
 */
export const zipExpandedSize = (bytes: Uint8Array): number | undefined => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const floor = Math.max(0, bytes.byteLength - 22 - 0xffff)
  let end = -1
  for (let i = bytes.byteLength - 22; i >= floor; i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      end = i
      break
    }
  }
  if (end < 0) return undefined
  const entries = view.getUint16(end + 10, true)
  let offset = view.getUint32(end + 16, true)
  if (entries === 0xffff || offset === 0xffffffff) return Infinity
  let total = 0
  for (let n = 0; n < entries; n++) {
    if (offset + 46 > bytes.byteLength || view.getUint32(offset, true) !== 0x02014b50) return undefined
    const size = view.getUint32(offset + 24, true)
    if (size === 0xffffffff) return Infinity
    total += size
    const variable = view.getUint16(offset + 28, true) + view.getUint16(offset + 30, true) +
      view.getUint16(offset + 32, true)
    offset += 46 + variable
  }
  return total
}

const isOleFile = (bytes: Uint8Array) =>
  bytes.byteLength >= 8 && bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0

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
    const expanded = zipExpandedSize(file.bytes)
    if (expanded === undefined) return Effect.fail(fail("unreadable", "it is not a valid Office Open XML (zip) file"))
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
