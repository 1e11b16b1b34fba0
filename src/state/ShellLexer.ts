/**
 * A bash lexer for auditing commands (pure; used by SandboxAudit). It does not run or expand anything: it
 * reads a command the way bash splits it, so that an audit sees every command that would run.
 *
 * - Commands are split into parts on every list and pipeline operator bash accepts (`;`, `&&`, `||`, `&`,
 *   `|`, `|&`, unquoted newlines, the `case` terminators `;;`, `;&`, `;;&`) and on the parentheses of
 *   subshells and function definitions. Brace groups, `if`/`while`/`until`/`for`/`select`/`case` bodies and
 *   function bodies need no special case: their keywords stay words of the part that follows them.
 * - Quotes: `'…'`, `"…"`, ANSI-C `$'…'` (its escapes decoded), locale `$"…"`, backslash escapes and line
 *   continuations. Each word has its value (quotes removed) and a masked form in which quoted text of more
 *   than one token is `_` (data), while a quoted single token stays itself (`r''m` is `rm`).
 * - Code inside words is lexed too, recursively: `$(…)`, backticks, `<(…)`, `>(…)`, and the substitutions
 *   inside `${…}` and `$[…]`. A `$(…)` ends where bash ends it: past `case` patterns, heredocs, comments
 *   and quotes inside it. Arithmetic (`((…))`, `$((…))`) is also read as commands, since bash runs as
 *   subshells what is not valid arithmetic; where the two readings end apart, the command is unbalanced.
 * - Unquoted brace lists are expanded (`{rm,-rf,/}` is three words).
 * - Redirections are their own words (`2>&1`, `>file`, `<<<word`, `&>>log`): a `>` or `<` always ends the
 *   word before it, as in bash (`sh<<<'x'` is `sh` and a here-string). Heredoc bodies (`<<`, `<<-`) are data
 *   kept with their part; `<<<` is a here-string, and `<<` inside arithmetic is a shift.
 * When a quote, substitution or escape does not close, `balanced` is false: past that point the reading is
 * not to be trusted.
 *
 * ANSI-C decoding (`shell/AnsiC.ts`) and brace expansion (`shell/BraceExpansion.ts`) are their own modules; the
 * reading of words and of commands stays here, as each calls the other (a word holds substitutions, which hold
 * commands).
 */
import { decodeAnsiC } from "./shell/AnsiC.js"
import { expandBraces } from "./shell/BraceExpansion.js"

export { decodeAnsiC } from "./shell/AnsiC.js"
export { expandBraces } from "./shell/BraceExpansion.js"

/** One shell word: its source, its value with quotes removed, and its masked form (quoted data hidden). */
export interface Word {
  readonly raw: string
  readonly value: string
  readonly masked: string
  /** For a redirection, its operator (`>`, `>>`, `<<<`, `>&`, `<<`, …); `value` is then the target's. */
  readonly redirect?: string | undefined
  /** The commands substituted inside this word (`$(…)`, backticks, `<(…)`, `>(…)`), lexed. */
  readonly substitutions: ReadonlyArray<Lexed>
}

/** A heredoc body and whether its delimiter was quoted (then nothing in it expands). */
export interface Heredoc {
  readonly body: string
  readonly quoted: boolean
}

/** One simple command (a part of a list or pipeline): its words and the heredoc bodies it reads. */
export interface Part {
  readonly words: Array<Word>
  readonly heredocs: Array<Heredoc>
}

/** A lexed command. */
export interface Lexed {
  /** The text that was lexed. */
  readonly source: string
  /** False when a quote, substitution or escape does not close, or the text reads two ways. */
  readonly balanced: boolean
  /** The command with quoted data masked and heredoc bodies removed (not yet whitespace-normalised). */
  readonly view: string
  readonly parts: ReadonlyArray<Part>
  /** Every command substituted in this one (in words and in unquoted heredoc bodies), lexed. */
  readonly substitutions: ReadonlyArray<Lexed>
}

// Quotes inside substitutions inside quotes...: past this, the command counts as unbalanced.
const MAX_NESTING = 64

const isBlank = (c: string | undefined) => c === " " || c === "\t"

const tokenLike = (content: string, single: boolean): boolean =>
  content !== "" && !/[\s;&|<>()`'"*?~\\]/.test(content) && !(single && content.includes("$"))

const maskQuoted = (content: string, single: boolean): string =>
  content === "" ? "" : tokenLike(content, single) ? content : "_"

const safeEscaped = (c: string): string => (/[A-Za-z0-9_./+=:@%,-]/.test(c) ? c : "_")

// ---------------------------------------------------------------------------------------------------------
// Where a quoted or nested construct ends

/** The index after the `'` that closes an ANSI-C string whose body starts at `from`, or -1. */
const closeAnsiC = (s: string, from: number): number => {
  for (let i = from; i < s.length; i++) {
    if (s[i] === "\\") i++
    else if (s[i] === "'") return i + 1
  }
  return -1
}

/** The index after the backtick that closes the one at `open`, or -1. */
const closeBacktick = (s: string, open: number): number => {
  for (let i = open + 1; i < s.length; i++) {
    if (s[i] === "\\") i++
    else if (s[i] === "`") return i + 1
  }
  return -1
}

/**
 * The index after the `)` that closes the `(` at `open`, counting parentheses only (quotes skipped), or -1.
 * Only a first guess at where arithmetic (`((…))`, `$((…))`) ends: the lexer checks it against a reading as
 * commands, and an arithmetic reading needs both to agree.
 */
const closeParen = (s: string, open: number): number => {
  let depth = 0
  for (let i = open; i < s.length; i++) {
    const c = s[i]!
    if (c === "\\") i++
    else if (c === "'") {
      const j = s.indexOf("'", i + 1)
      if (j === -1) return -1
      i = j
    } else if (c === "\"") {
      let j = i + 1
      while (j < s.length && s[j] !== "\"") j += s[j] === "\\" ? 2 : 1
      if (j >= s.length) return -1
      i = j
    } else if (c === "(") depth++
    else if (c === ")") {
      depth--
      if (depth === 0) return i + 1
    }
  }
  return -1
}

// ---------------------------------------------------------------------------------------------------------
// Words

interface Scan {
  end: number
  balanced: boolean
  value: string
  masked: string
  subs: Array<Lexed>
}

const newScan = (start: number): Scan => ({ end: start, balanced: true, value: "", masked: "", subs: [] })

/** Adds what `inner` read to `scan`: its substitutions and balance; value and masked text by the caller. */
const absorb = (scan: Scan, inner: Scan) => {
  scan.subs.push(...inner.subs)
  if (!inner.balanced) scan.balanced = false
}

/**
 * Reads a substitution at `i` (`$(`, `` ` ``, `<(`, `>(`, `$((`) into the scan; returns the index after it.
 * The commands inside `$(…)` are lexed in place, so the end is where bash would find it (past `case`
 * patterns, heredocs, comments and quotes).
 */
const readSubstitution = (s: string, i: number, scan: Scan, depth: number): number => {
  if (s[i] === "`") {
    const end = closeBacktick(s, i)
    if (end === -1) {
      scan.balanced = false
      return s.length
    }
    const inner = lexAt(s.slice(i + 1, end - 1).replace(/\\([`$\\])/g, "$1"), 0, depth + 1, false).lexed
    scan.subs.push(inner)
    if (!inner.balanced) scan.balanced = false
    scan.value += s.slice(i, end)
    scan.masked += `\`${inner.view}\``
    return end
  }
  const open = i + 1
  const commands = lexAt(s, open + 1, depth + 1, true)
  if (s[i] === "$" && s[open + 1] === "(") {
    // `$((…))` is arithmetic (substitutions inside it run), unless it is not valid arithmetic: then bash runs
    // it as a subshell in a command substitution. The inside is read both ways, and where the two readings
    // end differently the command is ambiguous (unbalanced).
    const arithmetic = closeParen(s, open)
    if (arithmetic !== -1 && s[arithmetic - 2] === ")") {
      if (arithmetic !== commands.end) scan.balanced = false
      scan.value += s.slice(i, arithmetic)
      scan.masked += `$(${commands.lexed.view})`
      scan.subs.push(commands.lexed)
      return arithmetic
    }
  }
  scan.subs.push(commands.lexed)
  if (!commands.lexed.balanced) scan.balanced = false
  scan.value += s.slice(i, commands.end)
  scan.masked += `${s.slice(i, open + 1)}${commands.lexed.view})`
  return commands.end
}

/** Reads a `${…}` or `$[…]` expansion at `i`: substitutions in it are lexed, quoted text masked. */
const readExpansion = (s: string, i: number, scan: Scan, depth: number): number => {
  if (depth >= MAX_NESTING) {
    scan.balanced = false
    return s.length
  }
  const [open, close] = s[i + 1] === "[" ? ["[", "]"] : ["{", "}"]
  let level = 1
  let masked = `$${open}`
  for (let k = i + 2; k < s.length;) {
    const c = s[k]!
    const next = s[k + 1]
    if (c === "\\") {
      masked += safeEscaped(next ?? "")
      k += 2
    } else if ((c === "$" && (next === "(" || next === "{" || next === "[" || next === "'" || next === "\"")) ||
      c === "`" || c === "'" || c === "\"")
    {
      const inner = newScan(k)
      k = c === "$" && (next === "{" || next === "[") ? readExpansion(s, k, inner, depth + 1)
        : (c === "$" && next === "(") || c === "`" ? readSubstitution(s, k, inner, depth)
        : readQuoted(s, k, inner, depth)
      absorb(scan, inner)
      masked += inner.masked
    } else {
      if (c === open) level++
      else if (c === close && --level === 0) {
        scan.value += s.slice(i, k + 1)
        scan.masked += `${masked}${close}`
        return k + 1
      }
      masked += c
      k++
    }
  }
  scan.balanced = false
  return s.length
}

/** Reads a double-quoted string at `i` (the `"`). Substitutions inside run; the literal text is data. */
const readDouble = (s: string, i: number, scan: Scan, depth: number): number => {
  let literal = ""
  let all = ""
  let masked = ""
  let expands = false
  const flush = () => {
    if (literal !== "") masked += maskQuoted(literal, false)
    literal = ""
  }
  for (let k = i + 1; k < s.length;) {
    const c = s[k]!
    const next = s[k + 1]
    if (c === "\"") {
      if (!expands) scan.masked += maskQuoted(all, false) || "_"
      else {
        flush()
        scan.masked += `"${masked}"`
      }
      return k + 1
    }
    if (c === "\\") {
      const escaped = next === "\n" ? "" : /[$`"\\]/.test(next ?? "") ? next! : `\\${next ?? ""}`
      literal += escaped
      all += escaped
      scan.value += escaped
      k += 2
    } else if ((c === "$" && (next === "(" || next === "{" || next === "[")) || c === "`") {
      flush()
      expands = true
      const inner = newScan(k)
      k = c === "$" && next !== "(" ? readExpansion(s, k, inner, depth) : readSubstitution(s, k, inner, depth)
      absorb(scan, inner)
      scan.value += inner.value
      masked += inner.masked
      all += inner.value
    } else {
      literal += c
      all += c
      scan.value += c
      k++
    }
  }
  scan.balanced = false
  return s.length
}

/** Reads a quoted string at `i`: `'…'`, `"…"`, `$'…'` or `$"…"`. */
const readQuoted = (s: string, i: number, scan: Scan, depth: number): number => {
  if (s[i] === "$") {
    if (s[i + 1] === "\"") return readDouble(s, i + 1, scan, depth)
    const end = closeAnsiC(s, i + 2)
    if (end === -1) {
      scan.balanced = false
      return s.length
    }
    const content = decodeAnsiC(s.slice(i + 2, end - 1))
    scan.value += content
    scan.masked += maskQuoted(content, true)
    return end
  }
  if (s[i] === "\"") return readDouble(s, i, scan, depth)
  const j = s.indexOf("'", i + 1)
  if (j === -1) {
    scan.balanced = false
    return s.length
  }
  const content = s.slice(i + 1, j)
  scan.value += content
  scan.masked += maskQuoted(content, true)
  return j + 1
}

const ENDS_WORD: ReadonlySet<string> = new Set([";", "|", "&", "(", ")", "\n", "<", ">"])

/** Reads one word at `start`. Stops at blanks, operators and redirections (but not `<(…)` / `>(…)`). */
const readWord = (s: string, start: number, depth: number): Scan => {
  const scan = newScan(start)
  let i = start
  while (i < s.length) {
    const c = s[i]!
    const next = s[i + 1]
    if (isBlank(c)) break
    if (ENDS_WORD.has(c) && !((c === "<" || c === ">") && next === "(")) break
    if (c === "\\") {
      if (next === undefined) {
        scan.balanced = false
        i++
        break
      }
      i += 2
      if (next === "\n") continue
      scan.value += next
      scan.masked += safeEscaped(next)
      continue
    }
    if (c === "'" || c === "\"" || (c === "$" && (next === "'" || next === "\""))) {
      i = readQuoted(s, i, scan, depth)
      continue
    }
    if ((c === "$" && next === "(") || c === "`" || c === "<" || c === ">") {
      i = readSubstitution(s, i, scan, depth)
      continue
    }
    if (c === "$" && (next === "{" || next === "[")) {
      i = readExpansion(s, i, scan, depth)
      continue
    }
    scan.value += c
    scan.masked += c
    i++
  }
  scan.end = i
  return scan
}

/** Substitutions inside an unquoted heredoc body (they run when the heredoc is read). */
const bodySubstitutions = (body: string, depth: number): Array<Lexed> => {
  const scan = newScan(0)
  for (let k = 0; k < body.length;) {
    const c = body[k]
    if (c === "\\") k += 2
    else if ((c === "$" && body[k + 1] === "(") || c === "`") k = readSubstitution(body, k, scan, depth)
    else if (c === "$" && (body[k + 1] === "{" || body[k + 1] === "[")) k = readExpansion(body, k, scan, depth)
    else k++
  }
  return scan.subs
}

// ---------------------------------------------------------------------------------------------------------
// Commands

const REDIRECTIONS = ["<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">&", ">|", "&>", "<", ">"]

/** The redirection operator at `i`, if one starts there (not a process substitution). */
const redirectionAt = (s: string, i: number): string | undefined => {
  if ((s[i] === "<" || s[i] === ">") && s[i + 1] === "(") return undefined
  for (const op of REDIRECTIONS) if (s.startsWith(op, i)) return op
  return undefined
}

const LIST_OPERATORS = [";;&", "&&", "||", ";;", ";&", "|&", ";", "|", "&", "(", ")"]

const listOperatorAt = (s: string, i: number): string | undefined => {
  for (const op of LIST_OPERATORS) if (s.startsWith(op, i)) return op
  return undefined
}

interface Pending {
  readonly delim: string
  readonly strip: boolean
  readonly quoted: boolean
  readonly part: Part
}

// Reserved words after which the next word still starts a command (for `case` / `esac`).
const OPENERS: ReadonlySet<string> = new Set(["!", "{", "then", "do", "else", "elif", "if", "while", "until", "time"])

/**
 * Lexes `s` from `start`. With `stop`, lexing ends after the `)` that closes a command substitution begun
 * before `start` (a `)` of a subshell or of a `case` pattern does not); `end` is the index after it, and a
 * command that never closes is unbalanced. Without `stop`, the whole text is lexed.
 */
const lexAt = (s: string, start: number, depth: number, stop: boolean): { lexed: Lexed; end: number } => {
  if (depth > MAX_NESTING) {
    const source = s.slice(start)
    return { lexed: { source, balanced: false, view: source, parts: [], substitutions: [] }, end: s.length }
  }
  let balanced = true
  let view = ""
  const parts: Array<Part> = []
  const substitutions: Array<Lexed> = []
  let part: Part = { words: [], heredocs: [] }
  const pending: Array<Pending> = []
  let parens = 0
  let cases = 0
  let unclosed = false
  const endPart = () => {
    if (part.words.length > 0 || part.heredocs.length > 0) parts.push(part)
    part = { words: [], heredocs: [] }
  }
  const pushWord = (scan: Scan, raw: string, masked: string, redirect?: string) => {
    part.words.push({ raw, value: scan.value, masked, redirect, substitutions: scan.subs })
    substitutions.push(...scan.subs)
    if (!scan.balanced) balanced = false
    view += masked
  }
  /** Reads a redirection whose operator starts at `at` (after an optional fd prefix starting at `from`). */
  const readRedirection = (from: number, at: number, op: string): number => {
    let j = at + op.length
    while (isBlank(s[j])) j++
    const target = s[j] === "\n" || j >= s.length ? newScan(j) : readWord(s, j, depth)
    const prefix = s.slice(from, at + op.length)
    const gap = j > at + op.length ? " " : ""
    if (op === "<<" || op === "<<-") {
      const raw = s.slice(j, target.end)
      if (raw !== "") pending.push({ delim: target.value, strip: op === "<<-", quoted: /['"\\]/.test(raw), part })
    }
    pushWord(target, s.slice(from, target.end), `${prefix}${gap}${target.masked}`, op)
    return Math.max(target.end, j)
  }
  const finish = (end: number) => {
    endPart()
    // A heredoc whose body never starts: bash reads an empty body.
    for (const doc of pending) doc.part.heredocs.push({ body: "", quoted: doc.quoted })
    const source = s.slice(start, stop ? Math.max(start, end - 1) : end)
    return { lexed: { source, balanced, view, parts, substitutions }, end }
  }
  let i = start
  while (i < s.length) {
    const c = s[i]!
    if (isBlank(c)) {
      view += " "
      i++
      continue
    }
    if (c === "\\" && s[i + 1] === "\n") {
      i += 2
      continue
    }
    if (c === "\n") {
      view += "\n"
      endPart()
      i++
      // Heredoc bodies start on the line after their operator and are not commands.
      for (const doc of pending) {
        let body = ""
        for (;;) {
          if (i >= s.length) break
          const nl = s.indexOf("\n", i)
          const line = s.slice(i, nl === -1 ? s.length : nl)
          i = nl === -1 ? s.length : nl + 1
          if ((doc.strip ? line.replace(/^\t+/, "") : line) === doc.delim) break
          body += `${line}\n`
        }
        doc.part.heredocs.push({ body, quoted: doc.quoted })
        if (!doc.quoted) substitutions.push(...bodySubstitutions(body, depth))
      }
      pending.length = 0
      continue
    }
    if (c === "#") {
      const nl = s.indexOf("\n", i)
      i = nl === -1 ? s.length : nl
      continue
    }
    if (c === "(" && s[i + 1] === "(" && part.words.every((w) => OPENERS.has(w.raw))) {
      // An arithmetic command, also after a reserved word (`if ((…))`, `while ((…))`): `<<` inside is a shift,
      // not a heredoc. Unless it is not valid arithmetic:
      // then bash runs it as nested subshells (`((cmd1) && (cmd2))`). The inside is read both ways, and where
      // the two readings end differently the command is ambiguous (unbalanced).
      const end = unclosed ? -1 : closeParen(s, i)
      // Parentheses that never close: bash runs none of this; the guess is not made again (it is linear).
      if (end === -1) unclosed = true
      if (end !== -1 && s[end - 2] === ")") {
        const commands = lexAt(s, i + 1, depth + 1, true)
        const scan = newScan(i)
        if (commands.end !== end) scan.balanced = false
        scan.masked = `(${commands.lexed.view})`
        scan.subs.push(commands.lexed)
        scan.value = s.slice(i, end)
        pushWord(scan, s.slice(i, end), scan.masked)
        i = end
        continue
      }
    }
    const redirect = redirectionAt(s, i)
    if (redirect !== undefined) {
      i = readRedirection(i, i, redirect)
      continue
    }
    const op = listOperatorAt(s, i)
    if (op !== undefined) {
      if (op === "(") parens++
      else if (op === ")") {
        if (parens > 0) parens--
        else if (cases === 0 && stop) return finish(i + 1)
      }
      view += op
      endPart()
      i += op.length
      continue
    }
    const scan = readWord(s, i, depth)
    if (scan.end === i) {
      // Not reachable for well-formed input; never loop forever.
      view += c
      i++
      continue
    }
    const raw = s.slice(i, scan.end)
    // A file descriptor before a redirection (`2>`, `{fd}>`) belongs to it.
    const fd = redirectionAt(s, scan.end)
    if (fd !== undefined && /^(?:\d+|\{[A-Za-z_][A-Za-z0-9_]*\})$/.test(raw)) {
      i = readRedirection(i, scan.end, fd)
      continue
    }
    if (part.words.every((w) => OPENERS.has(w.raw))) {
      // `case … in` opens patterns whose `)` closes nothing, up to `esac`.
      if (raw === "case") cases++
      else if (raw === "esac" && cases > 0) cases--
    }
    const expanded = expandBraces(raw)
    if (expanded === undefined) pushWord(scan, raw, scan.masked)
    else {
      expanded.forEach((word, k) => {
        if (k > 0) view += " "
        pushWord({ ...newScan(0), value: word }, word, word)
      })
    }
    i = scan.end
  }
  if (stop) balanced = false
  return finish(s.length)
}

/** Lexes a command (pure). */
export const lex = (command: string): Lexed => lexAt(command, 0, 0, false).lexed
