/**
 * Skills on disk, in DeerFlow's layout (SPEC §9): a skills directory with `public/` (built in) and `custom/`
 * (the user's own) categories; a folder holding a `SKILL.md` is a skill package (SKILL.md files deeper inside
 * it are its data), other folders are namespaces searched further, hidden folders are skipped. Each SKILL.md
 * must open with YAML front matter giving a `name` and a `description` (and, optionally, `allowed-tools` as a
 * list of tool names, a `license`, and `required-secrets` / `secrets-autonomous`, see `SkillSecrets`); a file that
 * does not is rejected with a reason naming it. A SKILL.md is
 * read only as a regular file of at most `MAX_SKILL_BYTES`; a name is at most 64 characters, and a description
 * longer than 1024 is cut to it (with a warning in the catalog): the prompt lists every skill on every request.
 * Whether a skill is enabled comes from `extensions_config.json` (`skills: { <name>: { enabled } }`, absent =
 * enabled).
 *
 * The directory is `skills.path` (relative to the config file), else `$DEER_FLOW_SKILLS_PATH` or
 * `$ANTLER_SKILLS_PATH`, else `skills/` next to the config file (or in the working directory without one).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { AppConfigService } from "../services/AppConfig.js"
import type { Catalog, Category, Registry, Rejected, Skill } from "../services/Skills.js"
import {
  clipDescription,
  FRONT_MATTER,
  MAX_DESCRIPTION_CHARS,
  MAX_NAME_CHARS,
  SkillReadError
} from "../services/Skills.js"
import { MAX_CONFIG_BYTES } from "./ConfigFile.js"
import * as OnDemand from "../internal/OnDemand.js"
import * as TextFile from "./TextFile.js"
import * as Json from "../state/Json.js"
import * as SkillSecrets from "../services/SkillSecrets.js"

/** The categories searched, in order (a later skill of the same name replaces an earlier one). */
export const CATEGORIES: ReadonlyArray<Category> = ["public", "custom"]

/** The largest SKILL.md read (discovered or loaded whole): 1 MiB; a larger one is rejected. */
export const MAX_SKILL_BYTES = 1024 * 1024

/** Deepest namespace nesting searched under a category. */
const MAX_DEPTH = 6

const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** The directory of the config file (the working directory without one). */
const baseDir = (app: AppConfigService["Type"]): string =>
  app.source !== undefined ? Path.dirname(Path.resolve(app.source)) : process.cwd()

/** Where the skills directory should be, and what said so (whether or not it exists). */
export const location = (
  app: AppConfigService["Type"],
  env: Readonly<Record<string, string | undefined>> = process.env
): { readonly path: string; readonly from: string } => {
  const configured = app.config.skills.path
  if (configured != null && configured !== "") {
    return { path: Path.resolve(baseDir(app), configured), from: "skills.path" }
  }
  for (const name of ["DEER_FLOW_SKILLS_PATH", "ANTLER_SKILLS_PATH"]) {
    const value = env[name]
    if (value !== undefined && value !== "") return { path: Path.resolve(value), from: `$${name}` }
  }
  return {
    path: Path.join(baseDir(app), "skills"),
    from: app.source !== undefined ? "skills/ next to the config file" : "skills/ in the working directory"
  }
}

/** The skills directory when it exists. */
export const root = (app: AppConfigService["Type"]): string | undefined => {
  const { path } = location(app)
  return isDirectory(path) ? path : undefined
}

// ---------------------------------------------------------------------------------------------------------
// Skill states

/**
 * Where `extensions_config.json` is (as `ExtensionsFile.resolvePath` finds it): `$ANTLER_EXTENSIONS_CONFIG` or
 * `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`, else the first `extensions_config.json` or `mcp_config.json` (DeerFlow's
 * older name) next to the config file, in the working directory or in `$ANTLER_HOME`; when there is none, a new
 * one next to the config file, else in `$ANTLER_HOME` (never a new file in a working directory that has none).
 */
export const extensionsConfigPath = (
  app: AppConfigService["Type"],
  env: Readonly<Record<string, string | undefined>> = process.env
): string => {
  for (const name of ["ANTLER_EXTENSIONS_CONFIG", "DEER_FLOW_EXTENSIONS_CONFIG_PATH"]) {
    const given = env[name]
    if (given !== undefined && given.trim() !== "") return Path.resolve(given)
  }
  const beside = app.source !== undefined ? Path.dirname(Path.resolve(app.source)) : undefined
  const dirs = [...(beside !== undefined ? [beside] : []), process.cwd(), app.home]
  const found = dirs.flatMap((dir) => EXTENSIONS_NAMES.map((name) => Path.join(dir, name)))
    .find((file) => Fs.existsSync(file))
  return found ?? Path.join(beside ?? app.home, "extensions_config.json")
}

const EXTENSIONS_NAMES: ReadonlyArray<string> = ["extensions_config.json", "mcp_config.json"]

/**
 * The enabled state of each skill named in an `extensions_config.json` (a missing file: none), and the
 * problems met reading it (a broken file counts as naming no skill).
 */
export const readStates = (file: string): { states: ReadonlyMap<string, boolean>; warnings: ReadonlyArray<string> } => {
  const read = TextFile.read(file, MAX_CONFIG_BYTES)
  if (Either.isLeft(read)) {
    if (read.left.reason === "missing") return { states: new Map(), warnings: [] }
    return { states: new Map(), warnings: [`${read.left.message}; skills stay enabled`] }
  }
  const text = read.right
  let raw: unknown
  try {
    raw = Json.parse(text)
  } catch (error) {
    const problem = `${file}: not valid JSON (${(error as Error).message}); skills stay enabled`
    return { states: new Map(), warnings: [problem] }
  }
  const skills = (raw as { skills?: unknown } | null)?.skills
  const states = new Map<string, boolean>()
  const warnings: Array<string> = []
  if (skills === undefined || skills === null) return { states, warnings }
  if (typeof skills !== "object" || Array.isArray(skills)) {
    return { states, warnings: [`${file}: skills: expected a mapping of skill names; skills stay enabled`] }
  }
  for (const [name, entry] of Object.entries(skills)) {
    const enabled = (entry as { enabled?: unknown } | null)?.enabled
    if (typeof enabled === "boolean") states.set(name, enabled)
    else if (enabled !== undefined) warnings.push(`${file}: skills.${name}.enabled: expected true or false`)
  }
  return { states, warnings }
}

// ---------------------------------------------------------------------------------------------------------
// Front matter

/** What a SKILL.md declares, or why it is not a skill. */
export type Parsed =
  | {
    readonly ok: true
    readonly name: string
    readonly description: string
    readonly allowedTools: ReadonlyArray<string> | undefined
    /** Its `license`, when it gives one (a number or a boolean as written, at most `MAX_DESCRIPTION_CHARS`). */
    readonly license?: string | undefined
    /** The length of the description as written, when it was cut to `MAX_DESCRIPTION_CHARS`. */
    readonly cutFrom?: number | undefined
    /** Its `required-secrets` (entries without a valid name dropped, named in `droppedSecrets`). */
    readonly requiredSecrets?: ReadonlyArray<SkillSecrets.Requirement> | undefined
    readonly droppedSecrets?: ReadonlyArray<string> | undefined
    /** Its `secrets-autonomous` (anything but a boolean: false). */
    readonly secretsAutonomous?: boolean | undefined
  }
  | { readonly ok: false; readonly problem: string }

/**
 * Why the front matter is not YAML, for the one who wrote it (often a model): the parser's complaint, the line it
 * is on as numbered in the file (the front matter starts on line 2), written out whole, and for a value holding
 * `: ` that is not quoted (`description: a: b`, the common mistake) the quoted line to write instead, escaped so
 * that it reads back as the same text (DeerFlow's parser: `hint: values containing ":" must be quoted`).
 */
const yamlProblem = (error: unknown, frontMatter: string): string => {
  const message = ((error as Error).message ?? String(error)).split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")
  const parts = [`the front matter is not valid YAML (${message})`]
  const line = (error as { linePos?: ReadonlyArray<{ line: number }> }).linePos?.[0]?.line
  const lines = frontMatter.split(/\r?\n/)
  if (line !== undefined && line >= 1 && line <= lines.length) {
    const offending = lines[line - 1]!
    parts.push(`line ${line + 1}: ${offending}`)
    const colon = offending.indexOf(":")
    const value = colon < 0 ? "" : offending.slice(colon + 1).trim()
    if ((error as { code?: unknown }).code === "BLOCK_AS_IMPLICIT_KEY" && value !== "" && !/^["'|>[{]/.test(value)) {
      const quoted = value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"")
      parts.push(`hint: values containing ":" must be quoted, e.g. ${offending.slice(0, colon)}: "${quoted}"`)
    }
  }
  return parts.join("\n  ")
}

/** Reads and checks a SKILL.md's front matter (SPEC §9). */
export const parseSkill = (content: string): Parsed => {
  const match = FRONT_MATTER.exec(content)
  if (match === null) return { ok: false, problem: "no YAML front matter (the file must start with a --- block)" }
  let data: unknown
  try {
    data = OnDemand.yaml().parse(match[1]!)
  } catch (error) {
    return { ok: false, problem: yamlProblem(error, match[1]!) }
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return { ok: false, problem: "the front matter is not a mapping of keys" }
  }
  const fields = data as Record<string, unknown>
  const text = (key: string) => {
    const value = fields[key]
    return typeof value === "string" ? value.replace(/\s+/g, " ").trim() : undefined
  }
  const name = text("name")
  if (name === undefined || name === "") return { ok: false, problem: "the front matter has no `name`" }
  if (name.length > MAX_NAME_CHARS) {
    return { ok: false, problem: `the name is ${name.length} characters long (at most ${MAX_NAME_CHARS})` }
  }
  const description = text("description")
  if (description === undefined || description === "") {
    return { ok: false, problem: "the front matter has no `description`" }
  }
  const tools = fields["allowed-tools"]
  let allowedTools: ReadonlyArray<string> | undefined
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools) || !tools.every((t) => typeof t === "string" && t.trim() !== "")) {
      return { ok: false, problem: "`allowed-tools` must be a list of tool names" }
    }
    allowedTools = tools.map((t: string) => t.trim())
  }
  const secrets = SkillSecrets.parseRequired(fields["required-secrets"])
  if (secrets.problem !== undefined) return { ok: false, problem: secrets.problem }
  const declared = secrets.requirements.length === 0 ? {} : { requiredSecrets: secrets.requirements }
  const dropped = secrets.dropped.length === 0 ? {} : { droppedSecrets: secrets.dropped }
  const autonomous = SkillSecrets.parseAutonomous(fields["secrets-autonomous"])
  const secretFields = { ...declared, ...dropped, ...(autonomous ? {} : { secretsAutonomous: false }) }
  const rawLicense = fields["license"]
  const licenseText =
    typeof rawLicense === "string" || typeof rawLicense === "number" || typeof rawLicense === "boolean"
      ? String(rawLicense).trim()
      : ""
  const license = licenseText === "" ? undefined : clipDescription(licenseText)
  return description.length > MAX_DESCRIPTION_CHARS
    ? {
      ok: true,
      name,
      description: clipDescription(description),
      allowedTools,
      license,
      cutFrom: description.length,
      ...secretFields
    }
    : { ok: true, name, description, allowedTools, license, ...secretFields }
}

/** The front matter keys a SKILL.md that is installed or written may have (DeerFlow's). */
export const FRONT_MATTER_KEYS: ReadonlyArray<string> = [
  "allowed-tools",
  "author",
  "compatibility",
  "description",
  "license",
  "metadata",
  "name",
  "required-secrets",
  "secrets-autonomous",
  "version"
]

const typeName = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "list" : typeof value === "object" ? "mapping" : typeof value

/**
 * Why a SKILL.md may not be installed or written (a `.skill` archive, `skill_manage`, the custom skill endpoints),
 * if it may not: DeerFlow's stricter check for what becomes a skill (`_validate_skill_frontmatter`), beside what
 * `parseSkill` asks of a skill found on disk. Only DeerFlow's keys; a hyphen-case name of at most 64 characters; a
 * description of at most 1024 characters without `<` or `>`; `allowed-tools` a list of tool names;
 * `required-secrets` a list and `secrets-autonomous` true or false. The reason names no host path.
 */
export const installProblem = (content: string): string | undefined => {
  const match = FRONT_MATTER.exec(content)
  if (match === null) return "No YAML frontmatter found"
  let data: unknown
  try {
    data = OnDemand.yaml().parse(match[1]!)
  } catch (error) {
    const detail = yamlProblem(error, match[1]!).replace(/^the front matter is not valid YAML /, "")
    return `Invalid YAML in frontmatter: ${detail}`
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) return "Frontmatter must be a YAML dictionary"
  const fields = data as Record<string, unknown>
  const unexpected = Object.keys(fields).filter((key) => !FRONT_MATTER_KEYS.includes(key)).sort()
  if (unexpected.length > 0) return `Unexpected key(s) in SKILL.md frontmatter: ${unexpected.join(", ")}`
  if (!("name" in fields)) return "Missing 'name' in frontmatter"
  if (!("description" in fields)) return "Missing 'description' in frontmatter"
  if (typeof fields.name !== "string") return `Name must be a string, got ${typeName(fields.name)}`
  const name = fields.name.trim()
  if (name === "") return "Name cannot be empty"
  if (!/^[a-z0-9-]+$/.test(name)) {
    return `Name '${name}' should be hyphen-case (lowercase letters, digits, and hyphens only)`
  }
  if (name.startsWith("-") || name.endsWith("-") || name.includes("--")) {
    return `Name '${name}' cannot start/end with hyphen or contain consecutive hyphens`
  }
  if (name.length > MAX_NAME_CHARS) {
    return `Name is too long (${name.length} characters). Maximum is ${MAX_NAME_CHARS} characters.`
  }
  if (typeof fields.description !== "string") {
    return `Description must be a string, got ${typeName(fields.description)}`
  }
  const description = fields.description.trim()
  if (description.includes("<") || description.includes(">")) {
    return "Description cannot contain angle brackets (< or >)"
  }
  if (description.length > MAX_DESCRIPTION_CHARS) {
    return `Description is too long (${description.length} characters). Maximum is ${MAX_DESCRIPTION_CHARS} characters.`
  }
  const tools = fields["allowed-tools"]
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) return "allowed-tools in SKILL.md must be a list of strings"
    if (!tools.every((tool) => typeof tool === "string")) return "allowed-tools in SKILL.md must contain only strings"
    if (tools.some((tool: string) => tool.trim() === "")) {
      return "allowed-tools in SKILL.md cannot contain empty tool names"
    }
  }
  const secrets = fields["required-secrets"]
  if (secrets !== undefined && secrets !== null && !Array.isArray(secrets)) {
    return "required-secrets in SKILL.md must be a list"
  }
  const autonomous = fields["secrets-autonomous"]
  if (autonomous !== undefined && autonomous !== null && typeof autonomous !== "boolean") {
    return "secrets-autonomous in SKILL.md must be a boolean"
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------
// Discovery

interface Found {
  readonly category: Category
  readonly relativePath: string
  readonly file: string
}

const packages = (categoryDir: string, category: Category): { found: Array<Found>; rejected: Array<Rejected> } => {
  const found: Array<Found> = []
  const rejected: Array<Rejected> = []
  const realRoot = Fs.realpathSync(categoryDir)
  const walk = (dir: string, relative: string, depth: number) => {
    let entries: Array<Fs.Dirent>
    try {
      entries = Fs.readdirSync(dir, { withFileTypes: true })
    } catch (error) {
      rejected.push({ file: dir, problem: `cannot be listed (${(error as Error).message})` })
      return
    }
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name.startsWith(".")) continue
      const path = Path.join(dir, entry.name)
      if (!isDirectory(path)) continue
      // a folder linked from elsewhere is followed only when it stays inside the category
      if (entry.isSymbolicLink()) {
        const real = Fs.realpathSync(path)
        if (real !== realRoot && !real.startsWith(`${realRoot}${Path.sep}`)) {
          rejected.push({ file: path, problem: "a link to a folder outside the skills directory (skipped)" })
          continue
        }
      }
      const rel = relative === "" ? entry.name : `${relative}/${entry.name}`
      const skillFile = Path.join(path, "SKILL.md")
      if (Fs.existsSync(skillFile)) found.push({ category, relativePath: rel, file: skillFile })
      else if (depth < MAX_DEPTH) walk(path, rel, depth + 1)
    }
  }
  walk(categoryDir, "", 1)
  return { found, rejected }
}

/** Reads the skills of a directory (`undefined`: none), with their states. */
export const discover = (
  dir: string | undefined,
  options: { readonly container: string; readonly states?: ReadonlyMap<string, boolean> | undefined }
): Catalog => {
  const container = options.container.replace(/\/+$/, "")
  const states = options.states ?? new Map<string, boolean>()
  const byName = new Map<string, Skill>()
  const shadowed: Array<Skill> = []
  const rejected: Array<Rejected> = []
  const warnings: Array<string> = []
  if (dir === undefined) return { root: undefined, container, skills: [], rejected, shadowed, warnings }
  for (const category of CATEGORIES) {
    const categoryDir = Path.join(dir, category)
    if (!isDirectory(categoryDir)) continue
    const listed = packages(categoryDir, category)
    rejected.push(...listed.rejected)
    for (const found of listed.found) {
      const content = TextFile.read(found.file, MAX_SKILL_BYTES)
      if (Either.isLeft(content)) {
        rejected.push({ file: found.file, problem: content.left.problem })
        continue
      }
      const parsed = parseSkill(content.right)
      if (!parsed.ok) {
        rejected.push({ file: found.file, problem: parsed.problem })
        continue
      }
      if (parsed.cutFrom !== undefined) {
        warnings.push(
          `${found.file}: the description of ${parsed.name} is ${parsed.cutFrom} characters long; the prompt shows ` +
            `its first ${MAX_DESCRIPTION_CHARS}`
        )
      }
      if (parsed.droppedSecrets !== undefined) {
        warnings.push(
          `${found.file}: required-secrets entries of ${parsed.name} without a valid environment variable name ` +
            `are ignored: ${parsed.droppedSecrets.join(", ")}`
        )
      }
      const skill: Skill = {
        name: parsed.name,
        description: parsed.description,
        category,
        relativePath: found.relativePath,
        location: `${container}/${category}/${found.relativePath}/SKILL.md`,
        file: found.file,
        enabled: states.get(parsed.name) ?? true,
        allowedTools: parsed.allowedTools,
        ...(parsed.license === undefined ? {} : { license: parsed.license }),
        ...(parsed.requiredSecrets === undefined ? {} : { requiredSecrets: parsed.requiredSecrets }),
        ...(parsed.secretsAutonomous === undefined ? {} : { secretsAutonomous: parsed.secretsAutonomous })
      }
      const earlier = byName.get(skill.name)
      if (earlier !== undefined) {
        shadowed.push(earlier)
        byName.delete(skill.name)
      }
      byName.set(skill.name, skill)
    }
  }
  // by name, as DeerFlow's load_skills lists them (the prompt, GET /api/skills), whatever their folders or categories
  const skills = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return { root: dir, container, skills, rejected, shadowed, warnings }
}

/** The catalog of an app's skills directory, with the states of its `extensions_config.json`. */
export const catalogOf = (app: AppConfigService["Type"]): Catalog => {
  const { states, warnings } = readStates(extensionsConfigPath(app))
  const catalog = discover(root(app), { container: app.config.skills.container_path, states })
  return { ...catalog, warnings: [...warnings, ...catalog.warnings] }
}

/**
 * A fingerprint of what the prompt's skills come from, taken from file metadata only (no file is read): each
 * SKILL.md under the categories (its path, size, modification time and inode; a file replaced whole has a new
 * inode) and the skill states' file. It changes when a skill is added, changed, removed, or switched on or off;
 * an agent built for another fingerprint lists other skills (the factory builds it again).
 */
export const signature = (app: AppConfigService["Type"]): string => {
  const parts: Array<string> = []
  const mark = (file: string) => {
    try {
      const stat = Fs.statSync(file)
      parts.push(`${file}:${stat.size}:${stat.mtimeMs}:${stat.ino}`)
    } catch {
      parts.push(`${file}:-`)
    }
  }
  mark(extensionsConfigPath(app))
  const dir = root(app)
  if (dir !== undefined) {
    for (const category of CATEGORIES) {
      const categoryDir = Path.join(dir, category)
      if (!isDirectory(categoryDir)) continue
      for (const found of packages(categoryDir, category).found) mark(found.file)
    }
  }
  return parts.join("\n")
}

/**
 * The registry of an app's skills: the directory is read again on each `catalog` (asked when a skill is named or
 * described, and for each model call while one is active; never on a step with no skill active).
 */
export const make = (app: AppConfigService["Type"]): Registry => ({
  catalog: Effect.withSpan(Effect.sync(() => catalogOf(app)), "SkillsDirectory.catalog"),
  read: Effect.fn("SkillsDirectory.read")(function*(skill: Skill) {
    yield* Effect.annotateCurrentSpan({ skill: skill.name })
    return yield* Effect.try({
      try: () => {
        const dir = root(app)
        const real = Fs.realpathSync(skill.file)
        const realRoot = dir === undefined ? undefined : Fs.realpathSync(dir)
        if (realRoot === undefined || !real.startsWith(`${realRoot}${Path.sep}`)) {
          throw new Error("the file is not inside the skills directory")
        }
        return Either.getOrThrowWith(TextFile.read(real, MAX_SKILL_BYTES), (error) => new Error(error.problem))
      },
      catch: (cause) =>
        new SkillReadError({
          name: skill.name,
          message: `The SKILL.md of ${skill.name} cannot be read: ${(cause as Error).message ?? String(cause)}`,
          cause
        })
    })
  })
})
