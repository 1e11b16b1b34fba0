/**
 * The resource graph and eval manifests of a skill package (SPEC §7.18), as DeerFlow's review core computes them:
 * which files reference which (Markdown links, code spans holding a path, `references/...`-style tokens), the
 * references that are missing or leave the package, the resources nothing references, and the eval manifests
 * (`evals/*.json`) with their case counts. Eval fixtures (`evals/fixtures/...`) are data, not references.
 */
import type { Finding, Snapshot } from "./SkillPackage.js"
import { compare, finding, isEvalFixturePath, normalizeRelativePath, partsOf } from "./SkillPackage.js"

const MARKDOWN_LINK = /!?\[[^\]]*]\(([^)\s]+)(?:\s+"[^"]*")?\)/
const CODE_SPAN = /`([^`]+)`/
const PATH_TOKEN = /(?<![\p{L}\p{N}_./-])(?:references|scripts|templates|assets|evals)\/[A-Za-z0-9._~/%+-]+/u
const RESOURCE_DIRS: ReadonlySet<string> = new Set(["references", "scripts", "templates", "assets", "evals"])
const ESCAPES = Symbol("escapes")

const extractReferences = (content: string): Set<string> => {
  const refs = new Set<string>()
  // (global copies made here: a module-level /g expression's lastIndex would be shared state)
  const all = (re: RegExp) => content.matchAll(new RegExp(re.source, `${re.flags}g`))
  for (const match of all(MARKDOWN_LINK)) refs.add(match[1]!.split("#")[0]!)
  for (const match of all(CODE_SPAN)) {
    const token = match[1]!.trim()
    if (token.includes("/")) refs.add(token)
  }
  for (const match of all(PATH_TOKEN)) refs.add(match[0])
  return refs
}

const resolveReference = (source: string, raw: string): string | typeof ESCAPES | undefined => {
  const ref = raw.trim().replace(/^["']+|["']+$/g, "")
  if (ref === "" || ref.startsWith("#") || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(ref)) return undefined
  if (ref.startsWith("/")) return ESCAPES
  if (ref.includes("://")) return undefined
  const base = partsOf(source).slice(0, -1)
  try {
    return normalizeRelativePath([...base, ref].join("/"))
  } catch {
    return ESCAPES
  }
}

export interface ResourceGraph {
  readonly nodes: ReadonlyArray<{ readonly path: string; readonly kind: string }>
  readonly edges: ReadonlyArray<{ readonly source: string; readonly target: string }>
  readonly orphans: ReadonlyArray<string>
}

const pairKey = (a: string, b: string) => `${a}\u0000${b}`
const sortedPairs = (set: Set<string>) => [...set].sort(compare).map((key) => key.split("\u0000") as [string, string])

/** Which files reference which, and the findings on missing, escaping and unreferenced resources. */
export const resourceGraph = (snapshot: Snapshot): { graph: ResourceGraph; findings: Array<Finding> } => {
  const files = new Map(snapshot.files.map((file) => [file.path, file]))
  const edges = new Set<string>()
  const missing = new Set<string>()
  const escaping = new Set<string>()
  for (const [path, file] of files) {
    if (isEvalFixturePath(path) || file.kind !== "text") continue
    for (const raw of extractReferences(file.content ?? "")) {
      const resolved = resolveReference(path, raw)
      if (resolved === undefined) continue
      if (resolved === ESCAPES) escaping.add(pairKey(path, raw))
      else if (files.has(resolved)) edges.add(pairKey(path, resolved))
      else missing.add(pairKey(path, resolved))
    }
  }
  const referenced = new Set(sortedPairs(edges).map(([, target]) => target))
  const orphans = [...files.keys()]
    .filter((path) => RESOURCE_DIRS.has(partsOf(path)[0] ?? ""))
    .filter((path) => !referenced.has(path) && path !== "evals/evals.json" && path !== "evals/trigger_eval_set.json")
    .filter((path) => !isEvalFixturePath(path))
    .sort(compare)
  const findings: Array<Finding> = [
    ...sortedPairs(missing).map(([source, target]) =>
      finding("resource.missing", "warning", `Referenced resource does not exist: ${target}`,
        "Add the referenced file, correct the path, or remove the stale reference.", { path: source, evidence: target })
    ),
    ...sortedPairs(escaping).map(([source, raw]) =>
      finding("resource.escaping-link", "warning", `Reference escapes the package boundary: ${raw}`,
        "Keep skill references package-relative and inside the skill directory.", { path: source, evidence: raw })
    ),
    ...orphans.map((orphan) =>
      finding("resource.unreferenced", "warning",
        "Resource is not reachable from SKILL.md or another referenced resource.",
        "Reference the file with read-when guidance or remove it from the package.", { path: orphan })
    )
  ]
  const graph: ResourceGraph = {
    nodes: [...files.keys()].sort(compare).map((path) => ({ path, kind: files.get(path)!.kind })),
    edges: sortedPairs(edges).map(([source, target]) => ({ source, target })),
    orphans
  }
  return { graph, findings }
}

// ---------------------------------------------------------------------------------------------------------
// Eval manifests

export interface EvalManifest {
  readonly schema: string
  readonly valid: boolean
  readonly case_count: number
  readonly positive_trigger_cases: number
  readonly negative_trigger_cases: number
  readonly path?: string
}

export interface Evals {
  readonly schema: string | null
  readonly valid: boolean | null
  readonly case_count: number
  readonly positive_trigger_cases: number
  readonly negative_trigger_cases: number
  readonly manifests: ReadonlyArray<EvalManifest>
}

const caseStats = (schema: string, cases: ReadonlyArray<unknown>): EvalManifest => {
  const flags = cases.map((c) =>
    typeof c === "object" && c !== null ? (c as Record<string, unknown>)["should_trigger"] : undefined
  )
  return {
    schema,
    valid: true,
    case_count: cases.length,
    positive_trigger_cases: flags.filter((f) => f === true).length,
    negative_trigger_cases: flags.filter((f) => f === false).length
  }
}

const classifyManifest = (payload: unknown): EvalManifest => {
  const record = typeof payload === "object" && payload !== null && !Array.isArray(payload)
    ? payload as Record<string, unknown>
    : undefined
  if (record !== undefined && typeof record["schema_version"] === "string") {
    return Array.isArray(record["cases"]) ? caseStats("versioned", record["cases"]) : caseStats("versioned", [])
  }
  if (record !== undefined && Array.isArray(record["evals"])) return caseStats("skill-creator-evals", record["evals"])
  if (Array.isArray(payload)) return caseStats("trigger-eval-list", payload)
  return caseStats("unknown", [])
}

/** The line of a JSON syntax error, from the position V8 reports. */
const jsonErrorLine = (text: string, message: string): number | null => {
  const line = /line (\d+)/.exec(message)
  if (line !== null) return Number(line[1])
  const position = /position (\d+)/.exec(message)
  return position === null ? null : text.slice(0, Number(position[1])).split("\n").length
}

/** The eval manifests (`evals/*.json`): their schema and case counts, and findings on broken ones. */
export const evalManifests = (snapshot: Snapshot): { evals: Evals; findings: Array<Finding> } => {
  const manifests: Array<EvalManifest> = []
  const findings: Array<Finding> = []
  const files = snapshot.files.filter((f) => f.path.startsWith("evals/") && f.path.endsWith(".json"))
    .sort((a, b) => compare(a.path, b.path))
  if (files.length === 0) {
    const none = { case_count: 0, positive_trigger_cases: 0, negative_trigger_cases: 0 }
    return { evals: { schema: null, valid: null, ...none, manifests }, findings }
  }
  let valid = true
  for (const file of files) {
    if (file.kind !== "text") {
      findings.push(finding("eval.binary-manifest", "warning", "Eval manifest is not UTF-8 JSON text.",
        "Store eval manifests as UTF-8 JSON.", { path: file.path }))
      valid = false
      continue
    }
    const text = file.content ?? ""
    let payload: unknown
    try {
      payload = JSON.parse(text)
    } catch (error) {
      const message = (error as Error).message
      const line = jsonErrorLine(text, message)
      findings.push(finding("eval.invalid-json", "warning", "Eval manifest is not valid JSON.",
        "Fix the JSON syntax or remove the manifest.",
        { path: file.path, evidence: message, ...(line === null ? {} : { line }) }))
      valid = false
      continue
    }
    manifests.push({ ...classifyManifest(payload), path: file.path })
  }
  const schemas = new Set(manifests.map((m) => m.schema))
  const sum = (key: "case_count" | "positive_trigger_cases" | "negative_trigger_cases") =>
    manifests.reduce((total, m) => total + m[key], 0)
  return {
    evals: {
      schema: schemas.size === 0 ? null : schemas.size === 1 ? [...schemas][0]! : "mixed",
      valid,
      case_count: sum("case_count"),
      positive_trigger_cases: sum("positive_trigger_cases"),
      negative_trigger_cases: sum("negative_trigger_cases"),
      manifests
    },
    findings
  }
}
