/**
 * The wait a provider asks for (pure): `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an
 * HTTP date measured from the caller's Clock), header names matched case-insensitively.
 */

/** A header's value, by its lower-case name, whatever case the provider sent it in. */
const header = (headers: Readonly<Record<string, string>> | undefined, name: string): string | undefined => {
  if (headers === undefined) return undefined
  const direct = headers[name]
  if (direct !== undefined) return direct
  for (const key in headers) if (key.toLowerCase() === name) return headers[key]
  return undefined
}

/**
 * The wait the provider asked for, in ms: `retry-after-ms` (milliseconds), else `retry-after` (seconds, or
 * an HTTP date measured from `now`). `undefined` when absent or unreadable.
 */
export const retryAfterMs = (
  headers: Readonly<Record<string, string>> | undefined,
  now: number
): number | undefined => {
  const ms = header(headers, "retry-after-ms")?.trim()
  if (ms !== undefined && ms !== "") {
    const value = Number(ms)
    if (Number.isFinite(value)) return Math.max(0, Math.ceil(value))
  }
  const after = header(headers, "retry-after")?.trim()
  if (after === undefined || after === "") return undefined
  const seconds = Number(after)
  if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds * 1000))
  const date = Date.parse(after)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, date - now)
}
