/**
 * Tool-call arguments as the model sends them, read defensively: a JSON object, bounded in size
 * (`MAX_ARGUMENT_CHARS`) and nesting (`MAX_ARGUMENT_DEPTH`) before anything is parsed, so a hostile server
 * cannot exhaust the stack or the heap; whatever is refused says why, in words the model can act on.
 */
import type { JsonObject } from "../../state/Message.js"
import * as Json from "../../state/Json.js"

/** The deepest nesting of objects and arrays accepted in tool-call arguments. */
export const MAX_ARGUMENT_DEPTH = 64

/** The longest tool-call arguments accepted, in characters of JSON. */
export const MAX_ARGUMENT_CHARS = 1_000_000

/**
 * How deep the JSON text nests (outside strings), scanning no further than one level past `limit`: a linear
 * scan without recursion (`Json.nestingDepth`), so a hostile text cannot exhaust the stack before it is rejected.
 */
export const jsonDepth = (raw: string, limit = MAX_ARGUMENT_DEPTH): number => Json.nestingDepth(raw, limit)

/**
 * Parses tool-call arguments: a JSON object (empty text counts as `{}`), or why not. Arguments longer than
 * `MAX_ARGUMENT_CHARS` or nested deeper than `MAX_ARGUMENT_DEPTH` are refused before they are parsed.
 */
export const parseArguments = (raw: string): { readonly args: JsonObject } | { readonly error: string } => {
  if (raw.trim() === "") return { args: {} }
  if (raw.length > MAX_ARGUMENT_CHARS) {
    return {
      error: `The arguments are ${raw.length} characters long; at most ${MAX_ARGUMENT_CHARS} are accepted.`
    }
  }
  if (jsonDepth(raw) > MAX_ARGUMENT_DEPTH) {
    return { error: `The arguments nest more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them.` }
  }
  let value: unknown
  try {
    value = Json.parse(raw)
  } catch (error) {
    return { error: `The arguments are not valid JSON (${(error as Error).message}).` }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`
    return { error: `The arguments must be a JSON object, not ${kind}.` }
  }
  return { args: value as JsonObject }
}

/** How deep a value nests (objects and arrays), counted without recursion and no further than `limit + 1`. */
export const valueDepth = (value: unknown, limit: number): number => {
  let max = 0
  const stack: Array<readonly [unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (typeof node !== "object" || node === null) continue
    if (depth > max) max = depth
    if (max > limit) return max
    for (const child of Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return max
}
