/**
 * PPTX → Markdown: jszip + fast-xml-parser; `## Slide N: {title}` (the title placeholder, else the first text),
 * text as bullets, tables as GFM tables, speaker notes as `> Note:`.
 */
import type JSZip from "jszip"
import * as Path from "node:path"
import * as OnDemand from "../../internal/OnDemand.js"
import { converterPackage, joinBlocks, markdownTable, plainLine } from "./Markdown.js"

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

/** The Markdown of a PPTX file: one section per slide, in presentation order. */
export const pptxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
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
