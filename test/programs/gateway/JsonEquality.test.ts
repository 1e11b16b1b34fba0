/**
 * The gateway's JSON filters: `sameJson` (equality whatever the order of keys) and `containsJson` (LangGraph's
 * metadata and values filters, PostgreSQL's `jsonb @>`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import { containsJson, matchesFilter, sameJson } from "../../../src/programs/gateway/JsonEquality.js"

const json = FC.jsonValue({ maxDepth: 3 })

/** The same value with every object's keys in reverse order. */
const reordered = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(reordered)
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).reverse().map(([key, item]) => [key, reordered(item)]))
  }
  return value
}

describe("containsJson", () => {
  it.prop("every value contains itself, whatever the order of its keys", [json], ([value]) => {
    assert.isTrue(containsJson(value, value))
    assert.isTrue(containsJson(value, reordered(value)))
    assert.isTrue(sameJson(value, reordered(value)))
  })

  const records = FC.dictionary(FC.string({ maxLength: 6 }), json)
  it.prop("an object contains any part of itself, and not a key it lacks", [records], ([record]) => {
    const keys = Object.keys(record)
    const part = Object.fromEntries(keys.filter((_, i) => i % 2 === 0).map((key) => [key, record[key]]))
    assert.isTrue(containsJson(record, part))
    assert.isTrue(matchesFilter(record, part))
    const missing = `missing-${keys.join("")}`
    assert.isFalse(matchesFilter(record, { ...part, [missing]: null }))
  })

  it("matches as jsonb containment: nested in part, arrays in any order, scalars equal", () => {
    const found = { owner: { team: "ops", name: "ana" }, tags: ["a", "b"], n: 1 }
    assert.isTrue(containsJson(found, { owner: { name: "ana" } }))
    assert.isTrue(containsJson(found, { tags: ["b", "a"] }))
    assert.isFalse(containsJson(found, { tags: ["c"] }))
    assert.isFalse(containsJson(found, { n: "1" }))
    assert.isFalse(containsJson(found, { owner: "ana" }))
    assert.isFalse(containsJson(found, { owner: { team: "ops", name: "bo" } }))
    // a null in the filter wants a null, not a missing key
    assert.isTrue(containsJson({ a: null }, { a: null }))
    assert.isFalse(containsJson({}, { a: null }))
    assert.isTrue(matchesFilter(undefined, {}))
    assert.isTrue(matchesFilter({ a: 1 }, null))
  })
})
