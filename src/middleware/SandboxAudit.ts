/**
 * SandboxAudit (SPEC §5.10, lead chain slot 11; also in subagents): audits every `bash` call before it
 * runs. A high-risk command is answered with an error ToolMessage and never runs; a medium-risk command
 * runs and its result carries a warning; every call leaves an audit record (a `sandbox_audit` custom event
 * and a log line). This is defence in depth, not an isolation boundary: the sandbox is the boundary.
 *
 * How a command is read (`classify`):
 * 1. Input checks: empty, longer than 10,000 characters, or holding a NUL byte → block.
 * 2. The command is lexed like bash would (`ShellLexer`): quotes (also `$'…'` with its escapes decoded),
 *    escapes, `$(…)`, backticks, `<(…)`, `>(…)`, `${…}`, arithmetic, comments, redirections, heredocs, brace
 *    lists. Quoted text that is more than one word is data and is masked (`echo "rm -rf /"` and
 *    `grep 'dd if=' notes.txt` pass), while a quoted single word is read as the word itself, so quoting
 *    cannot hide a command (`r''m -rf "/"` is `rm -rf /`). Heredoc bodies are data.
 * 3. Pass 1: the whole masked command (whitespace-normalised) against the high-risk rules; this catches
 *    shapes that span statements (fork bombs, `while true; do … & done`, `curl … | sh`).
 * 4. Pass 2: every simple command of every list, pipeline, subshell, brace group, `if`/`while`/`for`/`case`
 *    body and function is checked against the high-risk rules, then against the command-position rule — a
 *    risky substitution (`$(`, backtick or `<(` opening curl, wget, bash, sh, python*, ruby, perl or base64)
 *    that *is* the command, after optional `VAR=val` assignments, redirections, reserved words and wrappers
 *    (env, command, builtin, exec, nohup, time, sudo, doas, nice, setsid, timeout, xargs, …) — and then
 *    against the medium-risk rules. `x=$(curl …)` and `echo $(curl …)` pass.
 * 5. Code inside code (`state/ShellCode`) is audited too (DeerFlow reads it as text only): every substitution;
 *    the script of `sh|bash|… -c` wherever the shell appears (`xargs sh -c`, `find -exec bash -c`, `$SHELL -c`),
 *    of `eval`, `su -c`, `env -S`, `trap`, `watch` and `alias`; what a shell or `source` reads from a heredoc,
 *    a here-string or a process substitution that prints code; what a substitution in command position
 *    prints. Code handed to Python, Perl, Ruby, Node or PHP (`-c`/`-e`/`-r` strings, heredocs, here-strings)
 *    cannot be lexed as shell and is checked as text against the rules, as DeerFlow checks every command.
 *    The most severe verdict of all the parts wins: one part that is blocked alone blocks the whole.
 * If a quote or substitution does not close, or bash could read the text two ways (`$((…))` that is not
 * arithmetic), the raw command is checked as one part as well (fail closed).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import type { ToolResult } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import { commandIndex, interpreterCodeOf, scriptsOf } from "../state/ShellCode.js"
import type { Lexed, Part } from "../state/ShellLexer.js"
export type { Lexed, Part, Word } from "../state/ShellLexer.js"
import * as ShellLexer from "../state/ShellLexer.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"
import { headChars } from "../state/Chars.js"

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

const RM_TARGET = /^(?:\/\*?|~\/?\*?|\$\{?HOME\}?\/?\*?|\/home\/?\*?|\/root\/?\*?)[)}]*$/

/**
 * `rm` with a recursive flag and a target that is the root, a home directory or `/root` (any order of
 * flags and operands). Procedural rather than one regex: a regex over "some token is a flag, some token is
 * a target" backtracks exponentially on long inputs.
 */
export const recursiveRootDelete = (text: string): boolean => {
  const rm = /\brm(?=\s)/g
  for (let m = rm.exec(text); m !== null; m = rm.exec(text)) {
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
    rm.lastIndex = end
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
    String.raw`\b(?:cat|head|tail|less|more|cp|base64|xxd|od|strings|grep|awk|sed)\b[^;&|]*[\s<]/etc/g?shadow\b|` +
      String.raw`(?:^|[\s(])<\s*/etc/g?shadow\b`
  ),
  rule("writing into /etc", String.raw`(?:>+\s*|\btee\s+(?:-${W}+\s+)*)/etc/`),
  rule(
    "piping into a shell",
    String.raw`(?:(?:^|[^|])\|&?|>\()\s*(?:(?:sudo|env|exec|command|nohup)\s+(?:-${W}+\s+)*)*` +
      String.raw`(?:/usr/bin/|/bin/)?${SHELL}\b`
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
  rule("fork bomb", String.raw`(?:^|[\s;&|{(])[^\s();&|]+\s*\(\)\s*\{[^}]*\|\s*[^\s;&|]+\s*&`),
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

/** Lexes a command (see `ShellLexer`). */
export const lex = ShellLexer.lex

const firstMatch = (rules: ReadonlyArray<Rule>, text: string): Rule | undefined => {
  for (const r of rules) if (r.test(text)) return r
  return undefined
}

/** Splits a command into its sub-commands' texts (masked), as pass 2 sees them. */
export const splitCommand = (command: string): ReadonlyArray<string> => {
  const lexed = lex(command)
  if (!lexed.balanced) return [command]
  return lexed.parts.map(partText)
}

const partText = (part: Part): string => part.words.map((w) => w.masked).join(" ")

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

const classifyText = (command: string, depth: number): Finding => classifyLexed(lex(command), depth)

const checkPart = (part: Part, depth: number): Finding => {
  const text = partText(part)
  const high = firstMatch(HIGH_RISK, text)
  if (high !== undefined) return { verdict: "block", reason: high.label }
  let finding = PASS
  const command = part.words[commandIndex(part.words)]
  if (command !== undefined) {
    if (RISKY_SUBSTITUTION_WORD.test(command.raw) || RISKY_SUBSTITUTION_WORD.test(command.value)) {
      return { verdict: "block", reason: COMMAND_POSITION_LABEL }
    }
  }
  for (const script of scriptsOf(part)) {
    finding = worse(finding, nested(script, depth))
    if (finding.verdict === "block") return finding
  }
  for (const code of interpreterCodeOf(part)) {
    finding = worse(finding, classifyRawText(code))
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
  // Unbalanced: the raw text is checked as one part, and what the lexer read (the lines before the fault run
  // in bash) is checked too; the worse verdict wins.
  let finding = lexed.balanced ? PASS : classifyRawText(lexed.source)
  if (finding.verdict === "block") return finding
  const view = lexed.view.replace(/\s+/g, " ").trim()
  const whole = firstMatch(HIGH_RISK, view)
  if (whole !== undefined) return { verdict: "block", reason: whole.label }
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

// Unbalanced or ambiguous: the lexer's reading is not trustworthy, so the raw text is checked as one part, and
// each of its lines and `;` / `&` / `|` pieces for the command-position rule (an unclosed `$((` must not hide
// the command on the next line, as DeerFlow's test_unbalanced_arithmetic_keeps_splitting_newlines has it).
const classifyRawText = (raw: string): Finding => {
  const normalized = raw.replace(/\s+/g, " ").trim()
  const high = firstMatch(HIGH_RISK, normalized)
  if (high !== undefined) return { verdict: "block", reason: high.label }
  const pieces = [normalized, ...raw.split(/[\n;&|]+/).map((piece) => piece.replace(/\s+/g, " ").trim())]
  if (pieces.some((piece) => RAW_COMMAND_POSITION.test(piece))) {
    return { verdict: "block", reason: COMMAND_POSITION_LABEL }
  }
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
  return classifyLexed(lex(command), 0)
}

// ---------------------------------------------------------------------------------------------------------
// The middleware

/** The text the model reads when a command is blocked. */
export const blockedText = (reason: string): string =>
  `Command blocked: ${reason}. The command was not run; reach the goal with a safer command.`

/** The note appended to the result of a medium-risk command (`hide`: as `truncate`). */
export const warningText = (command: string, reason: string, hide?: Redactor): string =>
  `⚠️ Warning: \`${truncate(command, AUDIT_COMMAND_LIMIT, hide)}\` ran, but it is a medium-risk command ` +
  `(${reason}) that can change the runtime environment.`

/**
 * A command cut for an audit record: at most 200 characters, with its full length when cut. A cut command is masked
 * with `hide` first (the process's secrets and the run's): a cut inside a key would keep its beginning.
 */
export const truncate = (command: string, limit: number = AUDIT_COMMAND_LIMIT, hide?: Redactor): string => {
  if (command.length <= limit) return command
  const shown = hide === undefined ? command : hide.text(command)
  return shown.length > limit ? `${headChars(shown, limit)}... (${command.length} chars)` : shown
}

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
    // (what a long command is masked with before its cut, made when one comes: the process's secrets, the run's)
    let hidden: Redactor | undefined
    const hideOf = (command: string): Effect.Effect<Redactor | undefined> =>
      command.length <= AUDIT_COMMAND_LIMIT || hidden !== undefined
        ? Effect.succeed(hidden)
        : Effect.map(ProcessSecrets.inRun, (hide) => (hidden = hide))
    const audit = (command: string, finding: Finding, hide: Redactor | undefined) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const record = {
          timestamp: new Date(now).toISOString(),
          thread_id: context.threadId,
          command: truncate(command, AUDIT_COMMAND_LIMIT, hide),
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
        return Effect.flatMap(hideOf(command), (hide) => {
          if (finding.verdict === "block") {
            const reason = finding.reason ?? "security violation detected"
            return Effect.as(audit(command, finding, hide), blockedResult(call, reason))
          }
          if (finding.verdict === "pass") return Effect.zipRight(audit(command, finding, hide), next(call))
          const warning = warningText(command, finding.reason ?? "medium risk", hide)
          return Effect.zipRight(
            audit(command, finding, hide),
            Effect.map(next(call), (result) => ({
              ...result,
              message: { ...result.message, content: M.appendText(result.message.content, warning) }
            }))
          )
        })
      }
    }
  }))

/** Its chain entry: audits the bash commands that get past the guardrail. */
export const entry = () => Chain.entry("SandboxAudit", () => layer())
