/**
 * Patterns from the model compiled with RE2, so that matching runs in linear time whatever the pattern: a glob
 * (`glob`, and `grep`'s file filter) as a regular expression over relative paths, and `grep`'s regular
 * expression (JavaScript syntax, translated; look-aheads and backreferences refused with a reason).
 */
import * as Either from "effect/Either"
import type { RE2JS } from "re2js"
import * as OnDemand from "../../../internal/OnDemand.js"

/**
 * A glob as the source of an RE2 regular expression over `/`-separated relative paths: `*` and `?` stay
 * within one segment, `**` spans segments, `[...]` and `{a,b}` work as in shells. A pattern without `/`
 * matches a name at any depth (like `**\/NAME`). The result uses no look-arounds, so RE2 compiles it.
 */
export const globSource = (pattern: string): string => {
  const source = pattern.includes("/") ? pattern.replace(/^\.\//, "") : `**/${pattern}`
  let out = ""
  let braces = 0
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!
    if (c === "*") {
      if (source[i + 1] === "*") {
        const slash = source[i + 2] === "/"
        out += slash ? "(?:.*/)?" : ".*"
        i += slash ? 2 : 1
      } else {
        out += "[^/]*"
      }
    } else if (c === "?") {
      out += "[^/]"
    } else if (c === "[") {
      const end = source.indexOf("]", i + 2)
      if (end === -1) {
        out += "\\["
      } else {
        let body = source.slice(i + 1, end)
        if (body.startsWith("!")) body = `^${body.slice(1)}`
        out += `[${body.replace(/\\/g, "\\\\")}]`
        i = end
      }
    } else if (c === "{") {
      braces++
      out += "(?:"
    } else if (c === "}" && braces > 0) {
      braces--
      out += ")"
    } else if (c === "," && braces > 0) {
      out += "|"
    } else {
      out += c.replace(/[.+^${}()|[\]\\]/g, "\\$&")
    }
  }
  return `^${out}${")".repeat(braces)}$`
}

/** A compiled pattern, or why it cannot be used (a sentence the model can act on). */
export type Compiled = { readonly regex: RE2JS } | { readonly error: string }

const syntaxMessage = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).replace(/^error parsing regexp: /, "")

/** A glob compiled for matching relative paths (RE2: linear time in the path's length, whatever the glob). */
export const compileGlob = (pattern: string): Compiled => {
  const { RE2JS } = OnDemand.re2js()
  try {
    return { regex: RE2JS.compile(globSource(pattern)) }
  } catch (error) {
    return { error: syntaxMessage(error) }
  }
}

// `\1`..`\9` or `\k<name>` outside a character class: a backreference (RE2 has none; its translation of
// JavaScript syntax would quietly read `\k<name>` as the text `k<name>`).
const hasBackreference = (pattern: string): boolean => {
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "\\") {
      const next = pattern[i + 1]
      const numbered = next !== undefined && next >= "1" && next <= "9"
      if (!inClass && (numbered || (next === "k" && pattern[i + 2] === "<"))) return true
      i++
    } else if (c === "[") inClass = true
    else if (c === "]") inClass = false
  }
  return false
}

const LINEAR_ONLY = "the search runs in linear time (RE2 syntax: JavaScript's, without look-aheads and backreferences)"

/**
 * The regular expression `grep` runs, compiled with RE2 so that matching is linear in the line's length
 * whatever the pattern (a pattern like `^(a+)+$` cannot hang the process). JavaScript syntax is translated
 * (named groups, `\u{...}`, look-behinds work); look-aheads and backreferences are refused with a reason.
 */
export const compileSearch = (
  pattern: string,
  options: { readonly literal: boolean; readonly caseSensitive: boolean }
): Compiled => {
  const { RE2JS } = OnDemand.re2js()
  const flags = options.caseSensitive ? 0 : RE2JS.CASE_INSENSITIVE
  if (options.literal) return { regex: RE2JS.compile(RE2JS.quote(pattern), flags) }
  if (hasBackreference(pattern)) {
    return {
      error: `backreferences (\\1, \\k<name>) are not supported: ${LINEAR_ONLY}. Match the repeated text ` +
        "explicitly, or search more broadly and read the matching lines."
    }
  }
  const compile = (flags: number) => RE2JS.compile(RE2JS.translateRegExp(pattern), flags | RE2JS.LOOKBEHINDS)
  try {
    return { regex: compile(flags) }
  } catch (error) {
    // Case folding is a `(?i)` prefix that would show in the message: report the error of the pattern as given.
    const plain = Either.try(() => compile(0))
    const message = syntaxMessage(Either.isLeft(plain) ? plain.left : error)
    if (/`\(\?[=!]/.test(message)) {
      return {
        error: `look-aheads ((?=...), (?!...)) are not supported: ${LINEAR_ONLY}. Search without the ` +
          "look-ahead and read the matching lines, or use literal=true for plain text."
      }
    }
    return { error: message }
  }
}
