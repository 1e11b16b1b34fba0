/**
 * JSON from outside the process (a model's tool arguments, a request body, a server's answer, a file), without
 * `__proto__` keys.
 *
 * `JSON.parse` keeps a `__proto__` key as an own property, which is harmless in itself. But the next copy turns
 * it into a prototype. Schema, decoding a record, assigns each key (`out[key] = value`), and so does
 * `Object.assign`. The copy then inherits whatever keys the sender put under `__proto__`, unseen by
 * `Object.keys` and by every check that looks at own keys, yet read by `value.key`. A message's
 * `additional_kwargs` could carry server-owned marks that way (`hide_from_ui`, the date reminder's mark).
 * No JSON we accept has a use for such a key, so it is dropped where the text is parsed.
 */

const PROTO = "__proto__"

const reviver = (key: string, value: unknown): unknown => (key === PROTO ? undefined : value)

/**
 * A `\u` escape of a letter of `__proto__` (`_`, `o`, `p`, `r`, `t`), through which a key can spell it. Other
 * escapes are common (a terminal's colours in a tool's output are `\u001b`) and cannot.
 */
const ESCAPED_LETTER = /\\u00(?:5[fF]|6[fF]|7[024])/

/**
 * `JSON.parse`, with every `__proto__` key dropped (at any depth). Throws as `JSON.parse` does.
 *
 * Text that cannot hold such a key is parsed without a reviver, at `JSON.parse`'s own speed (a reviver makes a
 * megabyte of JSON take five times as long).
 */
export const parse = (text: string): unknown =>
  text.includes(PROTO) || ESCAPED_LETTER.test(text) ? JSON.parse(text, reviver) : JSON.parse(text)

/**
 * A value without `__proto__` own keys, at any depth: the value itself when it has none, else a copy of the
 * arrays and plain objects on the way to them. For values parsed by something other than `JSON.parse` (YAML).
 */
export const withoutProto = <A>(value: A): A => strip(value, 0) as A

// (deeper than any document we read; a cycle, which YAML aliases can make, stops here too)
const MAX_DEPTH = 1000

const strip = (value: unknown, depth: number): unknown => {
  if (typeof value !== "object" || value === null || depth > MAX_DEPTH) return value
  if (Array.isArray(value)) {
    let out: Array<unknown> | undefined
    for (let i = 0; i < value.length; i++) {
      const item = strip(value[i], depth + 1)
      if (item !== value[i]) (out ??= value.slice())[i] = item
    }
    return out ?? value
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const record = value as Record<string, unknown>
  let out: Record<string, unknown> | undefined = Object.hasOwn(record, PROTO) ? copyWithout(record) : undefined
  for (const key of Object.keys(record)) {
    if (key === PROTO) continue
    const item = strip(record[key], depth + 1)
    if (item !== record[key]) {
      out ??= copyWithout(record)
      out[key] = item
    }
  }
  return out ?? value
}

/** A plain copy of a record's own keys, `__proto__` left out. */
const copyWithout = (record: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(record)) if (key !== PROTO) out[key] = record[key]
  return out
}
