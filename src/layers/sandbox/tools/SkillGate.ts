/**
 * The file tools' gate on disabled skills (SPEC §7.1): `ls`, `read_file`, `glob` and `grep` refuse a path inside a
 * disabled skill's folder, and leave such paths out of what they list or search when they walk from above it (a
 * root above a disabled skill would otherwise still show its files). The skills and their states are the catalog's
 * (`SkillsDirectory.catalogOf`), read only when a path can reach the skills' mount. Under bubblewrap, `bash` sees a
 * disabled skill's folder empty (DeerFlow mounts a copy of the enabled skills only); bash on the host refuses a
 * command that names it and runs the others over a view of the skills without it (`SkillsView`). A skill the run's
 * role may not load (`Authorization.DeniedSkills`) is hidden and refused the same way, with the role's refusal.
 */
import * as Path from "node:path"
import type { Catalog } from "../../../services/Skills.js"
import { under } from "./Text.js"

/** A disabled skill and the virtual folder of its package. */
export interface Disabled {
  readonly name: string
  readonly folder: string
}

/** The disabled skills of a catalog (a shadowed skill too: its files are still mounted). */
export const disabledOf = (catalog: Catalog): ReadonlyArray<Disabled> =>
  [...catalog.skills, ...catalog.shadowed].filter((s) => !s.enabled).map((s) => ({
    name: s.name,
    folder: Path.posix.dirname(s.location)
  }))

/** The folders of the named skills of a catalog (a shadowed one too), e.g. those a role may not load. */
export const foldersOf = (catalog: Catalog, names: ReadonlySet<string>): ReadonlyArray<Disabled> =>
  names.size === 0 ? [] : [...catalog.skills, ...catalog.shadowed].filter((s) => names.has(s.name)).map((s) => ({
    name: s.name,
    folder: Path.posix.dirname(s.location)
  }))

/** A virtual path with `.` and `..` segments resolved. */
export const resolved = (path: string): string => Path.posix.resolve("/", path)

/** Whether a walk from `path` (or a read of it) can reach the skills mounted at `container`. */
export const reaches = (path: string, container: string): boolean => {
  const at = resolved(path)
  const mount = resolved(container)
  return under(at, mount) || under(mount, at) || at === "/"
}

/** The disabled skill whose folder holds this virtual path, if any. */
export const blockedBy = (disabled: ReadonlyArray<Disabled>, path: string): string | undefined => {
  if (disabled.length === 0) return undefined
  const at = resolved(path)
  return disabled.find((d) => under(at, d.folder))?.name
}

/** What the model reads when it asks for a disabled skill's files (DeerFlow's text). */
export const refusal = (name: string): string =>
  `Error: Skill '${name}' is disabled. Access to its files is blocked. Enable the skill in settings before using it.`
