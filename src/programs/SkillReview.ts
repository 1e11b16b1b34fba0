/**
 * The deterministic review of a skill package (SPEC §7.18), as DeerFlow's review core computes it: a package
 * snapshot (`SkillPackage`) becomes review facts (`deerflow.skill-review.facts.v1`): structure findings on the
 * root SKILL.md and its front matter, package findings (links, nested archives, hidden credential files), the
 * resource graph and eval manifests (`SkillReviewResources`), and the package digest. Nothing here reads a disk
 * or runs anything: the snapshot is given. SkillScan's findings come from `SkillReviewScan`.
 */
import * as OnDemand from "../internal/OnDemand.js"
import { FRONT_MATTER_KEYS } from "../layers/SkillsDirectory.js"
import { charLength } from "../state/Chars.js"
import type { Finding, Profile, ReaderError, Snapshot } from "./SkillPackage.js"
import {
  baseName,
  compare,
  finding,
  isEvalFixtureSkillMd,
  packageDigest,
  partsOf,
  sortFindings
} from "./SkillPackage.js"
import * as SkillReviewScan from "./SkillReviewScan.js"
import type { Evals, ResourceGraph } from "./SkillReviewResources.js"
import { evalManifests, resourceGraph } from "./SkillReviewResources.js"

export const FACTS_SCHEMA_VERSION = "deerflow.skill-review.facts.v1"

// ---------------------------------------------------------------------------------------------------------
// SKILL.md

const splitSkillMarkdown = (
  content: string
): { metadata: Record<string, unknown>; body: string } | { error: string } => {
  const match = /^---\s*\n([\s\S]*?)\n---\s*\n?/.exec(content)
  if (match === null) return { error: "No YAML frontmatter found" }
  let data: unknown
  try {
    data = OnDemand.yaml().parse(match[1]!)
  } catch (error) {
    return { error: `Invalid YAML in frontmatter: ${((error as Error).message ?? String(error)).split("\n")[0]}` }
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return { error: "Frontmatter must be a YAML dictionary" }
  }
  return { metadata: data as Record<string, unknown>, body: content.slice(match[0].length) }
}

const VALID_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/

const allowedToolsProblem = (raw: unknown): string | undefined => {
  if (raw === undefined || raw === null) return undefined
  if (!Array.isArray(raw)) return "allowed-tools in SKILL.md must be a list of strings"
  if (!raw.every((item) => typeof item === "string")) return "allowed-tools in SKILL.md must contain only strings"
  if (raw.some((item: string) => item.trim() === "")) return "allowed-tools in SKILL.md cannot contain empty tool names"
  return undefined
}

const analyzeSkillMd = (content: string, profile: Profile, findings: Array<Finding>): string | null => {
  const parts = splitSkillMarkdown(content)
  if ("error" in parts) {
    findings.push(finding("structure.invalid-frontmatter", "blocker", parts.error,
      "Use YAML frontmatter bounded by --- fences with name and description fields.", { path: "SKILL.md" }))
    return null
  }
  const metadata = parts.metadata
  const unexpected = Object.keys(metadata).filter((key) => !FRONT_MATTER_KEYS.includes(key)).sort(compare)
  if (unexpected.length > 0) {
    findings.push(finding("structure.unknown-frontmatter-field", "warning",
      `Unknown frontmatter field(s): ${unexpected.join(", ")}`,
      "Remove unsupported fields or add them to the shared DeerFlow frontmatter schema.",
      { path: "SKILL.md", evidence: unexpected }))
  }
  const rawName = metadata["name"]
  const name = typeof rawName === "string" ? rawName.trim() : ""
  if (name === "") {
    findings.push(finding("structure.missing-name", "blocker", "Frontmatter is missing a non-empty name.",
      "Add a hyphen-case skill name.", { path: "SKILL.md" }))
  } else if (!VALID_NAME.test(name) || name.length > 64) {
    findings.push(finding("structure.invalid-name", "error",
      "Skill name must be hyphen-case using lowercase letters, digits, and hyphens.",
      "Rename the skill using lowercase hyphen-case.", { path: "SKILL.md", evidence: name }))
  }
  const description = metadata["description"]
  if (typeof description !== "string" || description.trim() === "") {
    findings.push(finding("structure.missing-description", "blocker",
      "Frontmatter is missing a non-empty description.",
      "Add a concise description that states what the skill does and when to invoke it.", { path: "SKILL.md" }))
  } else if (charLength(description.trim()) > 1024) {
    findings.push(finding("structure.description-too-long", "error",
      "Description exceeds DeerFlow's 1024 character limit.",
      "Shorten the description and move detailed guidance into the body.", { path: "SKILL.md" }))
  }
  if (parts.body.trim() === "") {
    findings.push(finding("structure.empty-body", "error", "SKILL.md has no instruction body after frontmatter.",
      "Add executable workflow instructions after the frontmatter.", { path: "SKILL.md" }))
  }
  const toolsProblem = allowedToolsProblem(metadata["allowed-tools"])
  if (toolsProblem !== undefined) {
    findings.push(finding("structure.invalid-allowed-tools", "error", toolsProblem,
      "Declare allowed-tools as a YAML list of non-empty strings.", { path: "SKILL.md" }))
  }
  const secrets = metadata["required-secrets"]
  if (secrets !== undefined && secrets !== null && !Array.isArray(secrets)) {
    findings.push(finding("structure.invalid-required-secrets", "error", "required-secrets in SKILL.md must be a list",
      "Declare required-secrets as a YAML list.", { path: "SKILL.md" }))
  }
  if ("secrets-autonomous" in metadata && typeof metadata["secrets-autonomous"] !== "boolean") {
    findings.push(finding("structure.invalid-secrets-autonomous", "error", "secrets-autonomous must be a boolean.",
      "Use true or false for secrets-autonomous.", { path: "SKILL.md" }))
  }
  if (profile === "agentskills") {
    if (typeof description === "string" && charLength(description.trim()) > 200) {
      findings.push(finding("agentskills.description-length", "warning",
        "Description is longer than the Agent Skills recommended display length.",
        "Keep the description concise and move detail into the body.", { path: "SKILL.md", profile }))
    }
    if (name !== "" && charLength(name) > 64) {
      findings.push(finding("agentskills.name-length", "warning",
        "Skill name is longer than the portability profile recommends.",
        "Use a shorter package name for cross-client portability.", { path: "SKILL.md", profile }))
    }
  }
  return name === "" ? null : name
}

// ---------------------------------------------------------------------------------------------------------
// Facts

export interface Summary {
  readonly blockers: number
  readonly errors: number
  readonly warnings: number
  readonly infos: number
}

/** `deerflow.skill-review.facts.v1`. */
export interface Facts {
  readonly schema_version: string
  readonly subject: {
    readonly display_ref: string
    readonly source: string
    readonly category: string | null
    readonly declared_name: string | null
    readonly package_digest: string
  }
  readonly profile: Profile
  readonly completeness: {
    readonly package_enumerated: boolean
    readonly text_content_complete: boolean
    readonly truncated: boolean
    readonly not_assessed: ReadonlyArray<string>
  }
  readonly summary: Summary
  readonly findings: ReadonlyArray<Finding>
  readonly resources: ResourceGraph
  readonly evals: Evals
  readonly reader_errors: ReadonlyArray<ReaderError>
  readonly analyzer_errors: ReadonlyArray<ReaderError>
}

const NESTED_ARCHIVE = /\.(?:zip|tar|tar\.gz|tgz|tar\.bz2|tbz2|tar\.xz|txz|7z|rar|whl)$/
const SENSITIVE: ReadonlySet<string> = new Set([".env", ".npmrc", ".pypirc", ".netrc"])

const summarize = (findings: ReadonlyArray<Finding>): Summary => ({
  blockers: findings.filter((f) => f.severity === "blocker").length,
  errors: findings.filter((f) => f.severity === "error").length,
  warnings: findings.filter((f) => f.severity === "warning").length,
  infos: findings.filter((f) => f.severity === "info").length
})

/** The review facts of a snapshot (see the module header). */
export const analyze = (snapshot: Snapshot, profile: Profile = "deerflow"): Facts => {
  const findings: Array<Finding> = []
  const files = new Map(snapshot.files.map((file) => [file.path, file]))
  const root = files.get("SKILL.md")
  let declaredName: string | null = null
  if (root === undefined) {
    findings.push(finding("structure.missing-skill-md", "blocker", "Package root does not contain SKILL.md.",
      "Add exactly one SKILL.md at the package root."))
  } else if (root.kind !== "text") {
    findings.push(finding("structure.skill-md-not-text", "blocker", "Root SKILL.md is not readable UTF-8 text.",
      "Store SKILL.md as UTF-8 Markdown with YAML frontmatter.", { path: "SKILL.md" }))
  } else {
    declaredName = analyzeSkillMd(root.content ?? "", profile, findings)
  }
  const nested = [...files.keys()]
    .filter((path) => path !== "SKILL.md" && baseName(path) === "SKILL.md" && !isEvalFixtureSkillMd(path))
  for (const path of nested.sort(compare)) {
    findings.push(finding("structure.nested-skill-md", "blocker",
      "Nested SKILL.md files are not allowed in a single skill package.",
      "Keep exactly one SKILL.md at the package root.", { path }))
  }
  for (const [path, file] of files) {
    if (file.kind === "symlink") {
      findings.push(finding("package.symlink", "warning", "Package contains a symlink entry.",
        "Replace symlinks with ordinary files inside the skill package.", { path, evidence: file.target ?? null }))
    }
    if (NESTED_ARCHIVE.test(path.toLowerCase())) {
      findings.push(finding("package.nested-archive", "warning", "Package contains a nested archive.",
        "Unpack and review nested archives before packaging the skill.", { path }))
    }
    if (partsOf(path).some((part) => SENSITIVE.has(part))) {
      findings.push(finding("package.hidden-sensitive-file", "warning", "Package contains a hidden sensitive file.",
        "Remove hidden credential or package-manager config files.", { path }))
    }
  }
  const resources = resourceGraph(snapshot)
  findings.push(...resources.findings)
  const evals = evalManifests(snapshot)
  findings.push(...evals.findings)
  findings.push(...SkillReviewScan.scan(snapshot))
  const notAssessed = snapshot.truncated ? ["full_package"] : []
  const sorted = sortFindings(findings)
  return {
    schema_version: FACTS_SCHEMA_VERSION,
    subject: {
      display_ref: snapshot.subject.display_ref,
      source: snapshot.subject.source,
      category: snapshot.subject.category,
      declared_name: declaredName,
      package_digest: packageDigest(snapshot)
    },
    profile,
    completeness: {
      package_enumerated: !snapshot.reader_errors.some((e) => e.code === "root_not_found"),
      text_content_complete: !snapshot.truncated,
      truncated: snapshot.truncated,
      not_assessed: [...new Set(notAssessed)].sort(compare)
    },
    summary: summarize(sorted),
    findings: sorted,
    resources: resources.graph,
    evals: evals.evals,
    reader_errors: snapshot.reader_errors,
    analyzer_errors: []
  }
}
