/**
 * XLSX → Markdown: exceljs; one `## {sheet}` heading and one table per sheet, formula cells as their cached
 * result, dates as ISO 8601.
 */
import type ExcelJS from "exceljs"
import { converterPackage, joinBlocks, markdownTable } from "./Markdown.js"

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

/** The Markdown of an XLSX file: a heading and a table per sheet. */
export const xlsxToMarkdown = async (bytes: Uint8Array): Promise<string> => {
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
