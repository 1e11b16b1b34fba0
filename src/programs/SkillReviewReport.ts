/**
 * The static review report of a skill package (`deerflow.skill-review.report.v1`), from its review facts alone,
 * as DeerFlow's renderer builds it: readiness (`blocked` with a blocker, `revise` with an error or with something
 * not assessed in a full review, else `publish_candidate`), assurance `static_only`, the issues (blockers, errors
 * and warnings), two dimensions, the limitations, and up to five recommended actions; and its Markdown, in
 * English or Chinese.
 */
import type { Facts } from "./SkillReview.js"

export const REPORT_SCHEMA_VERSION = "deerflow.skill-review.report.v1"

export type Readiness = "blocked" | "revise" | "publish_candidate"
export type Locale = "en" | "zh"

export interface Issue {
  readonly id: string
  readonly severity: "blocker" | "major" | "minor"
  readonly confidence: "high"
  readonly path: string | null
  readonly line: number | null
  readonly problem: string
  readonly impact: string
  readonly remediation: string
  readonly suggested_replacement: null
}

export interface Dimension {
  readonly id: string
  readonly status: "blocker" | "concern" | "pass"
  readonly summary: string
}

export interface StaticReport {
  readonly schema_version: string
  readonly subject: { readonly display_ref: string; readonly package_digest: string }
  readonly review: {
    readonly scope: ReadonlyArray<string>
    readonly profile: string
    readonly facts_schema_version: string
    readonly reviewer_model: string
    readonly completed_at: string
  }
  readonly readiness: Readiness
  readonly assurance: "static_only"
  readonly dimensions: ReadonlyArray<Dimension>
  readonly issues: ReadonlyArray<Issue>
  readonly evidence: {
    readonly facts_complete: boolean
    readonly runtime_runs: ReadonlyArray<never>
    readonly baseline: null
    readonly retained_artifacts: ReadonlyArray<never>
    readonly limitations: ReadonlyArray<string>
  }
  readonly recommended_actions: ReadonlyArray<string>
}

/** The readiness the facts allow for this scope. */
export const readiness = (facts: Facts, scope: ReadonlyArray<string>): Readiness =>
  facts.summary.blockers > 0
    ? "blocked"
    : facts.summary.errors > 0
    ? "revise"
    : scope.includes("all") && facts.completeness.not_assessed.length > 0
    ? "revise"
    : "publish_candidate"

/** `2026-07-10T00:00:00Z`: an instant to the second, as DeerFlow writes `completed_at`. */
export const isoSeconds = (millis: number): string => new Date(millis).toISOString().replace(/\.\d{3}Z$/, "Z")

/** The report of the facts (see the module header); `completedAt` as `isoSeconds` writes it. */
export const staticReport = (facts: Facts, scope: ReadonlyArray<string>, completedAt: string): StaticReport => {
  const ready = readiness(facts, scope)
  const issues: Array<Issue> = []
  facts.findings.forEach((finding, index) => {
    if (finding.severity === "info") return
    issues.push({
      id: `deterministic.${index + 1}.${finding.rule_id}`,
      severity: finding.severity === "blocker" ? "blocker" : finding.severity === "error" ? "major" : "minor",
      confidence: "high",
      path: finding.path,
      line: finding.line,
      problem: finding.message,
      impact: "Deterministic review finding affects package readiness or maintainability.",
      remediation: finding.remediation,
      suggested_replacement: null
    })
  })
  const { blockers, errors, warnings } = facts.summary
  const cases = facts.evals.case_count
  const limitations = [
    ...(facts.completeness.truncated ? ["Package content was truncated; omitted content was not assessed."] : []),
    ...facts.reader_errors.map((e) => `Reader error ${e.code}: ${e.message}`),
    ...facts.analyzer_errors.map((e) => `Analyzer error ${e.code}: ${e.message}`)
  ]
  return {
    schema_version: REPORT_SCHEMA_VERSION,
    subject: { display_ref: facts.subject.display_ref, package_digest: facts.subject.package_digest },
    review: {
      scope,
      profile: facts.profile,
      facts_schema_version: facts.schema_version,
      reviewer_model: "deterministic-review-core",
      completed_at: completedAt
    },
    readiness: ready,
    assurance: "static_only",
    dimensions: [
      {
        id: "structure",
        status: blockers > 0 ? "blocker" : errors > 0 || warnings > 0 ? "concern" : "pass",
        summary: `${blockers} blocker(s), ${errors} error(s), ${warnings} warning(s)`
      },
      { id: "evidence_quality", status: cases === 0 ? "concern" : "pass", summary: `${cases} eval case(s) detected` }
    ],
    issues,
    evidence: {
      facts_complete: !facts.completeness.truncated,
      runtime_runs: [],
      baseline: null,
      retained_artifacts: [],
      limitations
    },
    recommended_actions: ready === "publish_candidate"
      ? []
      : facts.findings.slice(0, 5).map((f) => `${f.rule_id}: ${f.remediation}`)
  }
}

const READINESS: Readonly<Record<Locale, Readonly<Record<Readiness, string>>>> = {
  en: { blocked: "Not ready", revise: "Needs revision", publish_candidate: "Publish candidate" },
  zh: { blocked: "不可发布", revise: "需修订", publish_candidate: "可作为发布候选" }
}
const ASSURANCE: Readonly<Record<Locale, string>> = { en: "Static review only", zh: "仅静态审查" }
const HEADINGS: Readonly<Record<Locale, ReadonlyArray<string>>> = {
  en: [
    "# Skill Review Report", "## Executive Summary", "## Scope and Completeness", "## Findings", "## Dimension Review",
    "## Evidence", "## Recommended Actions"
  ],
  zh: ["# 技能审查报告", "## 摘要", "## 范围与完整性", "## 问题", "## 维度审查", "## 证据", "## 建议动作"]
}

/** The report as Markdown (labels in `locale`; the values themselves are the report's). */
export const renderMarkdown = (report: StaticReport, facts: Facts, locale: Locale): string => {
  const [title, summary, scope, findings, dimensions, evidence, actions] = HEADINGS[locale] as Array<string>
  const lines = [
    title!, "", summary!,
    `- Subject: ${report.subject.display_ref}`,
    `- Digest: ${report.subject.package_digest}`,
    `- Readiness: ${report.readiness} (${READINESS[locale][report.readiness]})`,
    `- Assurance: ${report.assurance} (${ASSURANCE[locale]})`,
    "", scope!,
    `- Scope: ${report.review.scope.join(", ")}`,
    `- Profile: ${report.review.profile}`,
    `- Truncated: ${facts.completeness.truncated ? "True" : "False"}`,
    `- Not assessed: ${facts.completeness.not_assessed.join(", ") || "(none)"}`,
    "", findings!
  ]
  if (report.issues.length === 0) lines.push("- No deterministic or semantic issues were reported.")
  for (const issue of report.issues) {
    const location = `${issue.path ?? "<package>"}${issue.line === null ? "" : `:${issue.line}`}`
    lines.push(`- ${issue.severity} ${issue.id} at ${location}: ${issue.problem}`)
  }
  lines.push("", dimensions!, ...report.dimensions.map((d) => `- ${d.id}: ${d.status} - ${d.summary}`))
  lines.push("", evidence!, `- Facts complete: ${report.evidence.facts_complete ? "True" : "False"}`)
  lines.push(...report.evidence.limitations.map((l) => `- Limitation: ${l}`))
  lines.push("", actions!)
  if (report.recommended_actions.length === 0) lines.push("- No required action within the assessed scope.")
  lines.push(...report.recommended_actions.map((a) => `- ${a}`))
  return `${lines.join("\n").trimEnd()}\n`
}
