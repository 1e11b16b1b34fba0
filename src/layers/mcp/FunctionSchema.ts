/**
 * An MCP tool as DeerFlow's model reads it, both in a request and in `tool_search`'s answer (and as its deferred
 * catalog hashes it): LangChain's `convert_to_openai_function` over the adapter's tool, whose `args_schema` is the
 * server's input schema (`_convert_json_schema_to_openai_function` after `dereference_refs`). `$ref`s into the schema
 * are resolved, `$defs` and `definitions` dropped, the schema's own `title` and `description` taken out (the
 * description stands in for a tool that has none), and every other `title` key dropped, but a property named so.
 */
import type { ToolDefinition } from "../../services/ModelService.js"
import * as Json from "../../state/Json.js"
import type { JsonObject } from "../../state/Message.js"

/** The object a `#/...` pointer names in `root`, as LangChain's `_retrieve_ref` walks it; undefined if none. */
const target = (pointer: string, root: JsonObject): unknown => {
  const parts = pointer.split("/")
  if (parts[0] !== "#") return undefined
  let at: unknown = root
  for (const part of parts.slice(1)) {
    if (Array.isArray(at)) at = /^[0-9]+$/.test(part) && !at.includes(part) ? at[Number(part)] : undefined
    else if (Json.isRecord(at) && Object.hasOwn(at, part)) at = at[part]
    else return undefined
  }
  return at
}

/**
 * The most values a schema's `$ref`s may resolve to: twice what the largest schema taken holds written out (100,000
 * characters of JSON, `Decode`'s bound, at 2 characters a value at least), so a definition referred to from a few
 * places resolves, and definitions each referring twice to the one before (2^n values from n of them: a schema of
 * 2 KB resolved to gigabytes, on the gateway's one thread) are refused.
 */
export const MAX_RESOLVED_VALUES = 100_000

/** Thrown inside `resolve` when the budget is spent, caught by `dereferenced` (never leaves this module). */
class Exhausted {}

/**
 * `value` with its `$ref`s resolved (`_dereference_refs_helper`): a reference inside the one being resolved is cut
 * (the referring object's other keys kept), the referring object's other keys win over the referred ones, `$defs`
 * are copied untouched. A reference LangChain could not resolve (DeerFlow fails the tool) is left as it is. Each
 * value made spends one of `budget.left`.
 */
const resolve = (value: unknown, root: JsonObject, open: ReadonlySet<string>, budget: { left: number }): unknown => {
  if (--budget.left < 0) throw new Exhausted()
  if (Array.isArray(value)) return value.map((item) => resolve(item, root, open, budget))
  if (!Json.isRecord(value)) return value
  const record: JsonObject = value
  const keys = (object: JsonObject): JsonObject => {
    const out: Record<string, unknown> = {}
    for (const [key, v] of Object.entries(object)) out[key] = key === "$defs" ? v : resolve(v, root, open, budget)
    return out
  }
  const pointer = record["$ref"]
  if (typeof pointer !== "string") return keys(record)
  const { $ref: _, ...others } = record
  if (open.has(pointer)) return keys(others)
  const referred = target(pointer, root)
  if (referred === undefined) return keys(record)
  const resolved = resolve(referred, root, new Set([...open, pointer]), budget)
  if (Object.keys(others).length === 0) return resolved
  return { ...(Json.isRecord(resolved) ? resolved : {}), ...keys(others) }
}

/** `schema` with its `$ref`s resolved, or undefined when that makes more than `MAX_RESOLVED_VALUES` values. */
export const dereferenced = (schema: JsonObject): JsonObject | undefined => {
  try {
    return resolve(schema, schema, new Set(), { left: MAX_RESOLVED_VALUES }) as JsonObject
  } catch (error) {
    if (error instanceof Exhausted) return undefined
    throw error
  }
}

/** Every `title` key dropped but a property's named so (`_rm_titles`; lists are not looked into, as there). */
const withoutTitles = (object: JsonObject, parent = ""): JsonObject => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(object)) {
    if (key === "title" && !(Json.isRecord(value) && parent === "properties")) continue
    out[key] = Json.isRecord(value) ? withoutTitles(value, key) : value
  }
  return out
}

/**
 * The definition the model gets of an MCP tool named `name`, described `description` ("" for none), whose input
 * schema is `schema` (one `Decode` took: its references resolve within the bound; one past it is given as it is);
 * `describe` makes the schema's own description fit to stand in for a missing one.
 */
export const definition = (
  name: string,
  description: string,
  schema: JsonObject,
  describe: (text: string) => string
): ToolDefinition => {
  const {
    $defs: _defs,
    definitions: _definitions,
    title: _title,
    description: own,
    ...parameters
  } = dereferenced(schema) ?? schema
  return {
    name,
    description: description !== "" ? description : typeof own === "string" ? describe(own) : "",
    parameters: withoutTitles(parameters)
  }
}
