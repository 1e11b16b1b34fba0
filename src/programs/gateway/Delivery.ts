/**
 * DeerFlow's artifact delivery check of a gateway run (its worker's `_delivery_content_with_outputs`): a run that
 * created or modified regular files under `/mnt/user-data/outputs` must have presented at least one of them with
 * `present_files` (the file, or a folder holding it), else it ended without delivering what it made and fails with
 * `INCOMPLETE`. Its `run.delivery` receipt then carries the verdict: the files produced, those presented, those
 * matched, the `stage` reached and whether it was `satisfied`. A run that changed no outputs keeps its receipt as
 * it was (`{presented, paths, by_tool}`) and is not checked.
 */

/** The run's error when it changed outputs and presented none of them (DeerFlow's `_DELIVERY_INCOMPLETE_ERROR`). */
export const INCOMPLETE = "Artifact delivery incomplete: no produced output artifact was presented"

/**
 * The error of a run that changed outputs and whose receipt could not be kept (DeerFlow's
 * `_DELIVERY_RECEIPT_FAILED_ERROR`): nothing durable says what it delivered.
 */
export const RECEIPT_FAILED =
  "Artifact delivery verification failed: terminal delivery receipt could not be persisted"

/** The error's class (of either error), as a failed run's `error` event and its `run.error` event name it. */
export const ERROR_NAME = "ArtifactDeliveryIncomplete"

/** The tool whose presented paths count as delivered. */
export const PRESENTING_TOOL = "present_files"

/** The receipt of what a run's tools presented (`run.delivery` without a verdict). */
export interface Receipt {
  readonly presented: number
  readonly paths: ReadonlyArray<string>
  readonly by_tool: Readonly<Record<string, ReadonlyArray<string>>>
}

/** How far a run that changed outputs came in delivering them. */
export type Stage = "presented" | "mismatched" | "not_started"

/** The receipt of a run that changed outputs: what it presented, and DeerFlow's verdict on its delivery. */
export interface Verdict extends Receipt {
  readonly verification: { readonly source: "outputs_changed"; readonly requirement: string }
  readonly produced_paths: ReadonlyArray<string>
  readonly presented_paths: ReadonlyArray<string>
  readonly matched_paths: ReadonlyArray<string>
  readonly stage: Stage
  readonly satisfied: boolean
}

/**
 * The most characters of paths each list of a verdict keeps (as the receipt's `paths`): a run may make up to the
 * 2,000 files a snapshot scans; the lists past it are cut (the verdict is reached on all of them).
 */
export const MAX_LISTED_CHARS = 64_000

const listed = (paths: ReadonlyArray<string>): ReadonlyArray<string> => {
  let chars = 0
  return paths.filter((path) => (chars += path.length) <= MAX_LISTED_CHARS)
}

/** Whether presenting `presented` (a file, or a folder: a trailing `/` ignored) delivers the produced file. */
export const covers = (presented: string, produced: string): boolean => {
  const trimmed = presented.replace(/\/+$/, "")
  return trimmed !== "" && (produced === trimmed || produced.startsWith(`${trimmed}/`))
}

/**
 * The receipt with DeerFlow's verdict when the run changed outputs (`produced`, the created or modified regular
 * files under outputs); the receipt unchanged when it changed none.
 */
export const verdict = (receipt: Receipt, produced: ReadonlyArray<string>): Receipt | Verdict => {
  if (produced.length === 0) return receipt
  const presented = receipt.by_tool[PRESENTING_TOOL] ?? []
  const matched = produced.filter((path) => presented.some((shown) => covers(shown, path)))
  const satisfied = matched.length > 0
  return {
    ...receipt,
    verification: { source: "outputs_changed", requirement: "present_files_matches_produced_output" },
    produced_paths: listed(produced),
    presented_paths: listed(presented),
    matched_paths: listed(matched),
    stage: satisfied ? "presented" : presented.length > 0 ? "mismatched" : "not_started",
    satisfied
  }
}

/** The error a run ends with for its receipt: `INCOMPLETE` when it changed outputs and delivered none of them. */
export const failure = (receipt: Receipt | Verdict): string | undefined =>
  "satisfied" in receipt && !receipt.satisfied ? INCOMPLETE : undefined
