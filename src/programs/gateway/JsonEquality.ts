/**
 * Equality of JSON values as the gateway's filters compare them (cron metadata, store item fields): objects are
 * equal whatever the order of their keys.
 */

/** A JSON value with its objects' keys in order (so equal values have equal text). */
const canonical = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonical)
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    return Object.fromEntries(Object.keys(record).sort().map((key) => [key, canonical(record[key])]))
  }
  return value
}

/** Whether two JSON values are equal (objects whatever the order of their keys). */
export const sameJson = (a: unknown, b: unknown): boolean =>
  a === b || (a !== undefined && b !== undefined && JSON.stringify(canonical(a)) === JSON.stringify(canonical(b)))

/**
 * Whether the JSON value `found` contains `wanted`, as PostgreSQL's `jsonb @>` (LangGraph's metadata and values
 * filters) decides: an object contains each key of `wanted` with a value it contains, an array contains each
 * element of `wanted` somewhere among its own (in any order), anything else is equal. So `{ "a": { "b": 1, "c": 2 } }`
 * contains `{ "a": { "b": 1 } }`, whatever the order of the keys.
 */
export const containsJson = (found: unknown, wanted: unknown): boolean => {
  if (Array.isArray(wanted)) {
    if (!Array.isArray(found)) return false
    return wanted.every((item) => found.some((element) => containsJson(element, item)))
  }
  if (typeof wanted === "object" && wanted !== null) {
    if (typeof found !== "object" || found === null || Array.isArray(found)) return false
    const record = found as Readonly<Record<string, unknown>>
    return Object.entries(wanted).every(([key, value]) =>
      Object.hasOwn(record, key) && containsJson(record[key], value)
    )
  }
  return found === wanted
}

/** Whether the record `found` has each key of `filter` with a value that contains the filter's (`containsJson`). */
export const matchesFilter = (
  found: Readonly<Record<string, unknown>> | null | undefined,
  filter: Readonly<Record<string, unknown>> | null | undefined
): boolean => filter == null || containsJson(found ?? {}, filter)
