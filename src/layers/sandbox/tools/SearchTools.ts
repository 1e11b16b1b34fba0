/**
 * The tools that search: `glob` (paths) and `grep` (contents). Patterns are compiled with RE2 (linear time); a
 * search yields to the event loop between slices of work and stops after SEARCH_TIME_LIMIT, answering with what
 * it found so far.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ProcessSecrets from "../../../services/ProcessSecrets.js"
import { SandboxError } from "../../../services/Sandbox.js"
import * as Tool from "../../../services/Tool.js"
import { displayPath } from "../VirtualPaths.js"
import { GlobArgs, GrepArgs } from "./Args.js"
import { isJunk, WALK_MAX_ENTRIES } from "./Listing.js"
import { compileGlob, compileSearch } from "./Patterns.js"
import * as Texts from "./Texts.js"
import { clampMax, normalizeVirtual } from "./Text.js"
import type { ToolContext } from "./ToolContext.js"
import { charLength, headChars } from "../../../state/Chars.js"
import type { Redactor } from "../../../state/Redact.js"

const GREP_MAX_FILE_BYTES = 4 * 1024 * 1024
/** The longest matching line grep shows: a longer one is cut to its first 197 characters and `...` (DeerFlow's). */
const GREP_MAX_LINE_CHARS = 200
const GREP_COUNT_LIMIT = 10_000

/** How long one `glob` or `grep` may search; it then answers with what it found so far, saying so. */
export const SEARCH_TIME_LIMIT = Duration.seconds(20)

// A search hands the thread back to the event loop after about this much matching work (characters of
// lines, or paths), so other runs of the process (and Ctrl-C) are served while a long search goes on.
const SEARCH_SLICE_CHARS = 256 * 1024

/**
 * Runs a search that yields between slices of work for at most SEARCH_TIME_LIMIT; `true` when it ran to
 * the end, `false` when the limit stopped it (what it collected so far stays valid).
 */
const searchWithin = <E>(search: Effect.Effect<void, E>): Effect.Effect<boolean, E> =>
  Effect.timeoutTo(search, { duration: SEARCH_TIME_LIMIT, onSuccess: () => true, onTimeout: () => false })

/** Counts matching work; `true` when a slice is complete and the search should yield to the scheduler. */
const slicer = () => {
  let work = 0
  return (chars: number): boolean => {
    work += chars
    if (work < SEARCH_SLICE_CHARS) return false
    work = 0
    return true
  }
}

// Yields to the event loop, not only to other fibers: `Effect.yieldNow` resumes through a microtask, so a
// search yielding only that way would still hold back I/O callbacks (a model's streamed answer), timers and
// signals until it ended.
const breathe: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const stoppedNote = (what: string) =>
  `\n(The search stopped after ${Duration.toSeconds(SEARCH_TIME_LIMIT)} s, so ${what}; narrow the path, the ` +
  "pattern or the glob.)"

/**
 * The cap of one search: the call's `max_results` and the operator's (a `tools[]` entry's `max_results`, as
 * DeerFlow's `_resolve_max_results`), each ≤0 or absent → the default, clamped to [1, upper], the smaller wins.
 */
const effectiveMax = (requested: number | undefined, configured: number | undefined, fallback: number, upper: number) =>
  Math.min(clampMax(requested, fallback, upper), clampMax(configured, fallback, upper))

/** Options of a search tool: the operator's cap on `max_results` (a `tools[]` entry's `max_results`). */
export interface SearchOptions {
  readonly maxResults?: number | undefined
}

/** The `glob` tool. */
export const glob = ({ gate, withSandbox }: ToolContext, options: SearchOptions = {}) =>
  Tool.make({
    name: "glob",
    readOnly: true,
    description: Texts.GLOB_DESCRIPTION,
    parameters: GlobArgs,
    handler: (args, call) =>
      withSandbox("glob", (sandbox) =>
        gate(args.path, (hidden) => Effect.gen(function*() {
          const root = sandbox.mask(normalizeVirtual(args.path))
          if (args.pattern.startsWith("/")) {
            return "Error: The pattern must be relative to path (e.g. `**/*.py`), not absolute: " +
              displayPath(sandbox.mask(args.pattern))
          }
          const max = effectiveMax(args.max_results, options.maxResults, 200, 1000)
          const compiled = compileGlob(args.pattern)
          if ("error" in compiled) return `Error: Invalid glob pattern: ${compiled.error}`
          const walked = yield* sandbox.walk(args.path, { maxEntries: WALK_MAX_ENTRIES, skip: isJunk })
          const matches: Array<(typeof walked.entries)[number]> = []
          const slice = slicer()
          const finished = yield* searchWithin(Effect.gen(function*() {
            for (const entry of walked.entries) {
              if (slice(entry.relative.length + 64)) yield* breathe
              if (
                (entry.kind === "file" || args.include_dirs) && compiled.regex.test(entry.relative) &&
                !hidden(entry.path)
              ) {
                matches.push(entry)
              }
            }
          }))
          const stopped = (walked.truncated
            ? `\n(The search stopped after ${WALK_MAX_ENTRIES} entries; narrow the path.)`
            : "") + (finished ? "" : stoppedNote("not every path was checked"))
          if (matches.length === 0) return `No files matched under ${root}${stopped}`
          const shown = matches.slice(0, max)
          const lines = shown.map((e, i) => `${i + 1}. ${e.kind === "directory" ? `${e.path}/` : e.path}`)
          const more = matches.length > max
          return [
            `Found ${matches.length} paths under ${root}${more ? ` (showing first ${max})` : ""}`,
            ...lines,
            ...(more ? ["Results truncated. Narrow the path or pattern to see fewer matches."] : [])
          ].join("\n") + stopped
        })))(call)
  })

/** The `grep` tool. */
export const grep = ({ gate, withSandbox }: ToolContext, options: SearchOptions = {}) =>
  Tool.make({
    name: "grep",
    readOnly: true,
    description: Texts.GREP_DESCRIPTION,
    parameters: GrepArgs,
    handler: (args, call) =>
      withSandbox("grep", (sandbox) =>
        gate(args.path, (hidden) => Effect.gen(function*() {
          const root = sandbox.mask(normalizeVirtual(args.path))
          const max = effectiveMax(args.max_results, options.maxResults, 100, 500)
          const compiled = compileSearch(args.pattern, { literal: args.literal, caseSensitive: args.case_sensitive })
          if ("error" in compiled) return `Error: Invalid regex pattern: ${compiled.error}`
          const regex = compiled.regex
          const filter = args.glob === undefined ? undefined : compileGlob(args.glob)
          if (filter !== undefined && "error" in filter) return `Error: Invalid glob pattern: ${filter.error}`
          // (a missing path is a missing directory, in DeerFlow's words, whether a file or a folder was meant)
          const info = yield* Effect.catchIf(
            sandbox.stat(args.path),
            (e) => e.reason === "not_found",
            (e) => Effect.fail(new SandboxError({ ...e, message: `Directory not found: ${e.path ?? root}` }))
          )
          const files = info.kind === "file"
            ? [{ path: normalizeVirtual(args.path), relative: normalizeVirtual(args.path).split("/").pop()! }]
            : (yield* sandbox.walk(args.path, { maxEntries: WALK_MAX_ENTRIES, skip: isJunk })).entries
              .filter((e) => e.kind === "file" && !hidden(e.path))
          // (a text file not in UTF-8, a Latin-1 CSV, is searched with its odd bytes shown as U+FFFD, as DeerFlow's
          // `errors="replace"` does; a file with a NUL byte is binary and skipped)
          const decoder = new TextDecoder("utf-8")
          const lines: Array<string> = []
          let count = 0
          const slice = slicer()
          let hide: Redactor | undefined
          const finished = yield* searchWithin(Effect.gen(function*() {
            for (const file of files) {
              if (count >= GREP_COUNT_LIMIT) break
              if (filter !== undefined && !filter.regex.test(file.relative)) continue
              const bytes = yield* Effect.option(sandbox.readBytes(file.path, GREP_MAX_FILE_BYTES))
              if (bytes._tag === "None" || bytes.value.includes(0)) continue
              const fileLines = decoder.decode(bytes.value).split(/\r?\n/)
              for (let i = 0; i < fileLines.length && count < GREP_COUNT_LIMIT; i++) {
                const line = fileLines[i]!
                if (slice(line.length + 1)) yield* breathe
                if (!regex.test(line)) continue
                count++
                if (lines.length < max) {
                  // (a long line masked before its cut: a secret the cut fell inside would keep its beginning, where
                  // the masks after it find whole values only)
                  const long = line.length > GREP_MAX_LINE_CHARS && charLength(line) > GREP_MAX_LINE_CHARS
                  if (long) hide ??= yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
                  const text = long ? hide!.text(line) : line
                  const shown = long && charLength(text) > GREP_MAX_LINE_CHARS
                    ? `${headChars(text, GREP_MAX_LINE_CHARS - 3)}...`
                    : text
                  lines.push(`${file.path}:${i + 1}: ${sandbox.mask(shown)}`)
                }
              }
            }
          }))
          const stopped = finished ? "" : stoppedNote("not every file was searched")
          if (count === 0) return `No matches found under ${root}${stopped}`
          const total = count >= GREP_COUNT_LIMIT ? `${GREP_COUNT_LIMIT}+` : `${count}`
          const more = count > max
          return [
            `Found ${total} matches under ${root}${more ? ` (showing first ${max})` : ""}`,
            ...lines,
            ...(more ? ["Results truncated. Narrow the path or add a glob filter."] : [])
          ].join("\n") + stopped
        })))(call)
  })
