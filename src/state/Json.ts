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

/**
 * A `\u` escape of a letter of `__proto__` (`_`, `o`, `p`, `r`, `t`), through which a key can spell it. Other
 * escapes are common (a terminal's colours in a tool's output are `\u001b`) and cannot.
 */
const ESCAPED_LETTER = /\\u00(?:5[fF]|6[fF]|7[024])/

/**
 * `JSON.parse`, with every `__proto__` key dropped (at any depth). Throws as `JSON.parse` does.
 *
 * Text that cannot hold such a key is parsed as it is, at `JSON.parse`'s own speed. Other text is parsed, then
 * walked with a stack of its own, not recursively (as a reviver is), so that no nesting, however deep, can
 * overflow the call stack: the keys are deleted in place from the freshly parsed value.
 */
export const parse = (text: string): unknown => {
  const value: unknown = JSON.parse(text)
  if (text.includes(PROTO) || ESCAPED_LETTER.test(text)) dropProtoKeys(value)
  return value
}

/** Deletes every own `__proto__` key of a value parsed by `JSON.parse` (plain objects and arrays only). */
const dropProtoKeys = (root: unknown): void => {
  const stack: Array<unknown> = [root]
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value !== "object" || value === null) continue
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) stack.push(item)
      continue
    }
    const record = value as Record<string, unknown>
    if (Object.hasOwn(record, PROTO)) delete record[PROTO]
    for (const key of Object.keys(record)) {
      const item = record[key]
      if (typeof item === "object" && item !== null) stack.push(item)
    }
  }
}

/**
 * How deeply arrays and objects nest in JSON text (`1` for `[1]`, `2` for `{"a": []}`), counted on the text
 * without parsing it, so that text nested too deeply for what reads the value afterwards (Schema, the store,
 * `JSON.stringify`, all recursive) can be refused before it is parsed. Counting stops past `limit`. Text that
 * is not JSON gets some count; `JSON.parse` refuses it anyway.
 */
export const nestingDepth = (text: string, limit: number = Number.POSITIVE_INFINITY): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (inString) {
      if (code === 92) i++ // a backslash: the next character is escaped
      else if (code === 34) inString = false
    } else if (code === 34) {
      inString = true
    } else if (code === 123 || code === 91) {
      depth++
      if (depth > deepest) {
        deepest = depth
        if (deepest > limit) return deepest
      }
    } else if (code === 125 || code === 93) {
      depth--
    }
  }
  return deepest
}

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

/**
 * The end (exclusive) of the JSON object that starts at `start` (a `{`), by matching braces outside strings;
 * undefined when it never closes.
 */
export const objectEnd = (text: string, start: number): number | undefined => {
  let depth = 0
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === "{") depth++
    else if (c === "}" && --depth === 0) return i + 1
  }
  return undefined
}

const dumps = (value: unknown, sortKeys: boolean): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value)) return `[${value.map((item) => dumps(item, sortKeys)).join(", ")}]`
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined)
  if (sortKeys) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${dumps(v, sortKeys)}`).join(", ")}}`
}

/**
 * The text of Python's `json.dumps(value, sort_keys=True, ensure_ascii=False)`: `", "` and `": "` between items,
 * keys in order, characters as they are. DeerFlow hashes such text and measures sizes by it. With `sortKeys: false`,
 * `json.dumps(value, ensure_ascii=False)`: the keys as the object has them.
 */
export const pythonDumps = (value: unknown): string => dumps(value, true)

/** The text of Python's `json.dumps(value, ensure_ascii=False)`: as `pythonDumps`, keys in their own order. */
export const pythonDumpsUnsorted = (value: unknown): string => dumps(value, false)

/** Whether a parsed value is a JSON object (a mapping: not null, not an array). */
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Every string inside a JSON-like value (arrays and plain objects, at any depth) passed through `f`; the same
 * value (by reference) where nothing changed, so an untouched value costs no copy.
 */
export const mapStrings = <A>(value: A, f: (text: string) => string): A => {
  const walk = (node: unknown): unknown => {
    if (typeof node === "string") return f(node)
    if (Array.isArray(node)) {
      let copy: Array<unknown> | undefined
      for (let i = 0; i < node.length; i++) {
        const next = walk(node[i])
        if (next !== node[i]) (copy ??= [...node])[i] = next
      }
      return copy ?? node
    }
    if (typeof node === "object" && node !== null && Object.getPrototypeOf(node) === Object.prototype) {
      let copy: Record<string, unknown> | undefined
      for (const key of Object.keys(node)) {
        const before = (node as Record<string, unknown>)[key]
        const next = walk(before)
        if (next !== before) (copy ??= { ...(node as Record<string, unknown>) })[key] = next
      }
      return copy ?? node
    }
    return node
  }
  return walk(value) as A
}
