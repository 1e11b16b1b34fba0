/**
 * HTML → Markdown (turndown + the GFM plugin; tables by linear rules of ours, the first row as the header).
 * `<head>`, `<title>`, scripts and styles are dropped; inline images keep only their alt text. DOCX goes through
 * here too, as mammoth's HTML.
 */
import * as Crypto from "node:crypto"
import { createRequire } from "node:module"
import type TurndownService from "turndown"
import * as OptionalPackage from "../../internal/OptionalPackage.js"
import { tableCell } from "./Markdown.js"

// turndown (CommonJS) is required synchronously, as `htmlToMarkdown` is synchronous; the GFM plugin ships without
// types (plain turndown plugins).
const requireCjs = createRequire(import.meta.url)
const TURNDOWN = ["turndown", "@joplin/turndown-plugin-gfm"]
const turndown = () =>
  OptionalPackage.loadSync(TURNDOWN, "convert HTML to Markdown", () => ({
    TurndownService: requireCjs("turndown") as typeof TurndownService,
    gfm: (requireCjs("@joplin/turndown-plugin-gfm") as { gfm: TurndownService.Plugin }).gfm
  }))

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

/**
 * A rule taking the Markdown of a wrapper element (`name`, in capitals) to `take`, in its place none: turndown's
 * last step trims the text's end with `/[\t\r\n\s]+$/`, whose cost is the square of each run of blanks anywhere in
 * it (20,000 `<br>`, `&nbsp;` or spaces in a `<pre>`, 80 KB, held the event loop for seconds), so the page is
 * wrapped in an element of a name it cannot know, and what turndown made of it is taken here, before that step.
 */
const wholePage = (service: TurndownService, name: string, take: (markdown: string) => void) =>
  service.addRule("wholePage", {
    filter: (node) => (node as unknown as DomNode).nodeName === name,
    replacement: (content) => {
      take(content)
      return ""
    }
  })

// the text without its trailing new lines (linear: `/\n+$/` costs the square of each run of new lines)
const trimTrailingNewlines = (text: string) => {
  let end = text.length
  while (end > 0 && text[end - 1] === "\n") end--
  return text.slice(0, end)
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
      const body = trimTrailingNewlines(content.replace(/^\n+/, "")) + (paragraph ? "\n" : "")
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
  const service = makeTurndown()
  const name = `x-antler-page-${Crypto.randomUUID()}`
  let page: string | undefined
  wholePage(service, name.toUpperCase(), (markdown) => {
    page = markdown
  })
  const rest = service.turndown(`<${name}>${html}</${name}>`)
  // (a blank page is turndown's own: nothing taken)
  const whole = page === undefined ? rest : rest.trim() === "" ? page : `${page}\n\n${rest}`
  const markdown = whole.replace(/\n{3,}/g, "\n\n").trim()
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
