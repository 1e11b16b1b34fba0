/**
 * Custom sandbox mounts (`sandbox.mounts[]`, DeerFlow's `VolumeMountConfig`: `host_path`, `container_path`,
 * `read_only`) and the skills container path (`skills.container_path`): their Schemas and the rules that need the
 * whole configuration (pure). A mount may not sit at, inside or around `/mnt/user-data`, the skills path,
 * `/mnt/acp-workspace` or the sandbox's system directories, nor inside another mount: it adds a directory, it never
 * changes the rules of the thread's own. Whether a host path exists is checked where the file is loaded
 * (`layers/ConfigFile.ts`).
 */
import * as Schema from "effect/Schema"
import { withDefault } from "./Fields.js"

/** The thread's own directories, and where DeerFlow's ACP agents write. */
export const RESERVED_ROOTS = ["/mnt/user-data", "/mnt/acp-workspace"] as const

/** Directories of the sandbox's own system view (bubblewrap), which a mount may not cover. */
export const SYSTEM_ROOTS = [
  "/usr",
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/etc",
  "/proc",
  "/dev",
  "/sys",
  "/tmp",
  "/run",
  "/.stage"
] as const

/** Whether `path` is `root` or below it (both absolute, normalised). */
const within = (path: string, root: string) => path === root || path.startsWith(`${root}/`)

const overlaps = (a: string, b: string) => within(a, b) || within(b, a)

/**
 * The system directory a mount at `target` would cover or sit in, or undefined. Inside `/tmp` is allowed: the
 * sandbox's `/tmp` is its own, and a directory can be mounted inside it.
 */
export const systemClash = (target: string): string | undefined =>
  SYSTEM_ROOTS.find((root) => root === "/tmp" ? within(root, target) : overlaps(target, root))

/**
 * The reserved path (the thread's directories, the ACP workspace, the skills) a mount at `target` would cover or
 * sit in, or undefined.
 */
export const reservedClash = (target: string, skillsContainer: string): string | undefined =>
  [...RESERVED_ROOTS, skillsContainer].find((root) => overlaps(target, root))

/**
 * Why `value` is not a usable absolute sandbox path, or undefined: it must start with `/`, and have no `..` or
 * `.` segments, no empty segments, no backslashes and no NULs (a trailing `/` is allowed).
 */
export const containerPathProblem = (value: string): string | undefined => {
  if (!value.startsWith("/")) return `expected an absolute path (starting with /), got ${JSON.stringify(value)}`
  if (/[\\\0]/.test(value)) return "may not contain backslashes or NUL bytes"
  const trimmed = value.replace(/\/+$/, "")
  if (trimmed === "") return "may not be / (the sandbox's root)"
  const segments = trimmed.slice(1).split("/")
  if (segments.some((s) => s === ".." || s === "." || s === "")) {
    return "expected a normalised path (no '.', '..' or empty segments)"
  }
  return undefined
}

/** A container path with its trailing `/` removed. */
export const normalizeContainer = (value: string): string => value.replace(/\/+$/, "")

const ContainerPath = Schema.String.pipe(
  Schema.filter((value) => containerPathProblem(value) ?? true),
  Schema.transform(Schema.String, { strict: true, decode: normalizeContainer, encode: (s) => s })
)

const HostPath = Schema.String.pipe(
  Schema.filter((value) =>
    value.startsWith("/") && !value.includes("\0")
      ? true
      : `expected an absolute host path (starting with /), got ${JSON.stringify(value)}`
  )
)

/** One custom mount: a host directory shown in the sandbox at `container_path`. */
export const VolumeMountConfig = Schema.Struct({
  host_path: HostPath,
  container_path: ContainerPath,
  read_only: withDefault(Schema.Boolean, () => false)
})
export type VolumeMountConfig = typeof VolumeMountConfig.Type

/** `skills.container_path`: where the model sees skills (an absolute path). */
export const SkillsContainerPath = ContainerPath

/** One problem found across sections: the dotted key and what is wrong. */
export interface MountIssue {
  readonly path: string
  readonly message: string
}

/**
 * The rules across sections (pure): the skills path and each mount's container path must stay clear of the thread's
 * directories, `/mnt/acp-workspace`, the system directories and each other.
 */
export const mountIssues = (
  mounts: ReadonlyArray<VolumeMountConfig>,
  skillsContainer: string
): ReadonlyArray<MountIssue> => {
  const issues: Array<MountIssue> = []
  for (const root of [...RESERVED_ROOTS, ...SYSTEM_ROOTS]) {
    if (overlaps(skillsContainer, root)) {
      issues.push({
        path: "skills.container_path",
        message: `${skillsContainer} overlaps ${root}; choose a path of its own, such as /mnt/skills`
      })
    }
  }
  mounts.forEach((mount, i) => {
    const key = `sandbox.mounts[${i}].container_path`
    const target = mount.container_path
    const clash = reservedClash(target, skillsContainer)
    if (clash !== undefined) {
      issues.push({
        path: key,
        message: `${target} ${within(target, clash) ? "is at or inside" : "contains"} ${clash}, which the sandbox ` +
          "keeps for itself (its rules cannot be changed by a mount); mount elsewhere, such as /mnt/data"
      })
      return
    }
    const system = systemClash(target)
    if (system !== undefined) {
      issues.push({ path: key, message: `${target} overlaps the sandbox's system directory ${system}` })
      return
    }
    const other = mounts.findIndex((m, j) => j < i && overlaps(target, m.container_path))
    if (other !== -1) {
      issues.push({
        path: key,
        message: `${target} overlaps sandbox.mounts[${other}] (${mounts[other]!.container_path}); ` +
          "mounts may not sit inside one another"
      })
    }
  })
  return issues
}
