/**
 * SkillScan's rules on a text file's words (DeerFlow's patterns): embedded secrets in any file; in a SKILL.md,
 * prompt-override phrases, sensitive capabilities and paths, plain-HTTP endpoints; in a shell script, reverse
 * shells, exfiltration, `curl | sh`, destructive commands and environment dumps; in every file, cloud metadata
 * addresses, fork bombs and cleartext HTTP. Each rule reports its first match in a file.
 */
import * as SkillScanPython from "./SkillScanPython.js"
import type { SecurityFinding } from "./SkillScanRules.js"
import { finding, findingAt, httpHost, lineAt, LOCAL_HOSTS, SENSITIVE_PATH } from "./SkillScanRules.js"

const PLACEHOLDERS: ReadonlySet<string> = new Set([
  "", "x", "xx", "xxx", "xxxx", "changeme", "change-me", "example", "placeholder", "test", "dummy", "your-key",
  "<your-key>"
])

/** Whether a secret-like value is a placeholder (`<your-key>`, `${TOKEN}`, `changeme`...), not a secret. */
export const looksLikePlaceholder = (value: string): boolean => {
  const normalized = value.trim().replace(/^["']+|["']+$/g, "").toLowerCase()
  return PLACEHOLDERS.has(normalized) || normalized.startsWith("<") || normalized.startsWith("${") ||
    normalized.includes("your") || normalized.includes("example")
}

const PRIVATE_KEY = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/
const TOKENS = [
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/,
  /\bgh[pousr]_[A-Za-z0-9_]{20,}\b/,
  /\bxox[baprs]-[A-Za-z0-9-]{20,}\b/,
  /\bsk-[A-Za-z0-9]{20,}\b/
]
// (matched with a /g copy made per scan: a module-level /g expression's lastIndex would be shared state)
const ASSIGNMENT = /\b(token|password|passwd|api[_-]?key|secret|credential)s?\b\s*[:=]\s*["']?([^"'\s#]+)/im
const PROMPT_OVERRIDE = new RegExp(
  "\\b(ignore|disregard)\\s+(all\\s+)?(previous|prior)\\s+instructions\\b|" +
    "\\boverride\\s+(the\\s+)?(system|developer)\\s+instructions\\b",
  "i"
)
const CAPABILITY = new RegExp(
  "(execute\\s+(arbitrary\\s+)?commands?|shell\\s+commands?|credential\\s+access|read\\s+secrets?|" +
    "arbitrary\\s+network|network\\s+egress)",
  "i"
)
const URL = /https?:\/\/[^\s)'"<>]+/

const DESTRUCTIVE_RM = "\\brm\\s+(?:-\\S+\\s+|--no-preserve-root\\s+)*-\\S*[rR]\\S*\\s+" +
  "(?:-\\S+\\s+|--no-preserve-root\\s+)*" +
  "/(?:\\*|\\s|$|(?:bin|boot|dev|etc|home|lib|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)(?:/\\*?)?(?:\\s|$))"
const FORK_BOMB = ":\\(\\)\\{\\s*:\\|:&\\s*\\};:"
const DESTRUCTIVE = new RegExp(`${DESTRUCTIVE_RM}|${FORK_BOMB}|dd\\s+[^#\\n]*\\bof=/dev/`)
const EXTERNAL_HTTP = /http:\/\/([A-Za-z0-9.-]+)(?::\d+)?(?:\/|\b)/

const isPrivateHost = (host: string) =>
  LOCAL_HOSTS.has(host) || host.startsWith("10.") || host.startsWith("192.168.") ||
  /^172\.(1[6-9]|2\d|3[01])\./.test(host)

const secrets = (file: string, text: string, out: Array<SecurityFinding>) => {
  const key = PRIVATE_KEY.exec(text)
  if (key !== null) out.push(findingAt("secret-private-key", file, text, key))
  for (const re of TOKENS) {
    const match = re.exec(text)
    if (match !== null && !looksLikePlaceholder(match[0])) {
      out.push(findingAt("secret-cloud-token", file, text, match))
      break
    }
  }
  for (const match of text.matchAll(new RegExp(ASSIGNMENT.source, `${ASSIGNMENT.flags}g`))) {
    if (!looksLikePlaceholder(match[2]!.trim())) {
      out.push(findingAt("secret-env-assignment", file, text, match))
      break
    }
  }
}

const declaration = (file: string, text: string, out: Array<SecurityFinding>) => {
  for (const [id, re] of [
    ["declaration-prompt-override", PROMPT_OVERRIDE],
    ["declaration-sensitive-capability", CAPABILITY],
    ["declaration-sensitive-path", SENSITIVE_PATH]
  ] as const) {
    const match = re.exec(text)
    if (match !== null) out.push(findingAt(id, file, text, match))
  }
  for (const match of text.matchAll(new RegExp(URL.source, "g"))) {
    const host = httpHost(match[0])
    if (match[0].startsWith("http://") && host !== undefined && !LOCAL_HOSTS.has(host)) {
      out.push(findingAt("declaration-external-endpoint", file, text, match))
      break
    }
  }
}

const shell = (file: string, text: string, out: Array<SecurityFinding>) => {
  const first = (id: string, re: RegExp) => {
    const match = re.exec(text)
    if (match !== null) out.push(findingAt(id, file, text, match))
  }
  // unmistakable reverse-shell signals block; bash -i and mkfifo only warn (legitimate scripts use them)
  first("shell-reverse-shell", /(\/dev\/tcp\/|nc\s+-e\b)/)
  first("shell-reverse-shell-heuristic", /(bash\s+-i\b|mkfifo\s+)/)
  if (/(\/etc\/shadow|\/etc\/passwd)/.test(text) && /\b(curl|wget|nc|scp)\b/.test(text)) {
    out.push(finding("shell-sensitive-exfil", file, lineAt(text, Math.max(text.indexOf("/etc"), 0)), "/etc"))
  }
  first("shell-curl-pipe-shell", /\b(curl|wget)\b[^\n|;]*\|\s*(?:sh|bash)\b/)
  first("shell-destructive-command", DESTRUCTIVE)
  first("shell-env-dump", /\b(env|printenv|export\s+-p)\b/)
}

const networkAndResource = (file: string, text: string, out: Array<SecurityFinding>) => {
  const metadata = /(169\.254\.169\.254|metadata\.google\.internal)/.exec(text)
  if (metadata !== null) out.push(findingAt("network-cloud-metadata", file, text, metadata))
  const bomb = new RegExp(FORK_BOMB).exec(text)
  if (bomb !== null) out.push(findingAt("resource-fork-bomb", file, text, bomb))
  const http = EXTERNAL_HTTP.exec(text)
  if (http !== null) {
    out.push(findingAt(isPrivateHost(http[1]!) ? "network-local-http" : "network-cleartext-http", file, text, http))
  }
}

/** A file's `#!` line, lower-cased ("" when it has none). */
const shebang = (text: string) => text.startsWith("#!") ? text.slice(0, text.indexOf("\n") >>> 0).toLowerCase() : ""

/** Whether a file is a shell script (by its extension or its `#!` line). */
export const isShell = (file: string, text: string): boolean =>
  /\.(sh|bash)$/i.test(file) || /sh|bash|zsh/.test(shebang(text))

/**
 * SkillScan's findings on the text of file `file` (its path in the skill); what an analyzer could not read is
 * added to `errors`, the other rules' findings kept.
 */
export const scanText = (file: string, text: string, errors: Array<string>): Array<SecurityFinding> => {
  const out: Array<SecurityFinding> = []
  secrets(file, text, out)
  if ((file.split("/").at(-1) ?? "") === "SKILL.md") declaration(file, text, out)
  if (/\.py$/i.test(file) || shebang(text).includes("python")) {
    try {
      out.push(...SkillScanPython.scan(file, text))
    } catch (cause) {
      errors.push(`${file}: analyzer failed: ${(cause as Error).message ?? String(cause)}`)
    }
  }
  if (isShell(file, text)) shell(file, text, out)
  networkAndResource(file, text, out)
  return out
}
