/**
 * DeerFlow test_deferred_catalog.py, the cases of `tool_search`'s query the model would see answered: an invalid
 * regular expression is matched as literal text (and finds a description that has it), an empty query and a bare
 * `+` find nothing (no error, no whole catalog), and the catalog's hash follows its membership.
 */
import { assert, describe, it } from "@effect/vitest"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import type { ToolDefinition } from "../../src/services/ModelService.js"

const def = (name: string, description: string): ToolDefinition => ({
  name,
  description,
  parameters: { type: "object", properties: { q: { type: "string" } } }
})

const alpha = def("alpha_search", "Search the alpha index.")
const beta = def("beta_translate", "Translate text with beta.")
const calc = def("calc", "Compute sum(a, b) style expressions.")
const names = (catalog: ReadonlyArray<ToolDefinition>, query: string) =>
  DeferredToolFilter.search(catalog, query).map((tool) => tool.name)

describe("test_deferred_catalog.py", () => {
  it("an invalid regex falls back to a literal match: sum( finds calc, zzz( finds nothing", () => {
    assert.deepStrictEqual(names([calc, alpha], "sum("), ["calc"])
    assert.deepStrictEqual(names([calc, alpha], "zzz("), [])
  })

  it("an empty query and a bare + find nothing, whatever the spaces", () => {
    for (const query of ["", "   ", "+", " + ", "+   "]) assert.deepStrictEqual(names([alpha, beta], query), [], query)
  })

  it("+keyword requires the keyword in the name; a regex finds descriptions too", () => {
    assert.deepStrictEqual(names([alpha, beta], "+beta"), ["beta_translate"])
    assert.include(names([alpha, beta], "Translate.*beta"), "beta_translate")
  })

  it("the hash is stable across instances and changes with membership", () => {
    assert.strictEqual(DeferredToolFilter.catalogHash([alpha, beta]), DeferredToolFilter.catalogHash([alpha, beta]))
    assert.notStrictEqual(DeferredToolFilter.catalogHash([alpha, beta]), DeferredToolFilter.catalogHash([alpha]))
  })
})
