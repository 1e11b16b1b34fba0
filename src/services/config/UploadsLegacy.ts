/**
 * DeerFlow's older names of two `uploads:` limits read as its newer ones, as its gateway reads them
 * (`_get_upload_limits`): `max_file_count` is `max_files` and `max_single_file_size` is `max_file_size` when the
 * newer key is not set. What was read so is said in a warning; an older key beside the newer one is not used.
 */
import { isRecord } from "../../state/Json.js"
import type { Migrated } from "./MemoryLegacy.js"

/** The older `uploads:` keys and the keys DeerFlow reads them as. */
export const LEGACY_KEYS: ReadonlyArray<readonly [string, string]> = [
  ["max_file_count", "max_files"],
  ["max_single_file_size", "max_file_size"]
]

/** `raw` (a whole configuration value) with the older `uploads:` limits under their newer names. */
export const migrate = (raw: unknown): Migrated => {
  if (!isRecord(raw) || !isRecord(raw.uploads)) return { raw, warnings: [] }
  const section = raw.uploads
  if (!LEGACY_KEYS.some(([older]) => Object.hasOwn(section, older))) return { raw, warnings: [] }
  const uploads: Record<string, unknown> = { ...section }
  const warnings: Array<string> = []
  for (const [older, newer] of LEGACY_KEYS) {
    if (!Object.hasOwn(uploads, older)) continue
    const value = uploads[older]
    delete uploads[older]
    if (value == null) continue
    if (uploads[newer] != null) {
      warnings.push(`uploads.${older} not used: uploads.${newer} is set.`)
    } else {
      uploads[newer] = value
      warnings.push(`uploads.${older} read as uploads.${newer} (DeerFlow's older name); rename it to silence this.`)
    }
  }
  return { raw: { ...raw, uploads }, warnings }
}
