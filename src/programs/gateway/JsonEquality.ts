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
