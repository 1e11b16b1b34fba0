/**
 * Skills and catalogs for tests of what skills bind (`SkillSecrets`): a custom skill requiring `ERP_TOKEN` unless
 * `fields` say otherwise, and a catalog of the skills given (nothing rejected, shadowed or warned of).
 */
import type { Catalog, Skill } from "../../src/services/Skills.js"

/** A custom skill `name`, enabled, requiring `ERP_TOKEN`, `fields` over it. */
export const skill = (name: string, fields: Partial<Skill> = {}): Skill => ({
  name,
  description: `Description for ${name}`,
  category: "custom",
  relativePath: name,
  location: `/mnt/skills/custom/${name}/SKILL.md`,
  file: `/skills/custom/${name}/SKILL.md`,
  enabled: true,
  allowedTools: undefined,
  requiredSecrets: [{ name: "ERP_TOKEN", optional: false }],
  ...fields
})

/** A catalog of `skills` under /skills (seen as /mnt/skills). */
export const catalogOf = (...skills: ReadonlyArray<Skill>): Catalog => ({
  root: "/skills",
  container: "/mnt/skills",
  skills,
  rejected: [],
  shadowed: [],
  warnings: []
})
