/**
 * The text rules of DeerFlow's SkillScan, for the skill package review (SPEC §7.18): embedded secrets in any text
 * file (a private key, a cloud or API token, a secret-like assignment with a real value; the secret itself never
 * shown), and in a SKILL.md, prompt-override phrases, sensitive capabilities, sensitive host paths and plain-HTTP
 * external endpoints. Rule ids, messages and severities are SkillScan's (CRITICAL a blocker, HIGH an error, MEDIUM
 * a warning). SkillScan's other rules (Python and shell analysis, network and resource rules, its package rules)
 * are not here, so the review still lists `skillscan` as not assessed. Eval fixtures are not scanned.
 */
import type { Finding, Snapshot } from "./SkillPackage.js"
import { baseName, isEvalFixturePath } from "./SkillPackage.js"

type ScanSeverity = "CRITICAL" | "HIGH" | "MEDIUM"

const RULES: Readonly<Record<string, readonly [ScanSeverity, string, string]>> = {
  "secret-private-key": [
    "CRITICAL",
    "Private key material is embedded in skill content.",
    "Move private keys to a managed secret store and remove them from the skill."
  ],
  "secret-cloud-token": [
    "CRITICAL",
    "High-confidence cloud or API token is embedded in skill content.",
    "Move tokens to environment variables or a secret store."
  ],
  "secret-env-assignment": [
    "HIGH",
    "Secret-like assignment contains a non-placeholder value.",
    "Replace hardcoded credentials with documented runtime configuration."
  ],
  "declaration-prompt-override": [
    "HIGH",
    "SKILL.md contains a prompt override phrase.",
    "Rephrase examples so they describe unsafe text instead of instructing the agent to follow it."
  ],
  "declaration-sensitive-capability": [
    "HIGH",
    "SKILL.md declares a sensitive capability.",
    "Make the capability explicit, narrow, and justified, or remove it."
  ],
  "declaration-sensitive-path": [
    "HIGH",
    "SKILL.md references sensitive host or credential paths.",
    "Remove references to sensitive host paths unless they are harmless documentation."
  ],
  "declaration-external-endpoint": [
    "MEDIUM",
    "SKILL.md declares an external network endpoint.",
    "Document why the endpoint is needed and prefer HTTPS."
  ]
}

const SEVERITY = { CRITICAL: "blocker", HIGH: "error", MEDIUM: "warning" } as const

const PLACEHOLDERS: ReadonlySet<string> = new Set([
  "", "x", "xx", "xxx", "xxxx", "changeme", "change-me", "example", "placeholder", "test", "dummy", "your-key",
  "<your-key>"
])

const looksLikePlaceholder = (value: string): boolean => {
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
const SENSITIVE_PATH = /(~\/.ssh|\/etc\/passwd|\/etc\/shadow|\/var\/run\/docker\.sock|docker\.sock|169\.254\.169\.254)/
const URL = /https?:\/\/[^\s)'"<>]+/
const LOCAL_HOSTS: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "0.0.0.0", "::1"])

const lineAt = (text: string, index: number) => text.slice(0, Math.max(index, 0)).split("\n").length

const scanFinding = (rule: string, path: string, text: string, index: number, evidence: string): Finding => {
  const [severity, message, remediation] = RULES[rule]!
  return {
    rule_id: rule,
    source: "skillscan",
    profile: "deerflow",
    severity: SEVERITY[severity],
    path,
    line: lineAt(text, index),
    message,
    remediation,
    // (a secret is never repeated: the rule names what kind it is)
    evidence: rule.startsWith("secret-") ? "[redacted]" : evidence,
    skillscan_severity: severity
  }
}

const scanText = (path: string, text: string): Array<Finding> => {
  const found: Array<Finding> = []
  const first = (rule: string, re: RegExp) => {
    const match = re.exec(text)
    if (match !== null) found.push(scanFinding(rule, path, text, match.index, match[0]))
  }
  first("secret-private-key", PRIVATE_KEY)
  for (const re of TOKENS) {
    const match = re.exec(text)
    if (match !== null && !looksLikePlaceholder(match[0])) {
      found.push(scanFinding("secret-cloud-token", path, text, match.index, match[0]))
      break
    }
  }
  for (const match of text.matchAll(new RegExp(ASSIGNMENT.source, `${ASSIGNMENT.flags}g`))) {
    if (!looksLikePlaceholder(match[2]!.trim())) {
      found.push(scanFinding("secret-env-assignment", path, text, match.index, match[0]))
      break
    }
  }
  if (baseName(path) === "SKILL.md") {
    first("declaration-prompt-override", PROMPT_OVERRIDE)
    first("declaration-sensitive-capability", CAPABILITY)
    first("declaration-sensitive-path", SENSITIVE_PATH)
    for (const match of text.matchAll(new RegExp(URL.source, "g"))) {
      const host = /^https?:\/\/\[?([^\]/:]+)/.exec(match[0])?.[1]
      if (match[0].startsWith("http://") && host !== undefined && !LOCAL_HOSTS.has(host)) {
        found.push(scanFinding("declaration-external-endpoint", path, text, match.index, match[0]))
        break
      }
    }
  }
  return found
}

/** The findings of SkillScan's text rules on the package's text files (eval fixtures left out). */
export const scan = (snapshot: Snapshot): Array<Finding> => {
  const seen = new Set<string>()
  const findings: Array<Finding> = []
  for (const file of snapshot.files) {
    if (file.kind !== "text" || isEvalFixturePath(file.path)) continue
    // (SkillScan reads a file with a NUL in its first 4 KiB as binary)
    const text = file.content ?? ""
    if (text.slice(0, 4096).includes("\u0000")) continue
    for (const finding of scanText(file.path, text)) {
      const key = `${finding.rule_id}\u0000${finding.path}\u0000${finding.line}`
      if (!seen.has(key)) {
        seen.add(key)
        findings.push(finding)
      }
    }
  }
  return findings
}
