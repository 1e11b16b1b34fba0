/**
 * Request-scoped secrets for skills (DeerFlow's `secret_context.py`, issue #3861): a caller gives a run short-lived
 * credentials (`context.secrets`, name to value) out of band, never in a message; a skill declares the ones it needs
 * in its SKILL.md (`required-secrets`), and while it is in use the run's `bash` commands get them as environment
 * variables, their values masked in what the commands print. This module holds the rules: the front matter keys,
 * the request's carrier (decoded, bounded, held `Redacted` so no log or JSON of the run shows it), which skills bind
 * which names, the per-command service the `bash` tool reads, and the mask.
 */
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Json from "../state/Json.js"
import type { Redactor } from "../state/Redact.js"
import { also, echoForms, encodedForms, MARKER, MIN_SECRET_LENGTH } from "../state/Redact.js"
import { UNSAFE_ENV_NAME } from "./Sandbox.js"
import type { Catalog, SecretRequirement, Skill } from "./Skills.js"
import { normalisePath } from "./Skills.js"

/** A secret a skill declares: its name (also the environment variable's) and whether the skill works without it. */
export type Requirement = SecretRequirement

/** A valid environment variable name (DeerFlow's `_ENV_VAR_NAME_RE`). */
export const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Names a skill may not declare: the sandbox's `UNSAFE_ENV_NAME`. */
export const UNSAFE_NAME = UNSAFE_ENV_NAME

/** Most secrets one request may give. */
export const MAX_SECRETS = 64

/** The longest secret name. */
export const MAX_NAME_CHARS = 128

/** The longest secret value, in characters. */
export const MAX_VALUE_CHARS = 16 * 1024

/** The most characters of all of a request's names and values together. */
export const MAX_TOTAL_CHARS = 64 * 1024

/**
 * The most lines of `MIN_SECRET_LENGTH` characters or more a request's values may hold in all (a value of one line is
 * one): each is masked alone, in each of its forms, in every text of the run (a private key's 50 lines, a few
 * certificates'), and thousands of them made every text's mask search tens of thousands of texts.
 */
export const MAX_MASKED_LINES = 256

// ---------------------------------------------------------------------------------------------------------
// Front matter

/**
 * A SKILL.md's `required-secrets`: a list of names, or of `{ name, optional }` mappings. Absent (or null): none. Not
 * a list: `problem` (the skill is rejected, as DeerFlow rejects it). An entry without a valid environment variable
 * name, or with an `UNSAFE_NAME`, is dropped and named in `dropped` (one bad entry does not lose the skill); a
 * repeated name counts once.
 */
export const parseRequired = (raw: unknown): {
  readonly requirements: ReadonlyArray<Requirement>
  readonly dropped: ReadonlyArray<string>
  readonly problem?: string | undefined
} => {
  if (raw === undefined || raw === null) return { requirements: [], dropped: [] }
  if (!Array.isArray(raw)) return { requirements: [], dropped: [], problem: "`required-secrets` must be a list" }
  const requirements: Array<Requirement> = []
  const dropped: Array<string> = []
  const seen = new Set<string>()
  for (const item of raw as ReadonlyArray<unknown>) {
    let name: string
    let optional = false
    if (typeof item === "string") name = item.trim()
    else if (typeof item === "object" && item !== null && !Array.isArray(item)) {
      const fields = item as { readonly name?: unknown; readonly optional?: unknown }
      name = typeof fields.name === "string" ? fields.name.trim() : ""
      optional = fields.optional === true
    } else {
      dropped.push(JSON.stringify(item) ?? String(item))
      continue
    }
    if (!NAME.test(name) || name.length > MAX_NAME_CHARS || UNSAFE_NAME.test(name)) {
      dropped.push(JSON.stringify(name))
      continue
    }
    if (seen.has(name)) continue
    seen.add(name)
    requirements.push({ name, optional })
  }
  return { requirements, dropped }
}

/**
 * A SKILL.md's `secrets-autonomous`: whether its secrets bind while the model loaded it by itself (`true`, the
 * default) or only when the user activated it with `/name`. Anything but `true` or `false` fails closed to `false`.
 */
export const parseAutonomous = (raw: unknown): boolean =>
  raw === undefined || raw === null ? true : raw === true

// ---------------------------------------------------------------------------------------------------------
// The request's carrier

/** A request's secrets, name to value; `Redacted`, so printing or serialising the run's options shows none. */
export type RequestSecrets = Redacted.Redacted<ReadonlyMap<string, string>>

/** The values of a request's secrets (none: empty). */
export const entries = (secrets: RequestSecrets | undefined): ReadonlyMap<string, string> =>
  secrets === undefined ? new Map() : Redacted.value(secrets)

/**
 * A request's `secrets` (found at `where`, e.g. `context.secrets`) decoded: a mapping of environment variable names
 * to text values, at most `MAX_SECRETS` of them, each value at most `MAX_VALUE_CHARS` and without NUL (an
 * environment cannot hold one), all of them at most `MAX_TOTAL_CHARS`. Absent or null: none. The refusal names the
 * field and what is wrong with it, never a value.
 */
export const decodeRequest = (raw: unknown, where: string): Either.Either<RequestSecrets | undefined, string> => {
  if (raw === undefined || raw === null) return Either.right(undefined)
  if (typeof raw !== "object" || Array.isArray(raw)) {
    return Either.left(`${where} must be a mapping of secret names to text values`)
  }
  const fields = Object.entries(raw as Record<string, unknown>)
  if (fields.length > MAX_SECRETS) {
    return Either.left(`${where} holds ${fields.length} secrets; at most ${MAX_SECRETS} are accepted`)
  }
  const out = new Map<string, string>()
  let total = 0
  for (const [name, value] of fields) {
    const shown = name.length > 64 ? `${JSON.stringify(name.slice(0, 64))}...` : JSON.stringify(name)
    if (!NAME.test(name) || name.length > MAX_NAME_CHARS) {
      return Either.left(
        `${where}: ${shown} is not a valid secret name (an environment variable name: letters, digits and _, not ` +
          `starting with a digit, at most ${MAX_NAME_CHARS} characters)`
      )
    }
    if (typeof value !== "string") return Either.left(`${where}.${name} must be text`)
    if (value.length > MAX_VALUE_CHARS) {
      return Either.left(`${where}.${name} is longer than ${MAX_VALUE_CHARS} characters`)
    }
    if (value.includes("\0")) return Either.left(`${where}.${name} holds a NUL character`)
    total += name.length + value.length
    if (total > MAX_TOTAL_CHARS) {
      return Either.left(`${where} holds more than ${MAX_TOTAL_CHARS} characters of names and values`)
    }
    out.set(name, value)
  }
  const lines = [...out.values()].reduce((sum, value) => sum + linesOf(value).length, 0)
  if (lines > MAX_MASKED_LINES) {
    return Either.left(
      `${where} holds ${lines} lines of ${MIN_SECRET_LENGTH} characters or more; at most ${MAX_MASKED_LINES} are ` +
        "accepted (each is masked alone in everything the run says)"
    )
  }
  return Either.right(out.size === 0 ? undefined : Redacted.make(out))
}

// ---------------------------------------------------------------------------------------------------------
// Binding

/** A skill that may bind secrets: what it declares, and where it stands. */
export interface Source {
  readonly skill: string
  readonly requirements: ReadonlyArray<Requirement>
}

/** What the skills in use bind: the variables the `bash` commands get, and what each skill misses. */
export interface Binding {
  readonly env: Readonly<Record<string, string>>
  /** The skills that got at least one secret, sorted. */
  readonly skills: ReadonlyArray<string>
  /** A skill's required (not optional) secrets the request did not give. */
  readonly missing: Readonly<Record<string, ReadonlyArray<string>>>
}

/**
 * The skills whose secrets bind (DeerFlow's `_resolve_secret_bindings`): the skill slash-activated for the run (its
 * activation already checked it enabled and available to the agent; `secrets-autonomous` does not apply when the user
 * asked for it, and does in a subagent's run, whose task the parent's model wrote: `slash.byModel`), and each skill the
 * thread loaded (`skill_context` paths) that the catalog has now at exactly that path (never by name: a custom skill
 * shadowing a public one binds nothing for a read of the public one), enabled, available to this agent and not
 * `secrets-autonomous: false`. A subagent's run adds the skills its parent had bound for the `task` call (`delegated`,
 * see `DelegatedSkills`): by name (the parent resolved them in the same catalog), enabled and available to it.
 */
export const sourcesOf = (
  slash: Skill | undefined,
  loaded: ReadonlyArray<{ readonly path: string }>,
  catalog: Catalog | undefined,
  allowlist: ReadonlyArray<string> | undefined,
  more: { readonly delegated?: ReadonlyArray<string> | undefined; readonly slashByModel?: boolean | undefined } = {}
): ReadonlyArray<Source> => {
  const out: Array<Source> = []
  const seen = new Set<string>()
  const add = (skill: Skill) => {
    if (seen.has(skill.name) || (skill.requiredSecrets ?? []).length === 0) return
    seen.add(skill.name)
    out.push({ skill: skill.name, requirements: skill.requiredSecrets! })
  }
  if (slash !== undefined && !(more.slashByModel === true && slash.secretsAutonomous === false)) add(slash)
  if (catalog === undefined) return out
  for (const name of more.delegated ?? []) {
    const skill = catalog.skills.find((s) => s.name === name)
    if (skill === undefined || !skill.enabled) continue
    if (allowlist !== undefined && !allowlist.includes(skill.name)) continue
    add(skill)
  }
  if (loaded.length === 0) return out
  const byPath = new Map(catalog.skills.map((skill) => [normalisePath(skill.location), skill]))
  for (const entry of loaded) {
    const skill = byPath.get(normalisePath(entry.path))
    if (skill === undefined || !skill.enabled || skill.secretsAutonomous === false) continue
    if (allowlist !== undefined && !allowlist.includes(skill.name)) continue
    add(skill)
  }
  return out
}

/** No binding. */
export const unbound: Binding = { env: {}, skills: [], missing: {} }

/**
 * The union of what `sources` declare, with the values of the request: only declared names, only the request's
 * values (never the host's), never a name the request did not give.
 */
export const bind = (sources: ReadonlyArray<Source>, secrets: ReadonlyMap<string, string>): Binding => {
  const env: Record<string, string> = {}
  const skills = new Set<string>()
  const missing: Record<string, Array<string>> = {}
  for (const source of sources) {
    for (const requirement of source.requirements) {
      const value = secrets.get(requirement.name)
      if (value !== undefined) {
        env[requirement.name] = value
        skills.add(source.skill)
      } else if (!requirement.optional) {
        const names = missing[source.skill] ?? []
        names.push(requirement.name)
        missing[source.skill] = names
      }
    }
  }
  return { env, skills: [...skills].sort(), missing }
}

/** What a binding says in the run's audit (names only, never a value): DeerFlow's `bind_secrets` changes. */
export const audit = (binding: Binding) => ({
  skills: binding.skills,
  secrets: Object.keys(binding.env).sort(),
  missing: Object.fromEntries(
    Object.entries(binding.missing).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, [...v].sort()])
  )
})

/**
 * The secrets one `bash` command gets, provided around that call by the middleware that binds them (SkillActivation):
 * absent, the command gets none.
 */
export class ActiveSecrets extends Context.Tag("antler/SkillSecrets/ActiveSecrets")<
  ActiveSecrets,
  { readonly env: Readonly<Record<string, string>> }
>() {}

/**
 * The skills whose secrets the parent run had bound when its model called `task` (the names of `Binding.skills`),
 * provided by the parent's SkillActivation around that call: the subagent's run binds them too
 * (`RunOptions.delegatedSkills`). Absent: none.
 */
export class DelegatedSkills extends Context.Tag("antler/SkillSecrets/DelegatedSkills")<
  DelegatedSkills,
  { readonly skills: ReadonlyArray<string> }
>() {}

// ---------------------------------------------------------------------------------------------------------
// Masking

/**
 * The texts a mask hides for these values: each value of at least `MIN_SECRET_LENGTH` characters (a shorter one
 * would shred unrelated output, as DeerFlow's `_MIN_MASK_LENGTH`) and, for one of several lines, each such line of
 * it (output is masked a line at a time as it streams), each also in the forms a tool says it back in (`echoForms`:
 * URL-encoded, JSON-escaped; `encodedForms`: hex, base64 standard and URL-safe, also inside a longer base64 text);
 * longest first, so a value inside another is not half shown.
 */
export const maskedTexts = (values: Iterable<string>): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const text of withLines(values)) {
    out.add(text)
    for (const form of echoForms(text)) out.add(form)
    for (const form of encodedForms(text)) out.add(form)
  }
  return [...out].sort((a, b) => b.length - a.length)
}

/**
 * Each value of at least `MIN_SECRET_LENGTH` characters and, for one of several lines, each such line of it: what a
 * redactor given a run's request secrets searches for (`Redact.also` adds the forms of each), as `maskedTexts` does.
 */
export const withLines = (values: Iterable<string>): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const value of values) {
    for (const text of [value, ...linesOf(value)]) if (text.length >= MIN_SECRET_LENGTH) out.add(text)
  }
  return [...out]
}

/** The lines of `value` long enough to be masked alone (`MIN_SECRET_LENGTH`). */
const linesOf = (value: string): ReadonlyArray<string> =>
  value.split(/\r?\n/).filter((line) => line.length >= MIN_SECRET_LENGTH)

/**
 * A run's redactor: `base` hiding also the request's `secrets` (each line of one of several lines too, in every form
 * `Redact.also` adds); `base` itself when there are none. What the run emits, keeps, and its record keeps of what it
 * was asked with (`kwargs`, `metadata`: the user may have typed a value into the input) go through it.
 */
export const runRedactor = (base: Redactor, secrets: RequestSecrets | undefined): Redactor =>
  secrets === undefined ? base : also(base, withLines(entries(secrets).values()))

/** The text with each of `texts` (see `maskedTexts`) replaced by `[redacted]`. */
export const mask = (texts: ReadonlyArray<string>) => (text: string): string => {
  let out = text
  for (const secret of texts) if (out.includes(secret)) out = out.split(secret).join(MARKER)
  return out
}

/** Every string inside a JSON-like value (a tool's result) masked; the same value when nothing changed. */
export const maskValue = <A>(value: A, texts: ReadonlyArray<string>): A =>
  texts.length === 0 ? value : Json.mapStrings(value, mask(texts))
