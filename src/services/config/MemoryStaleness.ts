/**
 * The options of DeerMem's staleness review (`memory.backend_config.staleness_*`, see `state/MemoryStaleness.ts`),
 * with DeerMem's defaults and bounds: fields of `MemoryBackendConfig`.
 */
import * as Schema from "effect/Schema"
import { withDefault } from "./Fields.js"

const IntBetween = (min: number, max: number) => Schema.Number.pipe(Schema.int(), Schema.between(min, max))

/** The staleness fields of `memory.backend_config`. */
export const StalenessFields = {
  /** Whether the update prompt asks the memory model to review facts past their window. */
  staleness_review_enabled: withDefault(Schema.Boolean, () => true),
  /** The review window of a fact without `expected_valid_days`, in days. */
  staleness_age_days: withDefault(IntBetween(30, 365), () => 90),
  /** Facts due for review needed before the prompt asks for a review. */
  staleness_min_candidates: withDefault(IntBetween(1, 50), () => 3),
  /** Facts one review removes at most (the least confident first). */
  staleness_max_removals_per_cycle: withDefault(IntBetween(1, 50), () => 10),
  /** Categories never reviewed. */
  staleness_protected_categories: withDefault(Schema.Array(Schema.String), () => ["correction"]),
  /** A new fact's `expected_valid_days` is at most `staleness_age_days` times this. */
  staleness_max_lifetime_multiplier: withDefault(Schema.Number.pipe(Schema.between(1, 100)), () => 20),
  /** An extended window (`staleFactsToExtend`) is at most this many days. */
  staleness_max_extension_days: withDefault(IntBetween(90, 36500), () => 3650)
}
