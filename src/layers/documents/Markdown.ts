/**
 * What the document converters share: the Markdown they build (GFM tables, plain text lines made safe for the
 * outline, blocks joined) and the loading of a converter's optional package.
 */
import * as OptionalPackage from "../../internal/OptionalPackage.js"

/**
 * Loads the package of a format's converter when a document of that format is first converted; a missing one
 * is a `MissingPackageError` naming it.
 */
export const converterPackage = <A>(name: string, format: string, loader: () => Promise<A>): Promise<A> =>
  OptionalPackage.load([name], `convert ${format} files to Markdown`, loader)

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

/** Blocks separated by a blank line, empty ones dropped; "" or text ending in one newline. */
export const joinBlocks = (blocks: ReadonlyArray<string>) => {
  const text = blocks.filter((block) => block.trim() !== "").join("\n\n").trim()
  return text === "" ? "" : `${text}\n`
}
