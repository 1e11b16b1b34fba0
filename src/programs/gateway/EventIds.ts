/**
 * The ids of a run's events (the SSE `id:` a client rejoins with as `Last-Event-ID`) across a failover. A run
 * numbers its events from 1. A run resumed on another runner after its runner died (`gateway.cluster`) cannot
 * learn the last id the dead runner gave (its buffer died with it), so each resumption numbers its events from a
 * block of its own, above every earlier attempt's: the `n`th resumption from `n · BLOCK + 1`. An attempt gives
 * far fewer than `BLOCK` (2^40) events, so across failovers a run's ids never repeat and never go back; a
 * client's cursor from an earlier attempt reads as "just before this attempt's first event".
 */
import type { RunRecord } from "../../services/ThreadStore.js"

/** The ids one attempt of a run may use. */
export const BLOCK = 2 ** 40

/** The most resumptions numbered apart (ids stay safe integers); later ones share the last block. */
export const MAX_RESUMES = Math.floor(Number.MAX_SAFE_INTEGER / BLOCK) - 1

/** The key of a run record's (internal) metadata counting its resumptions. */
export const RESUMES_KEY = "resumes"

/** The id of the first event of a run resumed `resumes` times (1 for a run never resumed). */
export const firstId = (resumes: number): number =>
  Math.min(Math.max(0, Math.floor(resumes)), MAX_RESUMES) * BLOCK + 1

/** How many times a run was resumed, as its record says (0 when it does not say). */
export const resumesOf = (record: RunRecord | undefined): number => {
  const metadata = record?.metadata
  const value = typeof metadata === "object" && metadata !== null
    ? (metadata as Record<string, unknown>)[RESUMES_KEY]
    : undefined
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : 0
}

/** A cursor as the attempt whose first event is `first` reads it: one from an earlier attempt is `first - 1`. */
export const cursorIn = (cursor: number, first: number): number => (cursor > 0 && cursor < first ? first - 1 : cursor)

/**
 * An event id as a client sends it back (`Last-Event-ID`): decimal digits naming a safe integer; undefined for any
 * other text, which `Number` would also read (`0x10`, `1e3`, `0b1`, twenty digits rounded).
 */
export const parse = (text: string): number | undefined => {
  const trimmed = text.trim()
  return /^\d{1,16}$/.test(trimmed) && Number.isSafeInteger(Number(trimmed)) ? Number(trimmed) : undefined
}
