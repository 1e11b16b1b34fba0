/**
 * DeerMem's signal-pattern files (`memory.backend_config.patterns_dir`): `correction.yaml`, `reinforcement.yaml`,
 * `preference.yaml`, `identity.yaml`, `goal.yaml`, `decision.yaml` and `trivial.yaml`, each a YAML list of
 * regular expressions (a string, or `{pattern, flags: [ignorecase]}`), replacing the built-in patterns of its name.
 *
 * A pattern file is untrusted, and its patterns run on what users write: they are compiled with RE2 (`re2js`), whose
 * matching is linear in the text whatever the pattern, so none can backtrack for ever; look-arounds and
 * backreferences, which RE2 cannot run in linear time, are refused with that reason. The work is bounded too: a file
 * holds at most `MAX_PATTERNS` patterns of at most `MAX_PATTERN_CHARS` characters, their compiled programs at most
 * `MAX_FILE_PROGRAM` instructions (`MAX_PROGRAM` for all files), and a pattern reads at most `MAX_MATCHED_CHARS`
 * characters of a message (its head and its tail, as the memory model sees it; a longer message is never a pure
 * acknowledgement). Syntax is RE2's, which is Python's but for look-arounds and backreferences; `\b`, `\w`, `\d` are
 * ASCII there.
 *
 * A file missing, unreadable or invalid (bad YAML, not a list, a regular expression refused) leaves the built-in
 * patterns of its name, with one warning at startup naming the key, the files and why; DeerMem refuses to start
 * instead. As in DeerMem, an entry that is neither a string nor a mapping with a `pattern` is skipped, and an unknown
 * flag ignored (in the same warning).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Path from "node:path"
import type { RE2JS } from "re2js"
import * as OnDemand from "../../internal/OnDemand.js"
import { charsOf, joinChars } from "../../state/Chars.js"
import type { Pattern, Patterns, Signal } from "../../state/MemorySignals.js"
import { readYaml } from "./YamlFiles.js"
import { isRecord } from "../../state/Json.js"

/** The pattern files DeerMem reads, by name: the six signals and the pure acknowledgements. */
export const PATTERN_NAMES = [
  "correction",
  "reinforcement",
  "preference",
  "identity",
  "goal",
  "decision",
  "trivial"
] as const satisfies ReadonlyArray<Signal | "trivial">

/** Patterns of one file at most. */
export const MAX_PATTERNS = 200

/** Characters of one pattern at most. */
export const MAX_PATTERN_CHARS = 500

/** Instructions of one file's compiled patterns at most (DeerMem's largest file, `reinforcement.yaml`: 340). */
export const MAX_FILE_PROGRAM = 1_000

/** Instructions of all files' compiled patterns at most (DeerMem's seven files: 1,090). */
export const MAX_PROGRAM = 3_000

/** Characters (code points) of a message a pattern reads: its first and last `MAX_MATCHED_CHARS / 2`. */
export const MAX_MATCHED_CHARS = 1_000

/** One entry of a pattern file: its regular expression and whether case is ignored. */
export interface Entry {
  readonly source: string
  readonly ignoreCase: boolean
}

/**
 * The entries of a pattern file's value, as DeerMem's `load_patterns` reads them, with the notes of what was skipped
 * (an entry neither a string nor a mapping with a non-empty `pattern`) or ignored (an unknown flag); else why the
 * file cannot be used (not a list, too many entries, a pattern too long).
 */
export const entriesOf = (
  data: unknown
): Either.Either<{ readonly entries: ReadonlyArray<Entry>; readonly notes: ReadonlyArray<string> }, string> => {
  const list = data ?? []
  if (!Array.isArray(list)) return Either.left(`must hold a list, not ${isRecord(list) ? "a mapping" : typeof list}`)
  if (list.length > MAX_PATTERNS) return Either.left(`holds ${list.length} entries, over ${MAX_PATTERNS}`)
  const entries: Array<Entry> = []
  const notes: Array<string> = []
  for (const [index, entry] of list.entries()) {
    const pattern: unknown = typeof entry === "string" ? entry : isRecord(entry) ? entry.pattern : undefined
    if (typeof pattern !== "string" || pattern === "") {
      notes.push(`entry ${index} skipped (${isRecord(entry) ? "no 'pattern'" : "not a string or a mapping"})`)
      continue
    }
    if (pattern.length > MAX_PATTERN_CHARS) {
      return Either.left(`entry ${index}: the pattern has ${pattern.length} characters, over ${MAX_PATTERN_CHARS}`)
    }
    const flags: unknown = isRecord(entry) ? entry.flags ?? [] : []
    const names = Array.isArray(flags) ? flags : [flags]
    for (const name of names) {
      if (name !== "ignorecase") notes.push(`entry ${index}: unknown flag ${JSON.stringify(name)} ignored`)
    }
    entries.push({ source: pattern, ignoreCase: names.includes("ignorecase") })
  }
  return Either.right({ entries, notes })
}

const LINEAR_ONLY = "patterns run in linear time (RE2): look-arounds and backreferences are refused"

/** Instructions of a compiled pattern (its program's, read from re2js; else a bound from its length). */
const programSize = (regex: RE2JS, source: string): number => {
  const internal = regex as unknown as { re2Input?: { prog?: { inst?: { length?: unknown } } } }
  const size = internal.re2Input?.prog?.inst?.length
  return typeof size === "number" ? size : source.length * 8
}

/** A text as a pattern reads it: whole when short, else its head and tail joined by a line break. */
export const boundedText = (text: string): string => {
  if (text.length <= MAX_MATCHED_CHARS) return text
  const chars = charsOf(text)
  if (chars.length <= MAX_MATCHED_CHARS) return text
  const edge = MAX_MATCHED_CHARS / 2
  return `${joinChars(chars, 0, edge)}\n${joinChars(chars, chars.length - edge)}`
}

/** A compiled pattern reading a bounded text (`boundedText`; a longer text is never matched whole). */
const patternOf = (regex: RE2JS): Pattern => ({
  test: (text) => regex.test(boundedText(text)),
  matches: (text) => text.length <= MAX_MATCHED_CHARS * 2 && charsOf(text).length <= MAX_MATCHED_CHARS &&
    regex.matches(text)
})

/** The compiled patterns of a file's entries and their instructions; else why not (naming the entry). */
export const compile = (
  entries: ReadonlyArray<Entry>
): Either.Either<{ readonly patterns: ReadonlyArray<Pattern>; readonly size: number }, string> => {
  const { RE2JS } = OnDemand.re2js()
  const patterns: Array<Pattern> = []
  let size = 0
  for (const [index, entry] of entries.entries()) {
    let regex: RE2JS
    try {
      regex = RE2JS.compile(entry.source, entry.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0)
    } catch (error) {
      const message = (error instanceof Error ? error.message : String(error)).replace(/^error parsing regexp: /, "")
      const why = /`\(\?[=!<]|`\(\?P=|`\\[1-9]/.test(message) ? `${message}; ${LINEAR_ONLY}` : message
      return Either.left(`entry ${index}: invalid pattern ${JSON.stringify(entry.source.slice(0, 80))}: ${why}`)
    }
    size += programSize(regex, entry.source)
    if (size > MAX_FILE_PROGRAM) {
      return Either.left(
        `its patterns compile to over ${MAX_FILE_PROGRAM} instructions (at entry ${index}): the work of matching ` +
          "them is bounded; use fewer or simpler patterns (large counted repetitions such as {50} cost the most)"
      )
    }
    patterns.push(patternOf(regex))
  }
  return Either.right({ patterns, size })
}

/** The patterns of a directory, and the sentences of what was not used as is (one per file). */
export const readDir = (dir: string): { readonly patterns: Patterns; readonly problems: ReadonlyArray<string> } => {
  const problems: Array<string> = []
  const found: Partial<Record<Signal | "trivial", ReadonlyArray<Pattern>>> = {}
  let total = 0
  for (const name of PATTERN_NAMES) {
    const file = Path.join(dir, `${name}.yaml`)
    const read = readYaml(file)
    if (read._tag === "Missing") {
      problems.push(`${file}: not found (built-in ${name} patterns used)`)
      continue
    }
    const compiled = read._tag === "Invalid" ? Either.left(read.problem) : Either.flatMap(
      entriesOf(read.value),
      ({ entries, notes }) => Either.map(compile(entries), (c) => ({ ...c, notes }))
    )
    if (Either.isLeft(compiled)) {
      problems.push(`${file}: ${compiled.left} (built-in ${name} patterns used)`)
      continue
    }
    if (total + compiled.right.size > MAX_PROGRAM) {
      problems.push(
        `${file}: the files' patterns together compile to over ${MAX_PROGRAM} instructions (built-in ${name} ` +
          "patterns used)"
      )
      continue
    }
    total += compiled.right.size
    if (compiled.right.notes.length > 0) problems.push(`${file}: ${compiled.right.notes.join("; ")}`)
    found[name] = compiled.right.patterns
  }
  const { trivial, ...signals } = found
  return { patterns: { signals, trivial }, problems }
}

/**
 * The patterns of `patterns_dir` (`dir`, resolved), each file replacing the built-in patterns of its name; with one
 * warning naming what was not used as is. Undefined without a directory (the built-in patterns).
 */
export const load = (dir: string | undefined): Effect.Effect<Patterns | undefined> =>
  dir === undefined ? Effect.succeed(undefined) : Effect.gen(function*() {
    const { patterns, problems } = readDir(dir)
    if (problems.length > 0) {
      yield* Effect.logWarning(`memory.backend_config.patterns_dir (${dir}): ${problems.join("; ")}`)
    }
    return patterns
  })
