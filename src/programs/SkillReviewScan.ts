/**
 * SkillScan's findings in a skill package review (SPEC §7.18): the package's text files (eval fixtures left out,
 * as DeerFlow's review does) scanned as an install would scan them, each finding with the review's severity
 * (`CRITICAL` a blocker, `HIGH` an error, `MEDIUM` a warning, `LOW` info) and SkillScan's own kept beside it.
 */
import type { Finding, Severity, Snapshot } from "./SkillPackage.js"
import { isEvalFixturePath } from "./SkillPackage.js"
import * as SkillScan from "./SkillScan.js"

const SEVERITY: Readonly<Record<string, Severity>> = {
  CRITICAL: "blocker",
  HIGH: "error",
  MEDIUM: "warning",
  LOW: "info"
}

/** SkillScan's findings on the package's text files, as review findings. */
export const scan = (snapshot: Snapshot): Array<Finding> => {
  const files = snapshot.files
    .filter((file) => file.kind === "text" && !isEvalFixturePath(file.path))
    .map((file) => ({ path: file.path, text: file.content ?? "" }))
  if (files.length === 0) return []
  const result = SkillScan.scanTexts(files)
  const findings: Array<Finding> = result.findings.map((f) => ({
    rule_id: f.rule_id,
    source: "skillscan",
    profile: "deerflow",
    severity: SEVERITY[f.severity] ?? "warning",
    path: f.file,
    line: f.line,
    message: f.message,
    remediation: f.remediation,
    evidence: f.evidence,
    skillscan_severity: f.severity
  }))
  for (const error of result.scanner_errors) {
    findings.push({
      rule_id: "skillscan.scanner-error",
      source: "skillscan",
      profile: "deerflow",
      severity: "warning",
      path: null,
      line: null,
      message: "SkillScan reported an analyzer error.",
      remediation: "Inspect the referenced file and rerun the review.",
      evidence: error
    })
  }
  return findings
}
