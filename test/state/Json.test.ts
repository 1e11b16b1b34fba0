import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { isDeepStrictEqual } from "node:util"
import * as Json from "../../src/state/Json.js"

const PROTO = "__proto__"

/** Whether a `__proto__` own key, or an object that is not a plain one, is anywhere in the value. */
const tainted = (value: unknown): boolean => {
  if (typeof value !== "object" || value === null) return false
  if (Array.isArray(value)) return value.some(tainted)
  if (Object.getPrototypeOf(value) !== Object.prototype || Object.hasOwn(value, PROTO)) return true
  return Object.values(value).some(tainted)
}

/** The value without its `__proto__` own keys: what the functions must give (a plain reference version). */
const reference = (value: unknown): unknown => {
  if (typeof value !== "object" || value === null) return value
  if (Array.isArray(value)) return value.map(reference)
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) if (key !== PROTO) out[key] = reference(item)
  return out
}

/**
 * JSON text of a value in which some objects carry an extra `__proto__` member (spelt plainly or with `\u`
 * escapes), anywhere among their members.
 */
const withProtoKeys = FC.record({
  value: FC.jsonValue(),
  payloads: FC.array(FC.jsonValue(), { maxLength: 4 }),
  where: FC.array(FC.nat(), { minLength: 4, maxLength: 4 }),
  // which letters of the key are written as `\u` escapes, in lower- or upper-case hex
  escaped: FC.array(FC.constantFrom("plain", "lower", "upper"), { minLength: PROTO.length, maxLength: PROTO.length })
}).map(({ escaped, payloads, value, where }) => {
  const key = [...PROTO].map((char, i) => {
    const hex = char.charCodeAt(0).toString(16).padStart(4, "0")
    return escaped[i] === "plain" ? char : `\\u${escaped[i] === "upper" ? hex.toUpperCase() : hex}`
  }).join("")
  let n = 0
  const render = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(render).join(",")}]`
    if (typeof v !== "object" || v === null) return JSON.stringify(v)
    const members = Object.entries(v).map(([k, item]) => `${JSON.stringify(k)}:${render(item)}`)
    if (n < payloads.length) {
      members.splice(where[n]! % (members.length + 1), 0, `"${key}":${JSON.stringify(payloads[n])}`)
      n++
    }
    return `{${members.join(",")}}`
  }
  return { text: render(value), value }
})

describe("Json.parse", () => {
  it.prop("is JSON.parse on text without __proto__ keys", [FC.jsonValue()], ([value]) => {
    const text = JSON.stringify(value)
    assert.isTrue(isDeepStrictEqual(Json.parse(text), reference(JSON.parse(text))))
  })

  it.prop("drops every __proto__ key, however spelt, and keeps the rest", [withProtoKeys], ([{ text, value }]) => {
    const parsed = Json.parse(text)
    assert.isFalse(tainted(parsed), text)
    assert.isTrue(isDeepStrictEqual(parsed, reference(JSON.parse(JSON.stringify(value)))), text)
  })

  it("drops the key with any one of its letters escaped, in either case", () => {
    for (let i = 0; i < PROTO.length; i++) {
      for (const upper of [false, true]) {
        const hex = PROTO.charCodeAt(i).toString(16).padStart(4, "0")
        const key = `${PROTO.slice(0, i)}\\u${upper ? hex.toUpperCase() : hex}${PROTO.slice(i + 1)}`
        const text = `{"a": 1, "${key}": {"polluted": true}}`
        assert.strictEqual(Object.keys(JSON.parse(text)).length, 2, text)
        assert.deepStrictEqual(Json.parse(text), { a: 1 }, text)
      }
    }
    // other escapes take the fast path and stay as they are
    assert.deepStrictEqual(Json.parse(`{"c": "\\u001b[31m"}`), { c: "\x1b[31m" })
  })

  it("refuses what JSON.parse refuses", () => {
    assert.throws(() => Json.parse("{"))
    assert.throws(() => Json.parse(`{"__proto__": }`))
  })

  it("without it, Schema turns the key into a prototype: the attack it stops", () => {
    const text = `{"a": 1, "__proto__": {"hide_from_ui": true}}`
    const decode = Schema.decodeUnknownSync(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
    const forged = decode(JSON.parse(text)) as Record<string, unknown>
    assert.deepStrictEqual(Object.keys(forged), ["a"])
    assert.strictEqual(forged.hide_from_ui, true)
    const safe = decode(Json.parse(text)) as Record<string, unknown>
    assert.strictEqual(safe.hide_from_ui, undefined)
    assert.strictEqual(Object.getPrototypeOf(safe), Object.prototype)
    assert.strictEqual((Object.assign({}, JSON.parse(text)) as Record<string, unknown>).hide_from_ui, true)
    assert.strictEqual((Object.assign({}, Json.parse(text)) as Record<string, unknown>).hide_from_ui, undefined)
  })
})

/** How deeply arrays and objects nest in a value (a reference version of `Json.nestingDepth`). */
const depthOf = (value: unknown): number =>
  typeof value !== "object" || value === null
    ? 0
    : 1 + Math.max(0, ...(Array.isArray(value) ? value : Object.values(value)).map(depthOf))

describe("Json.parse of deeply nested text", () => {
  it("drops __proto__ keys from text nested 100,000 deep without overflowing the stack", () => {
    const depth = 100_000
    const text = `{"__proto__": {"hide_from_ui": true}, "a": ${"[".repeat(depth)}{"__proto__": 1, "b": 2}${
      "]".repeat(depth)
    }}`
    const parsed = Json.parse(text) as Record<string, unknown>
    assert.isFalse(Object.hasOwn(parsed, PROTO))
    assert.strictEqual(parsed.hide_from_ui, undefined)
    let inner: unknown = parsed.a
    for (let i = 0; i < depth; i++) inner = (inner as Array<unknown>)[0]
    assert.deepStrictEqual(Object.keys(inner as object), ["b"])
  })
})

describe("Json.nestingDepth", () => {
  it.prop("is the nesting depth of the value the text holds", [FC.jsonValue()], ([value]) => {
    const text = JSON.stringify(value, null, 1)
    assert.strictEqual(Json.nestingDepth(text), depthOf(value), text)
  })

  it("ignores brackets and escaped quotes inside strings", () => {
    const text = String.raw`{"a": "[[[{{\"]]]", "b": ["\\", [1]]}`
    assert.deepStrictEqual(JSON.parse(text), { a: "[[[{{\"]]]", b: ["\\", [1]] })
    assert.strictEqual(Json.nestingDepth(text), 3)
    assert.strictEqual(Json.nestingDepth(`"{[{["`), 0)
  })

  it("stops counting past the limit", () => {
    const text = "[".repeat(1_000_000) + "]".repeat(1_000_000)
    assert.strictEqual(Json.nestingDepth(text, 100), 101)
    assert.strictEqual(Json.nestingDepth(text), 1_000_000)
  })
})

describe("Json.withoutProto", () => {
  it.prop("returns a value without __proto__ keys as it is (the same object)", [FC.jsonValue()], ([value]) => {
    const parsed = Json.parse(JSON.stringify(value))
    assert.strictEqual(Json.withoutProto(parsed), parsed)
  })

  it.prop("drops own __proto__ keys at any depth without touching its input", [withProtoKeys], ([{ text, value }]) => {
    // JSON.parse keeps them as own keys, as a YAML parser does
    const input = JSON.parse(text)
    const before = JSON.stringify(input)
    const out = Json.withoutProto(input)
    assert.isFalse(tainted(out), text)
    assert.isTrue(isDeepStrictEqual(out, reference(input)), text)
    assert.strictEqual(JSON.stringify(input), before)
  })

  it("leaves class instances and cycles alone", () => {
    const date = new Date(0)
    assert.strictEqual(Json.withoutProto(date), date)
    const cycle: Record<string, unknown> = { a: 1 }
    cycle.self = cycle
    assert.strictEqual(Json.withoutProto(cycle), cycle)
  })
})

describe("mapStrings", () => {
  const json = FC.jsonValue({ maxDepth: 6 })
  /** The value with `f` applied to each string: the plain reference version. */
  const mapped = (value: unknown, f: (text: string) => string): unknown => {
    if (typeof value === "string") return f(value)
    if (Array.isArray(value)) return value.map((item) => mapped(item, f))
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapped(item, f)]))
    }
    return value
  }

  it.prop("applies f to every string and to nothing else, leaving the input as it was", [json], ([value]) => {
    const before = structuredClone(value)
    const upper = (text: string) => text.toUpperCase() + "!"
    assert.deepStrictEqual(Json.mapStrings(value, upper), mapped(value, upper))
    assert.deepStrictEqual(value, before)
  })

  it.prop("gives the same value by reference where f changes nothing", [json], ([value]) => {
    assert.strictEqual(Json.mapStrings(value, (text) => text), value)
  })

  it("copies only the branches that changed", () => {
    const kept = { a: ["x", 1] }
    const value = { kept, changed: { b: "secret" } }
    const out = Json.mapStrings(value, (text) => text.replace("secret", "[redacted]"))
    assert.deepStrictEqual(out, { kept, changed: { b: "[redacted]" } })
    assert.strictEqual(out.kept, kept)
  })
})
