/**
 * ToolOutputBudget (SPEC §5.2): no single tool result may flood the model's context.
 *
 * - Tool wrap (the last transformation of every result): a text result longer than its threshold
 *   (`externalize_min_chars`, or the tool's override) is saved in full to
 *   `{outputs}/.tool-results/{tool}-{12 hex}.{log|txt}` and replaced by a typed synopsis that names the
 *   file, so the model can `read_file` any part of it. When it cannot be saved, a result longer than
 *   `fallback_max_chars` is cut to its head and tail with a marker saying how much was left out.
 * - Model wrap (request-only): tool results already in the history that are longer than
 *   `fallback_max_chars` are cut the same way (never saved from there).
 *
 * `read_file` is exempt, so a saved output read back is not saved again.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as OnDemand from "../internal/OnDemand.js"
import type { ToolOutputConfig } from "../services/AppConfig.js"
import { AppConfigService, ToolOutputConfig as ToolOutputConfigSchema } from "../services/AppConfig.js"
import type { ModelRequest } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { Sandbox } from "../services/Sandbox.js"
import { OUTPUTS, SandboxProvider } from "../services/Sandbox.js"
import type { ToolResult } from "../services/ToolService.js"
import type { Content, Message, ToolMessage } from "../state/Message.js"
import * as Incremental from "./Incremental.js"
import * as Middleware from "./Middleware.js"
import { resolveThreadPaths } from "./ThreadData.js"
import * as Chain from "./Chain.js"

// ---------------------------------------------------------------------------------------------------------
// Text of a result

/** The text of a tool result: a string, or text blocks joined by newlines; `undefined` if any block is not text. */
export const resultText = (content: Content): string | undefined => {
  if (typeof content === "string") return content
  if (content.length === 0) return undefined
  let out = ""
  for (let i = 0; i < content.length; i++) {
    const block = content[i]!
    if (block.type !== "text" || typeof block.text !== "string") return undefined
    out = i === 0 ? block.text : `${out}\n${block.text}`
  }
  return out
}

/** The length `resultText` would have, without building it; -1 when the content is not text. */
export const resultTextLength = (content: Content): number => {
  if (typeof content === "string") return content.length
  if (content.length === 0) return -1
  let length = content.length - 1
  for (let i = 0; i < content.length; i++) {
    const block = content[i]!
    if (block.type !== "text" || typeof block.text !== "string") return -1
    length += block.text.length
  }
  return length
}

// ---------------------------------------------------------------------------------------------------------
// Head + tail truncation (when the full text cannot be saved)

/** An end offset moved back to just after a newline, if one lies in the second half of `text[0:pos]`. */
export const snapEnd = (text: string, pos: number): number => {
  if (pos <= 0 || pos >= text.length) return pos
  const newline = text.lastIndexOf("\n", pos - 1)
  return newline >= Math.floor(pos / 2) ? newline + 1 : pos
}

/** A start offset moved forward to just after a newline, if one lies in the first half of `text[pos:]`. */
export const snapStart = (text: string, pos: number): number => {
  if (pos <= 0 || pos >= text.length) return pos
  const newline = text.indexOf("\n", pos)
  return newline >= 0 && newline < pos + Math.floor((text.length - pos) / 2) ? newline + 1 : pos
}

const omittedMarker = (omitted: number, tool: string) =>
  `\n\n[... ${omitted} chars omitted from ${tool} output. The full output could not be saved; narrow the query ` +
  `or use more specific parameters to see what is missing.]\n\n`

/**
 * The head and tail of `text` around a marker saying how many characters were left out, never longer than
 * `maxChars`. The head ends and the tail starts on a line boundary when one is near.
 */
export const truncateHeadTail = (
  text: string,
  tool: string,
  maxChars: number,
  headChars: number,
  tailChars: number
): string => {
  const total = text.length
  if (maxChars <= 0 || total <= maxChars) return text
  const overhead = omittedMarker(total, tool).length
  if (overhead >= maxChars) return text.slice(0, maxChars)
  const budget = maxChars - overhead
  const head = Math.min(headChars, budget)
  const tail = Math.min(tailChars, Math.max(0, budget - head))
  const headEnd = snapEnd(text, Math.min(head, total))
  const tailStart = snapStart(text, Math.max(headEnd, total - tail))
  const tailText = tailStart < total ? text.slice(tailStart) : ""
  return text.slice(0, headEnd) + omittedMarker(total - headEnd - tailText.length, tool) + tailText
}

// ---------------------------------------------------------------------------------------------------------
// Typed synopsis

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

const clip = (text: string, limit: number) =>
  limit <= 0 ? "" : text.length <= limit ? text : `${text.slice(0, Math.max(0, limit - 3))}...`

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
    return value.length === 0 ? "array, empty" : `array of ${value.length}, first item ${typeName(value[0])}`
  }
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value)
    return `object with ${keys.length} keys${keys.length > 0 ? `: ${keys.slice(0, KEY_LIMIT).join(", ")}` : ""}`
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
    summary.push(`A JSON array of ${value.length} items.`)
    if (value.length > 0) structure.push(`items: ${typeName(value[0])} (first item)`)
  } else if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value)
    summary.push(`A JSON object with ${keys.length} top-level keys.`)
    if (keys.length > 0) {
      summary.push(`Top-level keys: ${keys.slice(0, KEY_LIMIT).join(", ")}${keys.length > KEY_LIMIT ? ", ..." : ""}`)
    }
  } else summary.push(`A JSON ${typeName(value)}.`)
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
    summary: [`An XML document with root element <${root}>.`],
    structure: [`root attributes: ${attributes}`, ...counts.map(([tag, n]) => `child <${tag}>: ${n}`)],
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
    summary: [`A ${kind.toUpperCase()} table with ${dataRows} data rows and ${header.length} columns.`],
    structure: [
      `columns: ${header.slice(0, TABLE_COLUMN_LIMIT).map((c) => c.trim()).join(", ")}` +
      (header.length > TABLE_COLUMN_LIMIT ? ", ..." : ""),
      `first row: ${pairs.join(" | ")}`
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
      summary: [`A YAML list of ${value.length} items.`],
      structure: value.length > 0 ? [`items: ${typeName(value[0])} (first item)`] : [],
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
      `A YAML mapping with ${entries.length} top-level keys.`,
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
    summary: [`Code-like text, ${lines.length} lines.`],
    structure: [
      `lines: ${lines.length}`,
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
    `Text${tool !== "" ? ` from ${tool}` : ""}: ${text.length} characters, ${words} words, ${lines.length} lines.`,
    `Section headers: ${headers.length > 0 ? headers.join(" | ") : "none found"}.`
  ]
  if (excerpts) {
    summary.push(`Begins: ${oneLine(text.slice(0, EXCERPT_CHARS), EXCERPT_CHARS) || "(empty)"}`)
    if (text.length > EXCERPT_CHARS) {
      summary.push(`Ends: ${oneLine(text.slice(Math.max(EXCERPT_CHARS, text.length - EXCERPT_CHARS)), EXCERPT_CHARS)}`)
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
  if (text.length <= head + tail) return text
  const parts: Array<string> = []
  if (head > 0) {
    const start = text.slice(0, head)
    const cut = start.lastIndexOf("\n")
    parts.push(cut > 0 ? start.slice(0, cut) : start)
  }
  if (tail > 0) {
    const end = text.slice(-tail)
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
  const withSample = head + tail > 0 && text.length > head + tail
  const synopsis = synopsisOf(text, tool, !withSample)
  const lines = [
    `[Full ${tool} output saved to ${virtualPath} (${text.length} chars, ~${Math.floor(text.length / 4)} tokens).]`,
    `[Preview kind: ${synopsis.kind}. What follows describes the output's structure; it is not the output cut short.]`,
    "",
    `${synopsis.title}:`,
    ...synopsis.summary.map((s) => `- ${s}`)
  ]
  if (synopsis.structure.length > 0) lines.push("", "Structure:", ...synopsis.structure.map((s) => `- ${s}`))
  if (synopsis.notable.length > 0) lines.push("", "Notable items:", ...synopsis.notable.map((s) => `- ${s}`))
  const sample = synopsis.sample ?? rawSample(text, head, tail)
  if (sample !== "") lines.push("", `Raw sample (first ${head} and last ${tail} characters at most):`, sample)
  lines.push(
    "",
    "Access:",
    `- The full output is in ${virtualPath}: read it with read_file, using start_line and end_line to page through it.`
  )
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------------------
// Saving the full text

/** A tool name made safe as part of a file name. */
export const safeToolName = (name: string): string => {
  const safe = name.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^\.+/, "").replace(/\.{2,}/g, "_").slice(0, 64)
  return safe === "" ? "unknown" : safe
}

const LOG_TOOLS: ReadonlySet<string> = new Set(["bash", "bash_tool", "web_fetch"])

/**
 * `{tool}-{12 hex}.{log|txt}`: the hash covers the call id and the content, so two calls never share a file
 * while the same result saved twice lands in the same one.
 */
export const externalizedFileName = (tool: string, toolCallId: string, text: string): string => {
  const id = Buffer.from(toolCallId, "utf8")
  const length = Buffer.alloc(8)
  length.writeBigUInt64BE(BigInt(id.length))
  const hex = createHash("sha256").update(length).update(id).update(text, "utf8").digest("hex").slice(0, 12)
  return `${safeToolName(tool)}-${hex}.${LOG_TOOLS.has(tool) ? "log" : "txt"}`
}

/** Writes the file atomically (temporary sibling, then rename). */
const writeHostFile = (dir: string, file: string, text: string): Effect.Effect<void, unknown> =>
  Effect.tryPromise(async () => {
    await fs.mkdir(dir, { recursive: true })
    const target = path.join(dir, file)
    if (path.dirname(target) !== path.resolve(dir)) throw new Error(`unsafe file name ${file}`)
    const temporary = path.join(dir, `.tool-output-${randomBytes(8).toString("hex")}.tmp`)
    try {
      await fs.writeFile(temporary, text, { flag: "wx" })
      await fs.rename(temporary, target)
    } catch (error) {
      await fs.rm(temporary, { force: true })
      throw error
    }
  })

/** Writes into a sandbox that is not the host's thread directories, and checks the whole file arrived. */
const writeSandboxFile = (sandbox: Sandbox, virtualPath: string, text: string): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    yield* sandbox.writeText(virtualPath, text)
    const info = yield* sandbox.stat(virtualPath)
    const expected = Buffer.byteLength(text, "utf8")
    if (info.kind !== "file" || info.size !== expected) {
      return yield* Effect.fail(new Error(`the saved file has ${info.size} bytes, ${expected} expected`))
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Budgeting

/** ToolOutputBudget's settings: `tool_output` of config.yaml. */
export type Config = ToolOutputConfig

const defaults = Schema.decodeSync(ToolOutputConfigSchema)({})

/** The defaults of `tool_output` (SPEC §13). */
export const defaultConfig = (): Config => defaults

/** The externalisation threshold of a tool (its override, else `externalize_min_chars`; 0 = never). */
export const thresholdOf = (config: Config, tool: string): number =>
  Object.hasOwn(config.tool_overrides, tool) ? config.tool_overrides[tool]! : config.externalize_min_chars

/** The shortest text that could need budgeting for this tool; -1 when nothing ever does. */
export const triggerOf = (config: Config, tool: string): number => {
  const threshold = thresholdOf(config, tool)
  const fallback = config.fallback_max_chars
  if (threshold > 0 && fallback > 0) return Math.min(threshold, fallback)
  return threshold > 0 ? threshold : fallback > 0 ? fallback : -1
}

const toolName = (message: ToolMessage) => message.name ?? "unknown"

/** Where to save a tool's full output, if anywhere: returns the virtual path on success. */
export type Persist = (text: string, tool: string, toolCallId: string) => Effect.Effect<Option.Option<string>>

/**
 * A tool message within budget: unchanged when small enough or not text; saved and replaced by a synopsis
 * when over its threshold and `persist` succeeds; else cut to head + tail when over `fallback_max_chars`.
 */
export const budgetMessage = (message: ToolMessage, config: Config, persist: Persist): Effect.Effect<ToolMessage> =>
  Effect.suspend(() => {
    const tool = toolName(message)
    if (config.exempt_tools.includes(tool)) return Effect.succeed(message)
    const text = resultText(message.content)
    if (text === undefined) return Effect.succeed(message)
    const threshold = thresholdOf(config, tool)
    if (text.length <= threshold && text.length <= config.fallback_max_chars) return Effect.succeed(message)
    const fallback = () =>
      config.fallback_max_chars > 0 && text.length > config.fallback_max_chars
        ? {
          ...message,
          content: truncateHeadTail(
            text,
            tool,
            config.fallback_max_chars,
            config.fallback_head_chars,
            config.fallback_tail_chars
          )
        }
        : message
    if (threshold <= 0 || text.length <= threshold) return Effect.succeed(fallback())
    return Effect.map(persist(text, tool, message.tool_call_id), (saved) =>
      Option.match(saved, {
        onNone: fallback,
        onSome: (virtualPath) => ({
          ...message,
          content: renderPreview(text, {
            tool,
            virtualPath,
            headChars: config.preview_head_chars,
            tailChars: config.preview_tail_chars
          })
        })
      }))
  })

const overBudget = (message: ToolMessage, config: Config) => {
  const tool = toolName(message)
  const trigger = triggerOf(config, tool)
  return trigger >= 0 && resultTextLength(message.content) > trigger && !config.exempt_tools.includes(tool)
}

/** Whether a result (its message, or a tool message in its update) could need budgeting. Cheap. */
export const needsBudget = (result: ToolResult, config: Config): boolean => {
  if (overBudget(result.message, config)) return true
  const writes = result.update?.messages
  if (writes === undefined) return false
  for (const write of writes) if (write.type === "tool" && overBudget(write, config)) return true
  return false
}

/** A result within budget: its message and every tool message of its update. */
export const budgetResult = (result: ToolResult, config: Config, persist: Persist): Effect.Effect<ToolResult> =>
  Effect.gen(function*() {
    const message = yield* budgetMessage(result.message, config, persist)
    const writes = result.update?.messages
    if (writes === undefined || result.update === undefined) {
      return message === result.message ? result : { ...result, message }
    }
    const patched = yield* Effect.forEach(writes, (write) =>
      write.type === "tool" && overBudget(write, config)
        ? budgetMessage(write, config, persist)
        : Effect.succeed(write))
    const changed = patched.some((write, i) => write !== writes[i])
    if (message === result.message && !changed) return result
    return { message, update: changed ? { ...result.update, messages: patched } : result.update }
  })

/** Cut results by message object (kept by the middleware for its agent's life), so a cut is made once. */
export type HistoryCache = WeakMap<ToolMessage, ToolMessage>

/**
 * The history pass: tool results longer than `fallback_max_chars` cut to head + tail; the same array when
 * none is (one pass over the messages, reading lengths only).
 */
export const truncateHistory = (
  messages: ReadonlyArray<Message>,
  config: Config,
  cache: HistoryCache = new WeakMap(),
  memo?: Incremental.Memo<ReadonlyArray<Message>>
): ReadonlyArray<Message> => {
  const max = config.fallback_max_chars
  if (max <= 0) return messages
  return Incremental.mapMessages(messages, (message) => {
    if (message.type !== "tool" || resultTextLength(message.content) <= max) return message
    const tool = toolName(message)
    if (config.exempt_tools.includes(tool)) return message
    let cut = cache.get(message)
    if (cut === undefined) {
      cut = {
        ...message,
        content: truncateHeadTail(
          resultText(message.content)!,
          tool,
          max,
          config.fallback_head_chars,
          config.fallback_tail_chars
        )
      }
      cache.set(message, cut)
    }
    return cut
  }, memo)
}

/**
 * The request with its history within budget; the same object when nothing changes. With a memo (kept by the
 * middleware), only the messages new since the last request are looked at (see `Incremental`).
 */
export const budgetRequest = (
  request: ModelRequest,
  config: Config,
  cache?: HistoryCache,
  memo?: Incremental.Memo<ReadonlyArray<Message>>
): ModelRequest => {
  const messages = truncateHistory(request.messages, config, cache, memo)
  return messages === request.messages ? request : { ...request, messages }
}

/**
 * ToolOutputBudget, with `tool_output` settings (defaults for anything left out). Needs `AppConfigService`
 * (the data directory), `RunContext` and `RunState`. Uses the `SandboxProvider` when one is in context: a
 * sandbox that does not use the thread's host directories gets the file inside it.
 *
 * The thread's outputs directory is `thread_data.outputs_path` from state, else the sandbox's, else the one
 * under the data directory.
 */
export const layer = (options: Partial<Config> = {}): Middleware.Middleware<AppConfigService> => {
  const config: Config = { ...defaultConfig(), ...options }
  if (!config.enabled) return Middleware.make({})
  return Layer.unwrapEffect(Effect.sync(() => perRun(config, new WeakMap(), Incremental.makeMemo())))
}

const perRun = (config: Config, cache: HistoryCache, memo: Incremental.Memo<ReadonlyArray<Message>>) =>
  Middleware.make(Effect.gen(function*() {
    const { home } = yield* AppConfigService
    const context = yield* RunContext
    const state = yield* RunState
    const provider = yield* Effect.serviceOption(SandboxProvider)

    const persistFor = (result: ToolResult): Persist => (text, tool, toolCallId) =>
      Effect.gen(function*() {
        const current = yield* state.get
        const sandboxId = current.sandbox?.sandbox_id ?? result.update?.sandbox?.sandbox_id ?? undefined
        const sandbox = Option.isSome(provider) && sandboxId != null
          ? Option.getOrUndefined(yield* provider.value.get(sandboxId))
          : undefined
        const file = externalizedFileName(tool, toolCallId, text)
        const virtualPath = `${OUTPUTS}/${config.storage_subdir}/${file}`
        if (sandbox !== undefined && !sandbox.usesThreadDataMounts) {
          yield* writeSandboxFile(sandbox, virtualPath, text)
          return virtualPath
        }
        const outputs = current.thread_data?.outputs_path ?? sandbox?.paths.outputs ??
          (yield* resolveThreadPaths(home, context.userId, context.threadId)).outputs
        yield* writeHostFile(path.join(outputs, config.storage_subdir), file, text)
        return virtualPath
      }).pipe(
        Effect.map(Option.some),
        Effect.catchAllCause((cause) =>
          Effect.as(
            Effect.logWarning(`Could not save the full ${tool} output; it is cut to head and tail instead`, cause),
            Option.none()
          )
        )
      )

    return {
      tool: (call, next) =>
        Effect.flatMap(next(call), (result) =>
          needsBudget(result, config) ? budgetResult(result, config, persistFor(result)) : Effect.succeed(result)),
      model: (request, next) => Effect.suspend(() => next(budgetRequest(request, config, cache, memo)))
    }
  }))

/** Its chain entry: the outermost tool wrap, so budgeting is the last transformation of every tool result. */
export const entry = (options: Partial<Config> = {}) =>
  Chain.entry("ToolOutputBudget", () => layer(options), [
    { outside: "SandboxAudit", reason: "budgeting is the last transformation of every tool result" },
    { outside: "ToolErrorHandling", reason: "budgeting is the last transformation of every tool result" }
  ])
