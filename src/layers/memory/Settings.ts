/**
 * A memory configuration (`memory:` of `config.yaml`) read as the settings of the pure memory functions: the
 * limits of a document, DeerMem's `hybrid-v1` capacity policy, its staleness review and its consolidation; and all of
 * them as the settings a memory service reads for an injection or an update (`settingsOf`).
 */
import type { MemoryConfig } from "../../services/AppConfig.js"
import type * as MemoryConsolidation from "../../state/MemoryConsolidation.js"
import type * as MemoryEviction from "../../state/MemoryEviction.js"
import type * as MemoryLimits from "../../state/MemoryLimits.js"
import type * as MemoryStaleness from "../../state/MemoryStaleness.js"

/** The settings of DeerMem's `hybrid-v1` capacity policy, when a memory configuration chooses it. */
export const hybridOf = (config: MemoryConfig): MemoryEviction.Settings | undefined => {
  const backend = config.backend_config
  return backend.fact_eviction_policy === "hybrid-v1"
    ? {
      confidenceWeight: backend.eviction_confidence_weight,
      confirmationWeight: backend.eviction_confirmation_weight,
      accessWeight: backend.eviction_access_weight,
      confirmationHalfLifeDays: backend.eviction_confirmation_half_life_days,
      accessHalfLifeDays: backend.eviction_access_half_life_days,
      correctionReservedFraction: backend.eviction_correction_reserved_fraction,
      correctionReservedMax: backend.eviction_correction_reserved_max
    }
    : undefined
}

/**
 * The settings of `hybrid-v1` for DeerMem's shadow mode (`fact_eviction_shadow_enabled` under the `confidence`
 * policy: what `hybrid-v1` would leave out is audited beside what was); else undefined.
 */
export const shadowOf = (config: MemoryConfig): MemoryEviction.Settings | undefined =>
  config.backend_config.fact_eviction_shadow_enabled && config.backend_config.fact_eviction_policy === "confidence"
    ? hybridOf({ ...config, backend_config: { ...config.backend_config, fact_eviction_policy: "hybrid-v1" } })
    : undefined

/** DeerMem's consolidation settings, when `consolidation_enabled`; else undefined (nothing is merged). */
export const consolidationOf = (config: MemoryConfig): MemoryConsolidation.Settings | undefined => {
  const backend = config.backend_config
  return backend.consolidation_enabled
    ? {
      minFacts: backend.consolidation_min_facts,
      maxGroups: backend.consolidation_max_groups_per_cycle,
      maxSources: backend.consolidation_max_sources,
      protectedCategories: backend.staleness_protected_categories
    }
    : undefined
}

/** The settings of DeerMem's staleness review in a memory configuration. */
export const stalenessOf = (config: MemoryConfig): MemoryStaleness.Settings => {
  const backend = config.backend_config
  return {
    enabled: backend.staleness_review_enabled,
    ageDays: backend.staleness_age_days,
    minCandidates: backend.staleness_min_candidates,
    maxRemovalsPerCycle: backend.staleness_max_removals_per_cycle,
    protectedCategories: backend.staleness_protected_categories,
    maxLifetimeMultiplier: backend.staleness_max_lifetime_multiplier,
    maxExtensionDays: backend.staleness_max_extension_days
  }
}

/** The limits of a memory configuration. */
export const limitsOf = (config: MemoryConfig): MemoryLimits.Limits => ({
  maxFacts: config.backend_config.max_facts,
  maxFactChars: config.backend_config.max_fact_chars,
  maxSummaryChars: config.backend_config.max_summary_chars,
  hybrid: hybridOf(config),
  shadow: shadowOf(config)
})

/**
 * What a memory service reads of one `memory` section, for each injection and update (an edit of `config.yaml` taken
 * by `antler serve` gives the next runs another): on or off, the injection, the update queue's timing and depth, the
 * update model, the limits and DeerMem's policies.
 */
export interface Settings {
  readonly config: MemoryConfig
  /** `memory.enabled`, and a backend other than `noop`. */
  readonly enabled: boolean
  readonly limits: MemoryLimits.Limits
  readonly hybrid: MemoryEviction.Settings | undefined
  /** What reads the recall records: `hybrid-v1`, or its shadow beside `confidence`. */
  readonly scoring: MemoryEviction.Settings | undefined
  readonly consolidation: MemoryConsolidation.Settings | undefined
  readonly staleness: MemoryStaleness.Settings
}

/** The settings of a memory configuration. */
export const settingsOf = (config: MemoryConfig): Settings => ({
  config,
  enabled: config.enabled && config.manager_class !== "noop",
  limits: limitsOf(config),
  hybrid: hybridOf(config),
  scoring: hybridOf(config) ?? shadowOf(config),
  consolidation: consolidationOf(config),
  staleness: stalenessOf(config)
})
