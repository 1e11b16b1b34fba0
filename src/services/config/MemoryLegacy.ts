/**
 * DeerFlow's older `memory:` section read as its newer one, as DeerFlow's `load_memory_config_from_dict` reads it:
 * DeerMem's options once written at the top of `memory:` (`max_facts: 50`, `debounce_seconds`, ...) move under
 * `memory.backend_config` unless it sets them itself; a file-like `storage_path` (`memory.json`, the old default)
 * is dropped, as memory files now live under a directory; and `manager_class` written as the class path of DeerMem
 * or of the noop backend is its short name (`deermem`, `noop`). What was moved or dropped is said in warnings.
 */
import { isRecord } from "../../state/Json.js"

/** DeerMem's options DeerFlow moves from the top of `memory:` into `backend_config` (not `model_name`: Antler's). */
export const LEGACY_FIELDS: ReadonlyArray<string> = [
  "storage_path",
  "storage_class",
  "debounce_seconds",
  "max_facts",
  "fact_confidence_threshold",
  "max_injection_tokens",
  "token_counting",
  "guaranteed_categories",
  "guaranteed_token_budget",
  "staleness_review_enabled",
  "staleness_age_days",
  "staleness_min_candidates",
  "staleness_max_removals_per_cycle",
  "staleness_protected_categories",
  "staleness_max_lifetime_multiplier",
  "staleness_max_extension_days",
  "consolidation_enabled",
  "consolidation_min_facts",
  "consolidation_max_groups_per_cycle",
  "consolidation_max_sources"
]

/** The class paths DeerFlow's factory resolves to the backends Antler has (`module.Class` and `module:Class`). */
const CLASS_PATHS: ReadonlyMap<string, string> = new Map([
  ["deerflow.agents.memory.backends.deermem.deer_mem.DeerMem", "deermem"],
  ["deerflow.agents.memory.backends.deermem.deer_mem:DeerMem", "deermem"],
  ["deerflow.agents.memory.backends.noop.noop_manager.NoopMemoryManager", "noop"],
  ["deerflow.agents.memory.backends.noop.noop_manager:NoopMemoryManager", "noop"]
])

/** A configuration value with its `memory:` section read as DeerFlow's newer layout, and what was changed. */
export interface Migrated {
  readonly raw: unknown
  readonly warnings: ReadonlyArray<string>
}

/**
 * `raw` (a whole configuration value, `config.yaml`'s shape) with its `memory:` section in DeerFlow's newer layout.
 * A section that is not a mapping, or whose `backend_config` is neither a mapping nor empty, is left as it is
 * (decoding names the problem).
 */
export const migrate = (raw: unknown): Migrated => {
  if (!isRecord(raw) || !isRecord(raw.memory)) return { raw, warnings: [] }
  const section = raw.memory
  const given = section.backend_config
  if (given != null && !isRecord(given)) return { raw, warnings: [] }
  // (in the file's order)
  const legacy = Object.keys(section).filter((key) => LEGACY_FIELDS.includes(key))
  const className = typeof section.manager_class === "string" ? CLASS_PATHS.get(section.manager_class) : undefined
  if (legacy.length === 0 && className === undefined) return { raw, warnings: [] }

  const memory: Record<string, unknown> = { ...section }
  const backend: Record<string, unknown> = { ...given }
  const moved: Array<string> = []
  const shadowed: Array<string> = []
  const warnings: Array<string> = []
  for (const key of legacy) {
    const value = memory[key]
    delete memory[key]
    // (an empty value is DeerFlow's default: nothing to move)
    if (value == null || value === "") continue
    if (key === "storage_path" && String(value).endsWith(".json")) {
      warnings.push(
        "memory.storage_path looks like a file (DeerFlow's older setting): it is not used, and memory files are " +
          "kept under the default directory (users/{user}/memory.json); set memory.backend_config.storage_path " +
          "to a directory to keep them elsewhere."
      )
    } else if (Object.hasOwn(backend, key) && backend[key] != null) {
      shadowed.push(key)
    } else {
      backend[key] = value
      moved.push(key)
    }
  }
  if (moved.length > 0) {
    warnings.push(
      `memory: ${moved.join(", ")} read as memory.backend_config.${moved.length === 1 ? moved[0] : "*"} ` +
        "(DeerFlow's older layout); move them under memory.backend_config to silence this."
    )
  }
  if (shadowed.length > 0) {
    warnings.push(`memory: ${shadowed.join(", ")} not used: memory.backend_config sets ${shadowed.join(", ")}.`)
  }
  if (className !== undefined) memory.manager_class = className
  if (legacy.length > 0) memory.backend_config = backend
  return { raw: { ...raw, memory }, warnings }
}
