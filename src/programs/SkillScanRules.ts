/**
 * SkillScan's rules (DeerFlow's native deterministic skill scanner): each rule's id, severity, message and remedy,
 * and the finding a rule makes. The ids, severities and wording are DeerFlow's: a client or a reviewer reading a
 * finding sees what DeerFlow would show. `CRITICAL` blocks an install or a write; the rest are warnings.
 */

/** SkillScan's severities. */
export type Severity = "CRITICAL" | "HIGH" | "MEDIUM" | "LOW"

/** One finding, in DeerFlow's shape (`file` relative to the skill's folder; null: the package as a whole). */
export interface SecurityFinding {
  readonly rule_id: string
  readonly severity: Severity
  readonly file: string | null
  readonly line: number | null
  readonly message: string
  readonly remediation: string
  readonly evidence: string | null
}

type Rule = readonly [Severity, string, string]

const rule = (severity: Severity, message: string, remediation: string): Rule => [severity, message, remediation]

/** Every rule, by id. */
export const RULES: Readonly<Record<string, Rule>> = {
  "package-nested-skill-md": rule(
    "CRITICAL",
    "Package contains a nested SKILL.md file.",
    "Keep exactly one SKILL.md at the skill root."
  ),
  "package-oversized-file": rule(
    "CRITICAL",
    "Package contains a file that exceeds the per-file size limit.",
    "Remove or shrink the oversized file."
  ),
  "package-executable-binary": rule(
    "CRITICAL",
    "Package contains an executable binary.",
    "Remove binary executables from the skill package."
  ),
  "package-nested-archive": rule(
    "HIGH",
    "Package contains a nested archive file.",
    "Unpack and review nested archives before packaging the skill."
  ),
  "package-hidden-sensitive-file": rule(
    "HIGH",
    "Package contains a hidden sensitive file.",
    "Remove hidden credential or package-manager config files."
  ),
  "package-git-directory": rule(
    "MEDIUM",
    "Package contains a .git directory.",
    "Package only source files needed by the skill, excluding repository metadata."
  ),
  "secret-private-key": rule(
    "CRITICAL",
    "Private key material is embedded in skill content.",
    "Move private keys to a managed secret store and remove them from the skill."
  ),
  "secret-cloud-token": rule(
    "CRITICAL",
    "High-confidence cloud or API token is embedded in skill content.",
    "Move tokens to environment variables or a secret store."
  ),
  "secret-env-assignment": rule(
    "HIGH",
    "Secret-like assignment contains a non-placeholder value.",
    "Replace hardcoded credentials with documented runtime configuration."
  ),
  "declaration-prompt-override": rule(
    "HIGH",
    "SKILL.md contains a prompt override phrase.",
    "Rephrase examples so they describe unsafe text instead of instructing the agent to follow it."
  ),
  "declaration-sensitive-capability": rule(
    "HIGH",
    "SKILL.md declares a sensitive capability.",
    "Make the capability explicit, narrow, and justified, or remove it."
  ),
  "declaration-sensitive-path": rule(
    "HIGH",
    "SKILL.md references sensitive host or credential paths.",
    "Remove references to sensitive host paths unless they are harmless documentation."
  ),
  "declaration-external-endpoint": rule(
    "MEDIUM",
    "SKILL.md declares an external network endpoint.",
    "Document why the endpoint is needed and prefer HTTPS."
  ),
  "python-dynamic-exec": rule(
    "CRITICAL",
    "Python dynamic code execution primitive is used in a skill file.",
    "Remove dynamic execution and replace it with explicit typed logic."
  ),
  "python-shell-exec": rule(
    "CRITICAL",
    "Python shell execution primitive is used in a skill file.",
    "Use subprocess with a fixed argument list and shell=False, or remove shell execution."
  ),
  "python-sensitive-exfil": rule(
    "CRITICAL",
    "Python code reads a sensitive path and uses an outbound network sink in the same file.",
    "Remove the sensitive read or network sink, and keep credential access outside skills."
  ),
  "python-env-dump-exfil": rule(
    "CRITICAL",
    "Python code reads the process environment in bulk and uses an outbound network sink in the same file.",
    "Avoid bulk environment reads and never send environment data over the network."
  ),
  "python-reverse-shell": rule(
    "CRITICAL",
    "Python code matches a reverse-shell shape.",
    "Remove reverse-shell behavior from the skill."
  ),
  "python-dynamic-import": rule(
    "HIGH",
    "Python dynamically imports a non-literal module.",
    "Use explicit imports or a constrained allowlist."
  ),
  "python-subprocess": rule(
    "HIGH",
    "Python invokes subprocess without shell=True.",
    "Review subprocess usage and keep arguments fixed and minimal."
  ),
  "python-sensitive-path-read": rule(
    "HIGH",
    "Python reads a sensitive path.",
    "Remove sensitive host-path access from the skill."
  ),
  "python-unsafe-deserialization": rule(
    "MEDIUM",
    "Python uses unsafe deserialization.",
    "Use safe loaders or trusted typed formats."
  ),
  "shell-reverse-shell": rule(
    "CRITICAL",
    "Shell script contains a reverse-shell idiom.",
    "Remove reverse-shell behavior from the skill."
  ),
  "shell-reverse-shell-heuristic": rule(
    "HIGH",
    "Shell script resembles a reverse-shell idiom.",
    "Confirm this is not reverse-shell behavior; unmistakable reverse-shell signals are blocked outright."
  ),
  "shell-sensitive-exfil": rule(
    "CRITICAL",
    "Shell script reads sensitive paths and sends data over the network.",
    "Remove sensitive reads or outbound transfer commands."
  ),
  "shell-curl-pipe-shell": rule(
    "HIGH",
    "Shell script pipes remote content into a shell.",
    "Download, verify, and execute reviewed code explicitly instead."
  ),
  "shell-destructive-command": rule(
    "HIGH",
    "Shell script contains an unmistakably destructive command.",
    "Remove destructive commands from skill scripts."
  ),
  "shell-env-dump": rule("MEDIUM", "Shell script dumps the environment.", "Avoid bulk environment dumps in skills."),
  "network-cloud-metadata": rule(
    "CRITICAL",
    "Skill content references a cloud metadata service.",
    "Remove cloud metadata access from the skill."
  ),
  "resource-fork-bomb": rule(
    "CRITICAL",
    "Skill content contains a fork-bomb pattern.",
    "Remove resource-exhaustion payloads."
  ),
  "network-cleartext-http": rule(
    "MEDIUM",
    "Skill content references a non-local cleartext HTTP endpoint.",
    "Use HTTPS or document why cleartext local development is required."
  ),
  "network-local-http": rule(
    "LOW",
    "Skill content references a local HTTP endpoint.",
    "Confirm the local endpoint is expected for this skill."
  )
}

/** Host paths and addresses a skill has no business reading (DeerFlow's list). */
export const SENSITIVE_PATH =
  /(~\/.ssh|\/etc\/passwd|\/etc\/shadow|\/var\/run\/docker\.sock|docker\.sock|169\.254\.169\.254)/

/** Hosts whose plain HTTP stays on the machine. */
export const LOCAL_HOSTS: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "0.0.0.0", "::1"])

/** The host of an http(s) URL, if it has one. */
export const httpHost = (url: string): string | undefined => /^https?:\/\/\[?([^\]/:]+)/.exec(url)?.[1]

/** A finding of rule `id` (a secret is never repeated in the evidence: the rule says what kind it is). */
export const finding = (
  id: string,
  file: string | null,
  line: number | null,
  evidence: string | null,
  severity?: Severity
): SecurityFinding => {
  const [ruleSeverity, message, remediation] = RULES[id]!
  return {
    rule_id: id,
    severity: severity ?? ruleSeverity,
    file,
    line,
    message,
    remediation,
    evidence: evidence !== null && id.startsWith("secret-") ? "[redacted]" : evidence
  }
}

/** The 1-based line of `index` in `text`. */
export const lineAt = (text: string, index: number): number => {
  let line = 1
  for (let i = 0; i < index && i < text.length; i++) if (text.charCodeAt(i) === 10) line++
  return line
}

/** A finding of rule `id` at a match in `text`. */
export const findingAt = (id: string, file: string, text: string, match: RegExpExecArray | RegExpMatchArray) =>
  finding(id, file, lineAt(text, match.index ?? 0), match[0])

/** Findings once per rule, file and line, in order. */
export const dedupe = (findings: Iterable<SecurityFinding>): Array<SecurityFinding> => {
  const seen = new Set<string>()
  const out: Array<SecurityFinding> = []
  for (const f of findings) {
    const key = `${f.rule_id}\u0000${f.file ?? ""}\u0000${f.line ?? ""}`
    if (seen.has(key)) continue
    seen.add(key)
    out.push(f)
  }
  return out
}

/** DeerFlow's one-line list of findings: `rule (SEVERITY) at file:line: message Remediation: ...`. */
export const format = (findings: ReadonlyArray<SecurityFinding>): string =>
  findings.map((f) => {
    const at = `${f.file ?? "<archive>"}${f.line !== null ? `:${f.line}` : ""}`
    return `${f.rule_id} (${f.severity}) at ${at}: ${f.message} Remediation: ${f.remediation}`
  }).join("; ")
