/**
 * Source maps for start-up profiles of the bundled CLI: a frame in dist/cli/main.cjs is mapped back to the module
 * it came from (`node_modules/effect/dist/esm/Schema.js`, `src/programs/cli/Cli.ts`), so that the summary of
 * bench/cpuProfile.ts says which package and module cost what, as it does for the unbundled program. A small
 * reader of source map v3 (`mappings` in base64 VLQ); pure functions.
 */
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { CpuProfile } from "./cpuProfile.js"

/** The parts of a source map v3 read here. */
export interface SourceMapV3 {
  readonly version: number
  readonly sources: ReadonlyArray<string>
  readonly sourceRoot?: string
  readonly mappings: string
}

/** One mapped segment: from generated column `column` of its line on, the position in `source`. */
interface Segment {
  readonly column: number
  readonly source: number
  readonly line: number
  readonly sourceColumn: number
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const DIGIT: ReadonlyMap<string, number> = new Map([...BASE64].map((c, i) => [c, i]))

/** The segments of each generated line (0-based lines), sorted by column. */
export const decodeMappings = (mappings: string): ReadonlyArray<ReadonlyArray<Segment>> => {
  const lines: Array<Array<Segment>> = []
  let source = 0
  let line = 0
  let sourceColumn = 0
  for (const text of mappings.split(";")) {
    const segments: Array<Segment> = []
    let column = 0
    for (const part of text.split(",")) {
      if (part === "") continue
      const fields: Array<number> = []
      let value = 0
      let shift = 0
      for (const c of part) {
        const digit = DIGIT.get(c)
        if (digit === undefined) throw new Error(`invalid base64 VLQ character ${JSON.stringify(c)}`)
        value += (digit & 31) << shift
        if (digit & 32) shift += 5
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1)
          value = 0
          shift = 0
        }
      }
      column += fields[0] ?? 0
      if (fields.length >= 4) {
        source += fields[1]!
        line += fields[2]!
        sourceColumn += fields[3]!
        segments.push({ column, source, line, sourceColumn })
      }
    }
    lines.push(segments)
  }
  return lines
}

/** Maps a generated position (0-based line and column) to its source: the last segment at or before it. */
export const makeMapper = (map: SourceMapV3, mapFile: string) => {
  const lines = decodeMappings(map.mappings)
  const base = path.resolve(path.dirname(mapFile), map.sourceRoot ?? "")
  const urls = map.sources.map((source) => pathToFileURL(path.resolve(base, source)).href)
  return (line: number, column: number): { url: string; line: number; column: number } | undefined => {
    const segments = lines[line]
    if (segments === undefined || segments.length === 0) return undefined
    let lo = 0
    let hi = segments.length - 1
    if (segments[0]!.column > column) return undefined
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (segments[mid]!.column <= column) lo = mid
      else hi = mid - 1
    }
    const s = segments[lo]!
    return { url: urls[s.source]!, line: s.line, column: s.sourceColumn }
  }
}

/**
 * The profile with the frames of the bundle `bundleUrl` mapped to their sources, except the bundle's own body
 * (its top-level code, which runs the top-level code of every module bundled in it): that frame keeps the
 * bundle's URL, so `summarize` charges what runs under it to the module of the innermost mapped frame. A
 * CommonJS bundle compiled by bin/cli-loader.js has its body in the wrapper function on line 1: that frame is
 * made the module body (column 0), as Node's own loader would show it.
 */
export const mapProfile = (
  profile: CpuProfile,
  bundleUrl: string,
  map: SourceMapV3,
  mapFile: string
): CpuProfile => {
  const mapper = makeMapper(map, mapFile)
  return {
    ...profile,
    nodes: profile.nodes.map((node) => {
      const frame = node.callFrame
      if (frame.url !== bundleUrl) return node
      if (frame.functionName === "" && frame.lineNumber === 0) {
        return frame.columnNumber === 0 ? node : { ...node, callFrame: { ...frame, columnNumber: 0 } }
      }
      const mapped = mapper(frame.lineNumber, frame.columnNumber)
      return mapped === undefined
        ? node
        : { ...node, callFrame: { ...frame, url: mapped.url, lineNumber: mapped.line, columnNumber: mapped.column } }
    })
  }
}
