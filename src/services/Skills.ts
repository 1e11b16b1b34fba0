/**
 * Skills (SPEC §9): written procedures in `SKILL.md` files that the agent loads on demand. This module holds
 * what the prompt, the CLI and the skill middlewares share: a skill as discovered, the catalog of a skills
 * directory (with the skills it rejected and why), the registry port that reads them, and the pure rules of
 * slash activation (`/deep-research ...`) and of the `allowed-tools` policy. Discovery on disk lives in
 * `layers/SkillsDirectory.ts`.
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** Where a skill comes from: `public` (built in, read-only) or `custom` (the user's own, editable). */
export type Category = "public" | "custom"

/** The longest skill name accepted (SPEC §9: DeerFlow's install check); a longer one rejects its SKILL.md. */
export const MAX_NAME_CHARS = 64

/** The longest description the prompt shows (SPEC §9); a longer one is cut to it, with a warning. */
export const MAX_DESCRIPTION_CHARS = 1024

/** A SKILL.md's YAML front matter: a `---` block at the very start (after a BOM); group 1 is the YAML. */
export const FRONT_MATTER = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/

/** A description cut to `MAX_DESCRIPTION_CHARS` (the last character an ellipsis when cut). */
export const clipDescription = (text: string): string => {
  if (text.length <= MAX_DESCRIPTION_CHARS) return text
  // (never half of a surrogate pair)
  const head = text.slice(0, MAX_DESCRIPTION_CHARS - 1).replace(/[\uD800-\uDBFF]$/, "")
  return `${head}…`
}

/**
 * A request-scoped secret a skill declares (`required-secrets`, see `SkillSecrets`): its name (also the environment
 * variable's) and whether the skill works without it.
 */
export interface SecretRequirement {
  readonly name: string
  readonly optional: boolean
}

/** A skill as discovered. */
export interface Skill {
  /** Its `name` (front matter). */
  readonly name: string
  /** Its `description` (front matter), whitespace-collapsed, at most `MAX_DESCRIPTION_CHARS`. */
  readonly description: string
  readonly category: Category
  /** The package's folder under its category (`deep-research`, or `team/review` when nested). */
  readonly relativePath: string
  /** Where the model reads its SKILL.md: `{container}/{category}/{relativePath}/SKILL.md`. */
  readonly location: string
  /** The SKILL.md on the host. */
  readonly file: string
  /** Enabled in `extensions_config.json` (absent there: enabled). */
  readonly enabled: boolean
  /** Its `allowed-tools`: the only tools it may use while active; undefined when it declares none. */
  readonly allowedTools: ReadonlyArray<string> | undefined
  /** Its `license` (front matter), when it gives one. */
  readonly license?: string | undefined
  /** Its `required-secrets`: the request-scoped secrets its `bash` commands get while it is in use (none: absent). */
  readonly requiredSecrets?: ReadonlyArray<SecretRequirement> | undefined
  /** Its `secrets-autonomous`: whether they bind when the model loaded it by itself (absent: true). */
  readonly secretsAutonomous?: boolean | undefined
}

/** A SKILL.md that was not accepted, and why. */
export interface Rejected {
  readonly file: string
  readonly problem: string
}

/** What a skills directory holds. */
export interface Catalog {
  /** The host directory searched (undefined when there is none). */
  readonly root: string | undefined
  /** Where skills are mounted for the model (`/mnt/skills`). */
  readonly container: string
  /** Accepted skills, by name (a custom skill replaced a public one of the same name). */
  readonly skills: ReadonlyArray<Skill>
  readonly rejected: ReadonlyArray<Rejected>
  /** Skills replaced by a later one of the same name (a custom skill shadowing a public one). */
  readonly shadowed: ReadonlyArray<Skill>
  /** Problems reading the skill states (`extensions_config.json`) and skills loaded with a cut description. */
  readonly warnings: ReadonlyArray<string>
}

/** A catalog with no skills. */
export const emptyCatalog = (container = "/mnt/skills"): Catalog => ({
  root: undefined,
  container,
  skills: [],
  rejected: [],
  shadowed: [],
  warnings: []
})

/** A skill's SKILL.md could not be read. */
export class SkillReadError extends Schema.TaggedError<SkillReadError>()("SkillReadError", {
  name: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** The skills of an app: the catalog (read again on each call) and the text of a skill. */
export interface Registry {
  readonly catalog: Effect.Effect<Catalog>
  /** The whole SKILL.md of a skill of the catalog (checked to lie inside the skills directory). */
  readonly read: (skill: Skill) => Effect.Effect<string, SkillReadError>
}

// ---------------------------------------------------------------------------------------------------------
// Slash activation

/** Words that start a message with `/` but are commands, never skills. */
export const RESERVED: ReadonlySet<string> = new Set(["bootstrap", "goal", "help", "memory", "models", "new", "status"])

const SLASH = /^\/([a-z0-9]+(?:-[a-z0-9]+)*)(?:\s+|$)/

/** A leading `/<skill-name>` and the rest of the message; undefined when the message does not start with one. */
export const parseSlash = (text: string): { readonly name: string; readonly rest: string } | undefined => {
  const match = SLASH.exec(text)
  if (match === null || RESERVED.has(match[1]!)) return undefined
  return { name: match[1]!, rest: text.slice(match[0].length).trimStart() }
}

const distance = (a: string, b: string): number => {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const saved = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1))
      previous = saved
    }
  }
  return row[b.length]!
}

/** Names close to a mistyped one (sharing a word, containing it, or a few edits away), closest first, at most 5. */
export const closeMatches = (name: string, names: ReadonlyArray<string>): ReadonlyArray<string> => {
  const words = new Set(name.split("-"))
  return names
    .map((candidate) => {
      const shared = candidate.split("-").some((w) => w.length > 2 && words.has(w))
      const contains = candidate.includes(name) || name.includes(candidate)
      const d = distance(name, candidate)
      const close = d <= Math.max(2, Math.floor(name.length / 3))
      return { candidate, score: close || contains || shared ? d - (contains ? 10 : 0) - (shared ? 5 : 0) : undefined }
    })
    .filter((r): r is { candidate: string; score: number } => r.score !== undefined)
    .sort((a, b) => a.score - b.score || a.candidate.localeCompare(b.candidate))
    .slice(0, 5)
    .map((r) => r.candidate)
}

// ---------------------------------------------------------------------------------------------------------
// The allowed-tools policy

/** Tools an active skill's `allowed-tools` never takes away (reading the skill itself, finding tools). */
export const FRAMEWORK_TOOLS: ReadonlyArray<string> = [
  "describe_skill",
  "read_file",
  "review_skill_package",
  "tool_search"
]

/** What the active skills allow: every tool (no active skill declares `allowed-tools`), or only these. */
export type Policy =
  | { readonly _tag: "Unrestricted" }
  | { readonly _tag: "Restricted"; readonly allowed: ReadonlySet<string>; readonly skills: ReadonlyArray<string> }

/**
 * The policy of the skills whose SKILL.md paths are active: the union of the `allowed-tools` of those that
 * declare it, plus the framework tools; unrestricted when none declares it. Active paths that match no usable
 * skill (unknown, disabled, or not available to this agent) fail closed to the framework tools only.
 */
export const policyOf = (
  activePaths: ReadonlyArray<string>,
  catalog: Catalog,
  allowlist: ReadonlyArray<string> | undefined
): Policy => {
  if (activePaths.length === 0) return { _tag: "Unrestricted" }
  const paths = new Set(activePaths.map(normalisePath))
  const active = catalog.skills.filter((s) =>
    paths.has(normalisePath(s.location)) && s.enabled && (allowlist === undefined || allowlist.includes(s.name))
  )
  if (active.length === 0) {
    return { _tag: "Restricted", allowed: new Set(FRAMEWORK_TOOLS), skills: [...paths] }
  }
  const declaring = active.filter((s) => s.allowedTools !== undefined)
  if (declaring.length === 0) return { _tag: "Unrestricted" }
  const allowed = new Set<string>(FRAMEWORK_TOOLS)
  for (const skill of declaring) for (const tool of skill.allowedTools!) allowed.add(tool)
  return { _tag: "Restricted", allowed, skills: declaring.map((s) => s.name) }
}

/** A container path with `.` and `..` segments and repeated slashes resolved. */
export const normalisePath = (path: string): string => {
  const out: Array<string> = []
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") out.pop()
    else out.push(part)
  }
  return `/${out.join("/")}`
}

/**
 * `additional_kwargs` key of the first answer of a run in which a `/skill` was activated: the skill's name. The
 * thread keeps what the user typed, so this mark is what says afterwards that the skill was active
 * (`antler threads show` lists it).
 */
export const ACTIVATED_KEY = "slash_skill_activated"

/** The skills `/skill` activations made in these messages, in order (a name once per activation). */
export const activatedSkills = (
  messages: ReadonlyArray<{ readonly additional_kwargs?: { readonly [key: string]: unknown } | undefined }>
): ReadonlyArray<string> =>
  messages.flatMap((message) => {
    const name = message.additional_kwargs?.[ACTIVATED_KEY]
    return typeof name === "string" ? [name] : []
  })
