/**
 * The typed synopsis of a large tool output (SPEC §5.2): what ToolOutputBudget shows the model in place of an
 * output it saved to a file. Deterministic, no model involved: the output is recognised as JSON (or JSON
 * Lines), XML, TSV, CSV, YAML, code or plain text and described by its structure (keys and paths, columns,
 * root element, imports and symbols, section headers), with a raw head + tail sample and how to read the rest.
 * Pure string work.
 */
import * as OnDemand from "../../internal/OnDemand.js"
import { charLength, charsOf, joinChars } from "../../state/Chars.js"

/** What an output looks like. */
export type PreviewKind = "json" | "csv" | "tsv" | "yaml" | "xml" | "code" | "text" | "unknown"

/** A deterministic description of a large output (no model involved). */
export interface Synopsis {
  readonly kind: PreviewKind
  readonly title: string
  readonly summary: ReadonlyArray<string>
  readonly structure: ReadonlyArray<string>
  readonly notable: ReadonlyArray<string>
  /** A raw sample the synopsis chose itself (binary-like output); otherwise the preview takes head + tail. */
  readonly sample?: string | undefined
}

/** Outputs larger than this are described by size only: parsing them would cost more than it tells. */
export const MAX_PARSE_CHARS = 5 * 1024 * 1024

const KEY_LIMIT = 12
const SCALAR_LIMIT = 6
const PATH_LIMIT = 24
const PATH_DEPTH = 4
const TABLE_SAMPLE_LINES = 50
const TABLE_COLUMN_LIMIT = 18
const HEADER_LIMIT = 16
const EXCERPT_CHARS = 420

const clip = (text: string, limit: number) => {
  if (limit <= 0) return ""
  if (text.length <= limit) return text
  const chars = charsOf(text)
  return chars.length <= limit ? text : `${joinChars(chars, 0, Math.max(0, limit - 3))}...`
}

const oneLine = (text: string, limit: number) => clip(text.replace(/\s+/g, " ").trim(), limit)

const countLines = (text: string) => {
  if (text === "") return 0
  let lines = 1
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) if (i < text.length - 1) lines++
  return lines
}

const looksBinary = (text: string) => {
  if (text.includes("\0")) return true
  const sample = text.slice(0, 1000)
  let controls = 0
  for (let i = 0; i < sample.length; i++) {
    const code = sample.charCodeAt(i)
    if (code < 32 && code !== 9 && code !== 10 && code !== 13) controls++
  }
  return controls / Math.max(1, sample.length) > 0.05
}

const typeName = (value: unknown): string =>
  Array.isArray(value) ? "array" : value === null ? "null" : typeof value === "object" ? "object" : typeof value

const describeContainer = (value: unknown): string => {
  if (Array.isArray(value)) {
    return `array length ${value.length}${value.length > 0 ? `; first item ${typeName(value[0])}` : ""}`
  }
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value)
    return `object keys ${keys.length}${keys.length > 0 ? `; keys ${keys.slice(0, KEY_LIMIT).join(", ")}` : ""}`
  }
  return typeName(value)
}

const jsonPath = (parent: string, key: string) =>
  /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`

const containerPaths = (root: unknown): Array<string> => {
  const paths: Array<string> = []
  const walk = (node: unknown, at: string, depth: number): void => {
    if (paths.length >= PATH_LIMIT || depth >= PATH_DEPTH) return
    if (Array.isArray(node)) {
      if (node.length > 0 && typeof node[0] === "object" && node[0] !== null) walk(node[0], `${at}[]`, depth + 1)
      return
    }
    if (typeof node !== "object" || node === null) return
    for (const [key, child] of Object.entries(node).slice(0, KEY_LIMIT)) {
      if (paths.length >= PATH_LIMIT) return
      if (typeof child !== "object" || child === null) continue
      const next = jsonPath(at, key)
      paths.push(`${next}: ${describeContainer(child)}`)
      walk(child, next, depth + 1)
    }
  }
  walk(root, "$", 0)
  return paths
}

const scalarExamples = (root: unknown): Array<string> => {
  const out: Array<string> = []
  const walk = (node: unknown, at: string, depth: number): void => {
    if (out.length >= SCALAR_LIMIT || depth >= PATH_DEPTH) return
    if (Array.isArray(node)) {
      node.slice(0, 2).forEach((child, i) => walk(child, `${at}[${i}]`, depth + 1))
      return
    }
    if (typeof node === "object" && node !== null) {
      for (const [key, child] of Object.entries(node).slice(0, KEY_LIMIT)) {
        if (out.length >= SCALAR_LIMIT) return
        walk(child, jsonPath(at, key), depth + 1)
      }
      return
    }
    out.push(`${at}: ${typeof node === "string" ? JSON.stringify(clip(node, 80)) : clip(String(node), 80)}`)
  }
  walk(root, "$", 0)
  return out
}

const jsonSynopsis = (value: unknown, extra: Array<string> = []): Synopsis => {
  const summary: Array<string> = []
  const structure: Array<string> = []
  if (Array.isArray(value)) {
    summary.push(`JSON array with ${value.length} items.`)
    if (value.length > 0) structure.push(`first item type: ${typeName(value[0])}`)
  } else if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value)
    summary.push(`JSON object with ${keys.length} top-level keys.`)
    if (keys.length > 0) {
      summary.push(`Top-level keys: ${keys.slice(0, KEY_LIMIT).join(", ")}${keys.length > KEY_LIMIT ? ", ..." : ""}`)
    }
  } else summary.push(`JSON ${typeName(value)}.`)
  structure.push(...containerPaths(value))
  return { kind: "json", title: "JSON output", summary, structure, notable: [...scalarExamples(value), ...extra] }
}

const tryJson = (text: string): Synopsis | undefined => {
  const trimmed = text.trim()
  if (trimmed[0] !== "{" && trimmed[0] !== "[") return undefined
  try {
    return jsonSynopsis(JSON.parse(trimmed))
  } catch {
    // JSON Lines: one value per line.
    const lines = trimmed.split("\n").filter((line) => line.trim() !== "")
    if (lines.length < 2) return undefined
    const values: Array<unknown> = []
    for (const line of lines.slice(0, 200)) {
      const t = line.trim()
      if (t[0] !== "{" && t[0] !== "[") return undefined
      try {
        values.push(JSON.parse(t))
      } catch {
        return undefined
      }
    }
    const synopsis = jsonSynopsis(values[0])
    return {
      ...synopsis,
      title: "JSON Lines output",
      summary: [
        `JSON Lines: ${lines.length} records, one per line.`,
        ...synopsis.summary.map((s) => `First record: ${s}`)
      ]
    }
  }
}

const tryXml = (text: string): Synopsis | undefined => {
  const trimmed = text.trim()
  if (trimmed[0] !== "<") return undefined
  const { XMLParser, XMLValidator } = OnDemand.fastXmlParser()
  if (XMLValidator.validate(trimmed) !== true) return undefined
  let parsed: Record<string, unknown>
  try {
    const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@_", processEntities: false })
    parsed = parser.parse(trimmed) as Record<string, unknown>
  } catch {
    return undefined
  }
  const root = Object.keys(parsed).find((key) => !key.startsWith("?") && !key.startsWith("#"))
  if (root === undefined) return undefined
  const body = parsed[root]
  const children = new Map<string, number>()
  let attributes = 0
  if (typeof body === "object" && body !== null) {
    for (const [key, child] of Object.entries(body)) {
      if (key.startsWith("@_")) attributes++
      else if (key !== "#text") children.set(key, Array.isArray(child) ? child.length : 1)
    }
  }
  const counts = [...children].sort((a, b) => b[1] - a[1]).slice(0, KEY_LIMIT)
  return {
    kind: "xml",
    title: "XML output",
    summary: [`XML document with root tag ${root}.`],
    structure: [`root tag: ${root}`, `root attributes: ${attributes}`, ...counts.map(([tag, n]) => `${tag}: ${n}`)],
    notable: []
  }
}

const splitRow = (line: string, delimiter: string): Array<string> => {
  const cells: Array<string> = []
  let cell = ""
  let quoted = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (quoted) {
      if (c === "\"" && line[i + 1] === "\"") {
        cell += "\""
        i++
      } else if (c === "\"") quoted = false
      else cell += c
    } else if (c === "\"" && cell === "") quoted = true
    else if (c === delimiter) {
      cells.push(cell)
      cell = ""
    } else cell += c
  }
  cells.push(cell)
  return cells
}

const HEADER_CELL = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/

const tryTable = (text: string, delimiter: string, kind: "csv" | "tsv"): Synopsis | undefined => {
  const lines = text.split("\n", TABLE_SAMPLE_LINES).map((l) => l.replace(/\r$/, "")).filter((l) => l.trim() !== "")
  if (lines.length < 6) return undefined
  const header = splitRow(lines[0]!, delimiter)
  if (header.length < 2) return undefined
  // Indented shell output, `ls -l` listings and prose with a comma would pass a width check alone: the
  // header must look like column names and at least 5 of the next 10 rows must have its width.
  if (header.some((cell) => !HEADER_CELL.test(cell.trim()) || /^\s/.test(cell))) return undefined
  const rows = lines.slice(1, 11).map((l) => splitRow(l, delimiter))
  if (rows.filter((row) => row.length === header.length).length < 5) return undefined
  let dataRows = -1
  for (const line of text.split("\n")) if (line.trim() !== "") dataRows++
  const first = rows[0]!
  const pairs = header.slice(0, TABLE_COLUMN_LIMIT).map((name, i) => `${name.trim()}=${clip(first[i] ?? "", 80)}`)
  return {
    kind,
    title: `${kind.toUpperCase()} table output`,
    summary: [`${kind.toUpperCase()} table with ${dataRows} data rows and ${header.length} columns.`],
    structure: [
      `columns: ${header.slice(0, TABLE_COLUMN_LIMIT).map((c) => c.trim()).join(", ")}` +
      (header.length > TABLE_COLUMN_LIMIT ? ", ..." : ""),
      `first data row: ${pairs.join(" | ")}`
    ],
    notable: []
  }
}

const CODE_HINTS = [
  /^\s*(?:from\s+\S+\s+import\s|import\s+\S+)/m,
  /^\s*(?:class|def|async\s+def|function|export\s+(?:async\s+)?function|export\s+(?:default\s+)?class)\s+[A-Za-z_$]/m,
  // Rust, Go, Java: the strong forms only (`use x;`, `fn f(`), so prose such as "use the following" is not code.
  /^\s*(?:package\s+[A-Za-z_][\w.]*\s*;?$|use\s+[A-Za-z_][\w:]*\s*;)/m,
  /^\s*(?:(?:pub\s+)?fn\s+[A-Za-z_]\w*\s*[(<]|public\s+(?:static\s+)?class\s+[A-Za-z_]\w*)/m
]

const looksCode = (text: string) => CODE_HINTS.some((hint) => hint.test(text))

const YAML_KEY_LINE = /^\s*[A-Za-z_][A-Za-z0-9_.-]*:\s*\S.*$/

const looksYaml = (text: string) => {
  if (text.trimStart().startsWith("---")) return true
  if (looksCode(text)) return false
  let keys = 0
  for (const line of text.split("\n", 80)) {
    if (!YAML_KEY_LINE.test(line)) continue
    const key = line.slice(0, line.indexOf(":")).trim()
    // `INFO: starting` is a log line, not a mapping.
    if (key === key.toUpperCase() && !key.includes("_")) continue
    if (++keys >= 3) return true
  }
  return false
}

const tryYaml = (text: string): Synopsis | undefined => {
  if (!looksYaml(text)) return undefined
  let value: unknown
  try {
    value = OnDemand.yaml().parse(text, { maxAliasCount: 100 })
  } catch {
    return undefined
  }
  if (Array.isArray(value)) {
    return {
      kind: "yaml",
      title: "YAML output",
      summary: [`YAML array with ${value.length} items.`],
      structure: value.length > 0 ? [`first item type: ${typeName(value[0])}`] : [],
      notable: []
    }
  }
  if (typeof value !== "object" || value === null) return undefined
  const entries = Object.entries(value)
  // Logs and tracebacks parse as flat maps of strings: that is text, not configuration.
  if (entries.length === 0 || entries.every(([, v]) => typeof v === "string")) return undefined
  return {
    kind: "yaml",
    title: "YAML output",
    summary: [
      `YAML object with ${entries.length} top-level keys.`,
      `Top-level keys: ${entries.slice(0, KEY_LIMIT).map(([k]) => k).join(", ")}` +
      (entries.length > KEY_LIMIT ? ", ..." : "")
    ],
    structure: entries.slice(0, KEY_LIMIT).map(([k, v]) => `${k}: ${typeName(v)}`),
    notable: []
  }
}

const codeSynopsis = (text: string): Synopsis => {
  const lines = text.split("\n")
  const imports: Array<string> = []
  const symbols: Array<string> = []
  for (const line of lines) {
    const t = line.trim()
    const imported = /^(?:from\s+(\S+)\s+import|import\s+(\S+))/.exec(t)
    if (imported !== null) {
      imports.push(oneLine(imported[1] ?? imported[2] ?? "", 160))
      continue
    }
    const symbol = /^(class|def|async\s+def|function|export\s+function|pub\s+fn|fn)\s+([A-Za-z_$][\w$]*)/.exec(t)
    if (symbol !== null) symbols.push(oneLine(`${symbol[1]} ${symbol[2]}`, 180))
  }
  return {
    kind: "code",
    title: "Code-like output",
    summary: [`Code-like text with ${lines.length} lines.`],
    structure: [
      `line count: ${lines.length}`,
      ...(imports.length > 0 ? [`imports: ${imports.slice(0, 12).join(", ")}`] : [])
    ],
    notable: symbols.slice(0, 24)
  }
}

const textSynopsis = (text: string, tool: string, excerpts: boolean): Synopsis => {
  const lines = text.split("\n")
  const headers: Array<string> = []
  const seen = new Set<string>()
  for (const line of lines) {
    const t = line.trim()
    if (t === "" || !(/^#{1,6}\s+/.test(t) || /^[A-Z0-9][A-Z0-9\s:_-]{6,}$/.test(t))) continue
    const header = oneLine(t, 160)
    if (seen.has(header)) continue
    seen.add(header)
    headers.push(header)
    if (headers.length >= HEADER_LIMIT) break
  }
  const words = text.split(/\s+/).filter((w) => w !== "").length
  const summary = [
    `Text output${tool !== "" ? ` from ${tool}` : ""} with ${text.length} characters, ${words} words, and ` +
    `${lines.length} lines.`,
    `Detected section headers: ${headers.length > 0 ? headers.join(" | ") : "none detected"}.`
  ]
  if (excerpts) {
    summary.push(`Opening excerpt: ${oneLine(text.slice(0, EXCERPT_CHARS), EXCERPT_CHARS) || "(empty)"}`)
    if (text.length > EXCERPT_CHARS) {
      const closing = text.slice(Math.max(EXCERPT_CHARS, text.length - EXCERPT_CHARS))
      summary.push(`Closing excerpt: ${oneLine(closing, EXCERPT_CHARS)}`)
    }
  }
  return { kind: "text", title: "Text output", summary, structure: [], notable: [] }
}

/**
 * A typed synopsis of `text`: JSON (and JSON Lines), XML, TSV, CSV, YAML, code or plain text, tried in that
 * order. `excerpts` adds the first and last lines to a text synopsis (left out when a raw sample follows).
 */
export const synopsisOf = (text: string, tool = "", excerpts = true): Synopsis => {
  if (text === "") {
    return {
      kind: "unknown",
      title: "Empty output",
      summary: ["The tool returned nothing."],
      structure: [],
      notable: []
    }
  }
  if (looksBinary(text)) {
    const half = EXCERPT_CHARS
    return {
      kind: "unknown",
      title: "Binary-like output",
      summary: [`${text.length} characters, including control bytes that are not text.`],
      structure: [],
      notable: [],
      sample: text.length <= half * 2 ? text : `${text.slice(0, half)}\n...\n${text.slice(-half)}`
    }
  }
  if (text.length > MAX_PARSE_CHARS) {
    return {
      kind: "text",
      title: "Large output",
      summary: [`${text.length} characters in ${countLines(text)} lines; too large to analyse its structure.`],
      structure: [],
      notable: []
    }
  }
  return tryJson(text) ?? tryXml(text) ??
    (text.includes("\t") ? tryTable(text, "\t", "tsv") : undefined) ??
    (text.includes(",") ? tryTable(text, ",", "csv") : undefined) ??
    tryYaml(text) ??
    (looksCode(text) ? codeSynopsis(text) : textSynopsis(text, tool, excerpts))
}

/** The first `head` and last `tail` characters, each cut at a line boundary, joined by `...`. */
export const rawSample = (text: string, head: number, tail: number): string => {
  if (head <= 0 && tail <= 0) return ""
  const chars = charsOf(text)
  if (chars.length <= head + tail) return text
  const parts: Array<string> = []
  if (head > 0) {
    const start = joinChars(chars, 0, head)
    const cut = start.lastIndexOf("\n")
    parts.push(cut > 0 ? start.slice(0, cut) : start)
  }
  if (tail > 0) {
    const end = joinChars(chars, chars.length - tail)
    const cut = end.indexOf("\n")
    parts.push(cut >= 0 && cut < end.length - 1 ? end.slice(cut + 1) : end)
  }
  return parts.join("\n...\n")
}

/** Where a saved output is, and how much raw text the preview shows. */
export interface PreviewOptions {
  readonly tool: string
  readonly virtualPath: string
  readonly headChars: number
  readonly tailChars: number
}

/**
 * What replaces a saved output: where the full text is and how big it is, its kind, the synopsis, a raw
 * head + tail sample, and how to read the rest.
 */
export const renderPreview = (text: string, options: PreviewOptions): string => {
  const { headChars, tailChars, tool, virtualPath } = options
  const head = Math.max(0, headChars)
  const tail = Math.max(0, tailChars)
  const total = charLength(text)
  const withSample = head + tail > 0 && total > head + tail
  const synopsis = synopsisOf(text, tool, !withSample)
  const lines = [
    `[Full ${tool} output saved to ${virtualPath} (${total} chars, ~${Math.floor(total / 4)} tokens).]`,
    `[Preview kind: ${synopsis.kind}. What follows describes the output's structure; it is not the output cut short.]`,
    "",
    `${synopsis.title}:`,
    ...synopsis.summary.map((s) => `- ${s}`)
  ]
  if (synopsis.structure.length > 0) lines.push("", "Structure:", ...synopsis.structure.map((s) => `- ${s}`))
  if (synopsis.notable.length > 0) lines.push("", "Notable items:", ...synopsis.notable.map((s) => `- ${s}`))
  const sample = synopsis.sample ?? rawSample(text, head, tail)
  if (sample !== "") {
    lines.push("", `Raw sample (head + tail, clipped to the first ${head} and last ${tail} characters):`, sample)
  }
  lines.push(
    "",
    "Access:",
    `- The full output is in ${virtualPath}: read it with read_file, using start_line and end_line to page through it.`
  )
  return lines.join("\n")
}
