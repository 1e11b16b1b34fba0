/**
 * SandboxAudit (SPEC §5.10, lead chain slot 11; also in subagents): audits every `bash` call before it
 * runs. A high-risk command is answered with an error ToolMessage and never runs; a medium-risk command
 * runs and its result carries a warning; every call leaves an audit record (a `sandbox_audit` custom event
 * and a log line). This is defence in depth, not an isolation boundary: the sandbox is the boundary.
 *
 * How a command is read (`classify`):
 * 1. Input checks: empty, longer than 10,000 characters, or holding a NUL byte → block.
 * 2. The command is lexed like a shell would: quotes, escapes, `$(…)`, backticks, `<(…)`, `$((…))`,
 *    comments, heredocs (`<<` and `<<-`; `<<<` is a here-string and `((… << …))` arithmetic, neither starts
 *    a heredoc). Quoted text that is more than one word is data and is masked (`echo "rm -rf /"` and
 *    `grep 'dd if=' notes.txt` pass), while a quoted single word is read as the word itself, so quoting
 *    cannot hide a command (`r''m -rf "/"` is `rm -rf /`). Heredoc bodies are data.
 * 3. Pass 1: the whole masked command (whitespace-normalised) against the high-risk rules; this catches
 *    shapes that span statements (fork bombs, `while true; do … & done`, `curl … | sh`).
 * 4. Pass 2: the command is split into sub-commands on `&&`, `||`, `;`, `|`, `&`, unquoted newlines and
 *    subshell parentheses. Each part is checked against the high-risk rules, then against the
 *    command-position rule — a risky substitution (`$(`, backtick or `<(` opening curl, wget, bash, sh,
 *    python*, ruby, perl or base64) that *is* the command, after optional `VAR=val` assignments, shell
 *    keywords and wrappers (env, command, builtin, exec, nohup, time, sudo, doas, nice, setsid, timeout) —
 *    and then against the medium-risk rules. `x=$(curl …)` and `echo $(curl …)` pass.
 * 5. Code inside code is audited too (DeerFlow reads it as text only): the inner command of every
 *    substitution, the script of `sh|bash|… -c '…'` and of `eval …`, a heredoc fed to a shell, and the
 *    substitutions of an unquoted heredoc body. The most severe verdict wins.
 * If the quotes do not balance, the lexer cannot be trusted: the raw command is checked as one part
 * (fail closed).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { RunContext } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import type { ToolResult } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Middleware from "./Middleware.js"

/** The verdict on a command. */
export type Verdict = "block" | "warn" | "pass"

/** A verdict and, unless it passes, the rule that decided it (readable, shown to the model). */
export interface Finding {
  readonly verdict: Verdict
  readonly reason?: string
}

/** The longest command accepted. */
export const MAX_COMMAND_LENGTH = 10_000
/** How much of a command an audit record keeps. */
export const AUDIT_COMMAND_LIMIT = 200
/** How deep code inside code (substitutions, `bash -c`, `eval`) is followed before giving up (block). */
export const MAX_DEPTH = 4
// Quotes inside substitutions inside quotes...: past this, the command counts as unbalanced.
const MAX_NESTING = 64

// ---------------------------------------------------------------------------------------------------------
// Rules

const RISKY = String.raw`(?:curl|wget|bash|sh|python[\d.]*|ruby|perl|base64)\b`
const SUBST = String.raw`(?:\$\(|\x60|<\()`
const INTERPRETER = String.raw`(?:sh|bash|dash|ksh|zsh|python[\d.]*|perl|ruby|node|php)`
const SHELL = String.raw`(?:ba|da|k|z)?sh`
const W = String.raw`[^\s;&|]`
const SYSTEM_BIN = String.raw`(?:/usr/local/bin/|/usr/local/sbin/|/usr/bin/|/usr/sbin/|/bin/|/sbin/)`
const STARTUP = String.raw`(?:~|\$HOME|\$\{HOME\})/?\.(?:bashrc|bash_profile|bash_login|profile|zshrc|zprofile)\b`

interface Rule {
  readonly label: string
  readonly test: (text: string) => boolean
}

const rule = (label: string, source: string): Rule => {
  const re = new RegExp(source)
  return { label, test: (text) => re.test(text) }
}

const RM = /\brm(?=\s)/g
const RM_TARGET = /^(?:\/\*?|~\/?\*?|\$\{?HOME\}?\/?\*?|\/home\/?\*?|\/root\/?\*?)[)}]*$/

/**
 * `rm` with a recursive flag and a target that is the root, a home directory or `/root` (any order of
 * flags and operands). Procedural rather than one regex: a regex over "some token is a flag, some token is
 * a target" backtracks exponentially on long inputs.
 */
export const recursiveRootDelete = (text: string): boolean => {
  RM.lastIndex = 0
  for (let m = RM.exec(text); m !== null; m = RM.exec(text)) {
    const start = m.index + 2
    let end = start
    while (end < text.length && text[end] !== ";" && text[end] !== "&" && text[end] !== "|") end++
    let recursive = false
    let target = false
    for (const token of text.slice(start, end).split(/\s+/)) {
      if (token === "") continue
      if (token === "--recursive" || (token.startsWith("-") && !token.startsWith("--") && /[rR]/.test(token))) {
        recursive = true
      } else if (RM_TARGET.test(token)) target = true
    }
    if (recursive && target) return true
    RM.lastIndex = end
  }
  return false
}

/** High-risk rules: a match blocks the command. */
export const HIGH_RISK: ReadonlyArray<Rule> = [
  { label: "recursive delete of the root, home or /root directory", test: recursiveRootDelete },
  rule("raw disk write with dd", String.raw`\bdd\s+if=`),
  rule("filesystem creation (mkfs)", String.raw`\bmkfs`),
  rule(
    "reading the password hashes in /etc/shadow",
    String.raw`\b(?:cat|head|tail|less|more|cp|base64|xxd|od|strings|grep|awk|sed)\b[^;&|]*\s/etc/g?shadow\b`
  ),
  rule("writing into /etc", String.raw`(?:>+\s*|\btee\s+(?:-${W}+\s+)*)/etc/`),
  rule(
    "piping into a shell",
    String.raw`(?:^|[^|])\|&?\s*(?:(?:sudo|env|exec|command|nohup)\s+(?:-${W}+\s+)*)*(?:/usr/bin/|/bin/)?${SHELL}\b`
  ),
  rule(
    "eval or source of downloaded or generated code",
    String.raw`(?:^|[\s;&|(])(?:eval|source|\.)\s+["']?${SUBST}\s*${RISKY}`
  ),
  rule(
    "an interpreter running downloaded or generated code",
    String.raw`\b${INTERPRETER}\s+(?:-${W}+\s+){0,4}-[A-Za-z]*[cepr]\s+["']?${SUBST}\s*${RISKY}`
  ),
  rule(
    "an interpreter reading downloaded or generated code from a here-string",
    String.raw`\b${INTERPRETER}\b[^;&|]*<<<\s*["']?${SUBST}\s*${RISKY}`
  ),
  rule(
    "an interpreter reading downloaded or generated code from a process substitution",
    String.raw`\b${INTERPRETER}\s+(?:-${W}+\s+)*<\(\s*${RISKY}`
  ),
  rule("decoding base64 into a pipe", String.raw`\bbase64\b(?=[^|]*\s(?:-d|-D|--decode)\b)[^|]*\|`),
  rule("overwriting system binaries", String.raw`(?:>+\s*|\btee\s+(?:-${W}+\s+)*)${SYSTEM_BIN}`),
  rule("overwriting shell startup files", String.raw`(?:>+\s*|\btee\s+(?:-${W}+\s+)*)${STARTUP}`),
  rule("reading another process's environment", String.raw`/proc/[^/\s]+/environ`),
  rule(
    "dynamic linker hijack (LD_PRELOAD / LD_LIBRARY_PATH)",
    String.raw`\b(?:LD_PRELOAD|LD_LIBRARY_PATH|LD_AUDIT)\s*=`
  ),
  rule("raw network sockets through /dev/tcp or /dev/udp", String.raw`/dev/(?:tcp|udp)/`),
  rule("fork bomb", String.raw`(?:^|[\s;&|{])[^\s();&|]+\s*\(\)\s*\{[^}]*\|\s*[^\s;&|]+\s*&`),
  rule("fork bomb", String.raw`\bwhile\s+(?:true\b|:).*&\s*;?\s*done\b`)
]

/** Medium-risk rules: a match runs the command and appends a warning to its result. */
export const MEDIUM_RISK: ReadonlyArray<Rule> = [
  rule("world-writable permissions (chmod 777)", String.raw`\bchmod\s+(?:-${W}+\s+)*0?777\b`),
  rule("installing Python packages", String.raw`\bpip[\d.]*\s+install\b`),
  rule("installing system packages", String.raw`\bapt(?:-get)?\s+install\b`),
  rule("running as another user (sudo/su)", String.raw`\b(?:sudo|su|doas)\b`),
  rule("changing PATH", String.raw`\bPATH\s*=`)
]

const COMMAND_POSITION_LABEL = "running the output of a download or interpreter as a command"

// The command-position rule as a regex, for the raw fallback when quotes do not balance.
const RAW_COMMAND_POSITION = new RegExp(
  String.raw`^(?:(?:env|command|builtin|exec|nohup|time|sudo|doas)\s+|\w+=\S*\s+){0,8}["']?(?:\$\(|\x60)\s*${RISKY}`
)
const RISKY_SUBSTITUTION_WORD = new RegExp(String.raw`^["']?${SUBST}\s*${RISKY}`)

const firstMatch = (rules: ReadonlyArray<Rule>, text: string): Rule | undefined => {
  for (const r of rules) if (r.test(text)) return r
  return undefined
}

// ---------------------------------------------------------------------------------------------------------
// Lexer

/** One shell word: its source, its value with quotes removed, and its masked form (quoted data hidden). */
export interface Word {
  readonly raw: string
  readonly value: string
  readonly masked: string
}

/** One sub-command: its words, and the heredoc bodies it reads. */
export interface Part {
  readonly words: Array<Word>
  readonly heredocs: Array<{ readonly body: string; readonly quoted: boolean }>
}

/** A lexed command. */
export interface Lexed {
  /** The text that was lexed. */
  readonly source: string
  /** False when a quote, substitution or escape does not close. */
  readonly balanced: boolean
  /** The command with quoted data masked and heredoc bodies removed (not yet whitespace-normalised). */
  readonly view: string
  readonly parts: ReadonlyArray<Part>
  /** The commands inside `$(…)`, backticks and `<(…)` / `>(…)`, lexed. */
  readonly substitutions: ReadonlyArray<Lexed>
}

const isBlank = (c: string | undefined) => c === " " || c === "\t"

const tokenLike = (content: string, single: boolean): boolean =>
  content !== "" && !/[\s;&|<>()`'"*?~\\]/.test(content) && !(single && content.includes("$"))

const safeEscaped = (c: string): string => (/[A-Za-z0-9_./+=:@%,-]/.test(c) ? c : "_")

/** The index after the `)` that closes the `(` at `open`, or -1. Quotes and escapes inside are skipped. */
const closeParen = (s: string, open: number, nesting = 0): number => {
  if (nesting > MAX_NESTING) return -1
  let depth = 0
  for (let i = open; i < s.length; i++) {
    const c = s[i]!
    if (c === "\\") {
      i++
      continue
    }
    if (c === "'") {
      const j = s.indexOf("'", i + 1)
      if (j === -1) return -1
      i = j
      continue
    }
    if (c === "\"") {
      const j = closeDouble(s, i, nesting + 1)
      if (j === -1) return -1
      i = j - 1
      continue
    }
    if (c === "`") {
      const j = closeBacktick(s, i)
      if (j === -1) return -1
      i = j - 1
      continue
    }
    if (c === "(") depth++
    else if (c === ")") {
      depth--
      if (depth === 0) return i + 1
    }
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

/** The index after the `"` that closes the one at `open`, or -1. */
const closeDouble = (s: string, open: number, nesting = 0): number => {
  for (let i = open + 1; i < s.length; i++) {
    const c = s[i]
    if (c === "\\") i++
    else if (c === "\"") return i + 1
    else if (c === "$" && s[i + 1] === "(") {
      const j = closeParen(s, i + 1, nesting + 1)
      if (j === -1) return -1
      i = j - 1
    } else if (c === "`") {
      const j = closeBacktick(s, i)
      if (j === -1) return -1
      i = j - 1
    }
  }
  return -1
}

interface Scan {
  end: number
  balanced: boolean
  raw: string
  value: string
  masked: string
  subs: Array<Lexed>
}

/** Reads a substitution starting at `i` (`$(`, `` ` ``, `<(`, `>(`, `$((`) into the scan. */
const readSubstitution = (s: string, i: number, scan: Scan, depth: number): number => {
  if (s[i] === "`") {
    const end = closeBacktick(s, i)
    if (end === -1) {
      scan.balanced = false
      return s.length
    }
    const inner = lexNested(s.slice(i + 1, end - 1).replace(/\\([`$\\])/g, "$1"), depth + 1)
    scan.subs.push(inner)
    scan.value += s.slice(i, end)
    scan.masked += `\`${inner.view}\``
    return end
  }
  const open = i + 1
  const end = closeParen(s, open)
  if (end === -1) {
    scan.balanced = false
    return s.length
  }
  const raw = s.slice(i, end)
  scan.value += raw
  if (s[i] === "$" && s[open + 1] === "(") {
    // `$((…))` is arithmetic, not a command.
    scan.masked += raw
    return end
  }
  const inner = lexNested(s.slice(open + 1, end - 1), depth + 1)
  scan.subs.push(inner)
  scan.masked += `${s.slice(i, open + 1)}${inner.view})`
  return end
}

/** Reads a double-quoted string at `i`. */
const readDouble = (s: string, i: number, scan: Scan, depth: number): number => {
  const end = closeDouble(s, i)
  if (end === -1) {
    scan.balanced = false
    return s.length
  }
  const content = s.slice(i + 1, end - 1)
  if (!content.includes("$(") && !content.includes("`")) {
    const unescaped = content.replace(/\\([$`"\\\n])/g, "$1")
    scan.value += unescaped
    scan.masked += tokenLike(unescaped, false) ? unescaped : "_"
    return end
  }
  // Substitutions inside double quotes run: keep them (and the quotes), mask the literal text around them.
  scan.masked += "\""
  let literal = ""
  const flush = () => {
    if (literal !== "") scan.masked += tokenLike(literal, false) ? literal : "_"
    literal = ""
  }
  for (let k = i + 1; k < end - 1;) {
    const c = s[k]!
    if (c === "\\") {
      literal += s[k + 1] ?? ""
      scan.value += s[k + 1] ?? ""
      k += 2
    } else if ((c === "$" && s[k + 1] === "(") || c === "`") {
      flush()
      k = readSubstitution(s, k, scan, depth)
    } else {
      literal += c
      scan.value += c
      k++
    }
  }
  flush()
  scan.masked += "\""
  return end
}

const OPERATOR_CHARS: ReadonlySet<string> = new Set([";", "|", "(", ")", "\n"])

/** Reads one word at `i`. Stops at blanks, operators and a heredoc operator. */
const readWord = (s: string, start: number, depth: number): Scan => {
  const scan: Scan = { end: start, balanced: true, raw: "", value: "", masked: "", subs: [] }
  let i = start
  while (i < s.length) {
    const c = s[i]!
    const next = s[i + 1]
    if (isBlank(c) || OPERATOR_CHARS.has(c)) break
    if (c === "&") {
      // `&>`, `>&2`, `<&0` are redirections; any other `&` ends the word.
      if (next === ">" || s[i - 1] === ">" || s[i - 1] === "<") {
        scan.value += c
        scan.masked += c
        i++
        continue
      }
      break
    }
    if (c === "<" && next === "<") {
      if (s[i + 2] === "<") {
        scan.value += "<<<"
        scan.masked += "<<<"
        i += 3
        continue
      }
      if (i > start) break
    }
    if (c === "\\") {
      if (next === undefined) {
        scan.balanced = false
        i++
        break
      }
      if (next === "\n") {
        i += 2
        continue
      }
      scan.value += next
      scan.masked += safeEscaped(next)
      i += 2
      continue
    }
    if (c === "'") {
      const j = s.indexOf("'", i + 1)
      if (j === -1) {
        scan.balanced = false
        i = s.length
        break
      }
      const content = s.slice(i + 1, j)
      scan.value += content
      scan.masked += tokenLike(content, true) ? content : content === "" ? "" : "_"
      i = j + 1
      continue
    }
    if (c === "\"") {
      i = readDouble(s, i, scan, depth)
      continue
    }
    if ((c === "$" && next === "(") || c === "`" || ((c === "<" || c === ">") && next === "(")) {
      i = readSubstitution(s, i, scan, depth)
      continue
    }
    if (c === "$" && next === "{") {
      const j = s.indexOf("}", i)
      const end = j === -1 ? s.length : j + 1
      if (j === -1) scan.balanced = false
      scan.value += s.slice(i, end)
      scan.masked += s.slice(i, end)
      i = end
      continue
    }
    scan.value += c
    scan.masked += c
    i++
  }
  scan.end = i
  scan.raw = s.slice(start, i)
  return scan
}

/** Substitutions inside an unquoted heredoc body (they run when the heredoc is read). */
const bodySubstitutions = (body: string, depth: number): Array<Lexed> => {
  const scan: Scan = { end: 0, balanced: true, raw: "", value: "", masked: "", subs: [] }
  for (let k = 0; k < body.length;) {
    const c = body[k]
    if (c === "\\") k += 2
    else if ((c === "$" && body[k + 1] === "(") || c === "`") k = readSubstitution(body, k, scan, depth)
    else k++
  }
  return scan.subs
}

// Past the audit depth the inner text is not lexed: classification blocks it anyway.
const lexNested = (s: string, depth: number): Lexed =>
  depth > MAX_DEPTH ? { source: s, balanced: true, view: s, parts: [], substitutions: [] } : lexAt(s, depth)

const TWO_CHAR_OPS = ["&&", "||", ";;", "|&"]

const lexAt = (s: string, depth: number): Lexed => {
  let balanced = true
  let view = ""
  const parts: Array<Part> = []
  const substitutions: Array<Lexed> = []
  let part: Part = { words: [], heredocs: [] }
  const pending: Array<{ delim: string; strip: boolean; quoted: boolean; part: Part }> = []
  const endPart = () => {
    if (part.words.length > 0) parts.push(part)
    part = { words: [], heredocs: [] }
  }
  const pushWord = (scan: Scan) => {
    part.words.push({ raw: scan.raw, value: scan.value, masked: scan.masked })
    substitutions.push(...scan.subs)
    if (!scan.balanced) balanced = false
    view += scan.masked
  }
  let i = 0
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
    const two = s.slice(i, i + 2)
    if (TWO_CHAR_OPS.includes(two)) {
      view += two
      endPart()
      i += 2
      continue
    }
    if (two === "((" && part.words.length === 0) {
      // An arithmetic command: `<<` inside is a shift, not a heredoc.
      const end = closeParen(s, i)
      const stop = end === -1 ? s.length : end
      if (end === -1) balanced = false
      const raw = s.slice(i, stop)
      part.words.push({ raw, value: raw, masked: raw })
      view += raw
      i = stop
      continue
    }
    if (c === ";" || c === "|" || c === "(" || c === ")" || (c === "&" && s[i + 1] !== ">")) {
      view += c
      endPart()
      i++
      continue
    }
    if (two === "<<" && s[i + 2] !== "<") {
      let j = i + 2
      const strip = s[j] === "-"
      if (strip) j++
      while (isBlank(s[j])) j++
      const delimiter = readWord(s, j, depth)
      const quoted = /['"\\]/.test(delimiter.raw)
      if (delimiter.raw !== "") pending.push({ delim: delimiter.value, strip, quoted, part })
      pushWord({ ...delimiter, raw: s.slice(i, delimiter.end), masked: `<<${strip ? "-" : ""}${delimiter.masked}` })
      i = Math.max(delimiter.end, j)
      continue
    }
    const scan = readWord(s, i, depth)
    if (scan.end === i) {
      // Not reachable for well-formed input; never loop forever.
      view += c
      i++
      continue
    }
    pushWord(scan)
    i = scan.end
  }
  endPart()
  return { source: s, balanced, view, parts, substitutions }
}

/** Lexes a command (pure). */
export const lex = (command: string): Lexed => lexAt(command, 0)

/** Splits a command into its sub-commands' texts (masked), as pass 2 sees them. */
export const splitCommand = (command: string): ReadonlyArray<string> => {
  const lexed = lex(command)
  if (!lexed.balanced) return [command]
  return lexed.parts.map((p) => p.words.map((w) => w.masked).join(" "))
}

// ---------------------------------------------------------------------------------------------------------
// Classification

/** Why a command is refused before it is read, if it is. */
export const validate = (command: string): string | undefined => {
  if (command.trim() === "") return "empty command"
  if (command.length > MAX_COMMAND_LENGTH) return `command too long (over ${MAX_COMMAND_LENGTH} characters)`
  if (command.includes("\u0000")) return "null byte detected"
  return undefined
}

const RANK: Record<Verdict, number> = { pass: 0, warn: 1, block: 2 }
const PASS: Finding = { verdict: "pass" }
const worse = (a: Finding, b: Finding): Finding => (RANK[b.verdict] > RANK[a.verdict] ? b : a)

const KEYWORDS: ReadonlySet<string> = new Set(["if", "then", "do", "else", "elif", "while", "until", "!", "{", "time", "coproc"])
/** Wrappers that keep the next word in command position, with their options that take an argument. */
const WRAPPERS: Record<string, ReadonlySet<string>> = {
  env: new Set(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]),
  command: new Set(),
  builtin: new Set(),
  exec: new Set(["-a"]),
  nohup: new Set(),
  time: new Set(["-f", "--format", "-o", "--output"]),
  sudo: new Set(["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R", "-T"]),
  doas: new Set(["-u", "-C"]),
  nice: new Set(["-n", "--adjustment"]),
  setsid: new Set(),
  timeout: new Set(["-s", "--signal", "-k", "--kill-after"])
}
const SHELLS: ReadonlySet<string> = new Set(["sh", "bash", "dash", "ksh", "zsh"])
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=/

const basename = (word: string) => word.slice(word.lastIndexOf("/") + 1)

/** The index of the word in command position: after keywords, assignments and wrappers. */
export const commandIndex = (words: ReadonlyArray<Word>): number => {
  let i = 0
  for (let guard = 0; i < words.length && guard < 64; guard++) {
    const word = words[i]!
    if (KEYWORDS.has(word.raw)) {
      i++
      continue
    }
    if (ASSIGNMENT.test(word.raw)) {
      i++
      continue
    }
    const name = basename(word.value)
    const withArgument = WRAPPERS[name]
    if (withArgument === undefined) break
    i++
    while (i < words.length && words[i]!.value.startsWith("-") && words[i]!.value.length > 1) {
      const flag = words[i]!.value
      i += withArgument.has(flag) ? 2 : 1
      if (flag === "--") break
    }
    if (name === "timeout" && i < words.length) i++ // the duration
  }
  return i
}

const classifyText = (command: string, depth: number): Finding => classifyLexed(lex(command), depth)

const checkPart = (part: Part, depth: number): Finding => {
  const text = part.words.map((w) => w.masked).join(" ")
  const high = firstMatch(HIGH_RISK, text)
  if (high !== undefined) return { verdict: "block", reason: high.label }
  let finding = PASS
  const index = commandIndex(part.words)
  const command = part.words[index]
  if (command !== undefined) {
    if (RISKY_SUBSTITUTION_WORD.test(command.raw) || RISKY_SUBSTITUTION_WORD.test(command.value)) {
      return { verdict: "block", reason: COMMAND_POSITION_LABEL }
    }
    const name = basename(command.value)
    const rest = part.words.slice(index + 1)
    let script: string | undefined
    if (name === "eval") script = rest.map((w) => w.value).join(" ")
    else if (SHELLS.has(name) || name === "su") {
      for (let k = 0; k < rest.length; k++) {
        const flag = rest[k]!.value
        if (/^-[A-Za-z]*c[A-Za-z]*$/.test(flag)) {
          script = rest[k + 1]?.value
          break
        }
        if (SHELLS.has(name) && !flag.startsWith("-")) break
      }
      if (script === undefined && SHELLS.has(name)) {
        for (const doc of part.heredocs) finding = worse(finding, nested(doc.body, depth))
      }
    }
    if (script !== undefined) finding = worse(finding, nested(script, depth))
    if (finding.verdict === "block") return finding
  }
  const medium = firstMatch(MEDIUM_RISK, text)
  if (medium !== undefined) finding = worse(finding, { verdict: "warn", reason: medium.label })
  return finding
}

const TOO_DEEP: Finding = { verdict: "block", reason: "commands nested too deeply to audit" }

const nested = (script: string, depth: number): Finding =>
  depth + 1 > MAX_DEPTH ? TOO_DEEP : classifyText(script, depth + 1)

const classifyLexed = (lexed: Lexed, depth: number): Finding => {
  if (!lexed.balanced) return classifyRawText(lexed.source)
  const view = lexed.view.replace(/\s+/g, " ").trim()
  const whole = firstMatch(HIGH_RISK, view)
  if (whole !== undefined) return { verdict: "block", reason: whole.label }
  let finding = PASS
  for (const part of lexed.parts) {
    finding = worse(finding, checkPart(part, depth))
    if (finding.verdict === "block") return finding
  }
  for (const sub of lexed.substitutions) {
    finding = worse(finding, depth + 1 > MAX_DEPTH ? TOO_DEEP : classifyLexed(sub, depth + 1))
    if (finding.verdict === "block") return finding
  }
  return finding
}

// Unbalanced quotes: the lexer's reading is not trustworthy, so the raw text is checked as one part.
const classifyRawText = (raw: string): Finding => {
  const normalized = raw.replace(/\s+/g, " ").trim()
  const high = firstMatch(HIGH_RISK, normalized)
  if (high !== undefined) return { verdict: "block", reason: high.label }
  if (RAW_COMMAND_POSITION.test(normalized)) return { verdict: "block", reason: COMMAND_POSITION_LABEL }
  const medium = firstMatch(MEDIUM_RISK, normalized)
  return medium !== undefined ? { verdict: "warn", reason: medium.label } : PASS
}

/**
 * Classifies a command: `block` (with the rule), `warn` (with the rule) or `pass`. Input that fails
 * `validate` blocks with the validation reason.
 */
export const classify = (command: string): Finding => {
  const invalid = validate(command)
  if (invalid !== undefined) return { verdict: "block", reason: invalid }
  const lexed = lex(command)
  return lexed.balanced ? classifyLexed(lexed, 0) : classifyRawText(command)
}

// ---------------------------------------------------------------------------------------------------------
// The middleware

/** The text the model reads when a command is blocked. */
export const blockedText = (reason: string): string =>
  `Command blocked: ${reason}. The command was not run; reach the goal with a safer command.`

/** The note appended to the result of a medium-risk command. */
export const warningText = (command: string, reason: string): string =>
  `⚠️ Warning: \`${truncate(command, AUDIT_COMMAND_LIMIT)}\` ran, but it is a medium-risk command (${reason}) ` +
  `that can change the runtime environment.`

/** A command cut for an audit record: at most 200 characters, with its full length when cut. */
export const truncate = (command: string, limit: number = AUDIT_COMMAND_LIMIT): string =>
  command.length > limit ? `${command.slice(0, limit)}... (${command.length} chars)` : command

/** The error result of a blocked call. */
export const blockedResult = (call: ToolCall, reason: string): ToolResult => ({
  message: M.tool(blockedText(reason), call.id || "missing_tool_call_id", { name: "bash", status: "error" })
})

/** Options: which tools carry shell commands in a `command` argument (default `["bash"]`). */
export interface Options {
  readonly toolNames?: ReadonlyArray<string> | undefined
}

/** The audit middleware. Requires `RunContext` (for the thread id of the audit record). */
export const layer = (options: Options = {}) =>
  Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => {
    const names = new Set(options.toolNames ?? ["bash"])
    const audit = (command: string, finding: Finding) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const record = {
          timestamp: new Date(now).toISOString(),
          thread_id: context.threadId,
          command: truncate(command),
          verdict: finding.verdict,
          ...(finding.reason !== undefined ? { reason: finding.reason } : {})
        }
        const log = finding.verdict === "pass" ? Effect.logDebug : Effect.logWarning
        return Effect.zipRight(
          emitCustom("sandbox_audit", record),
          log(`sandbox audit: ${finding.verdict}`).pipe(Effect.annotateLogs(record))
        )
      })
    return {
      tool: (call, next) => {
        if (!names.has(call.name)) return next(call)
        const raw = call.args.command
        const command = typeof raw === "string" ? raw : ""
        const finding = classify(command)
        if (finding.verdict === "block") {
          const reason = finding.reason ?? "security violation detected"
          return Effect.as(audit(command, finding), blockedResult(call, reason))
        }
        if (finding.verdict === "pass") return Effect.zipRight(audit(command, finding), next(call))
        const warning = warningText(command, finding.reason ?? "medium risk")
        return Effect.zipRight(
          audit(command, finding),
          Effect.map(next(call), (result) => ({
            ...result,
            message: { ...result.message, content: M.appendText(result.message.content, warning) }
          }))
        )
      }
    }
  }))
