/**
 * The keys of `config.yaml` as its schema knows them: a key's path as messages name it (`models[].name`), the keys
 * of a file that the schema does not know (reported as ignored, as DeerFlow ignores them), and the keys beside a
 * path (for a "did you mean").
 */
import type * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import { AppConfigSchema } from "../../services/AppConfig.js"
import * as Json from "../../state/Json.js"

/** Appends a key to a dotted path: `a` + `b` → `a.b`, `a` + 0 → `a[0]`. */
export const joinPath = (path: string, key: string | number | symbol): string =>
  typeof key === "number" ? `${path}[${key}]` : path === "" ? String(key) : `${path}.${String(key)}`

interface Shape {
  /** Known keys and the schemas of their values; `undefined` when the node is not a mapping. */
  readonly keys: Map<string, Array<AST.AST>> | undefined
  /** The mapping accepts any key (a record). */
  readonly open: boolean
  /** Schemas of list elements. */
  readonly elements: Array<AST.AST>
}

const shapeOf = (ast: AST.AST, shape: Shape = { keys: undefined, open: false, elements: [] }): Shape => {
  switch (ast._tag) {
    case "Transformation":
      return shapeOf(ast.from, shape)
    case "Refinement":
      return shapeOf(ast.from, shape)
    case "Suspend":
      return shapeOf(ast.f(), shape)
    case "Union":
      return ast.types.reduce<Shape>((acc, member) => shapeOf(member, acc), shape)
    case "TypeLiteral": {
      const keys = shape.keys ?? new Map<string, Array<AST.AST>>()
      for (const property of ast.propertySignatures) {
        const name = String(property.name)
        keys.set(name, [...(keys.get(name) ?? []), property.type])
      }
      return { keys, open: shape.open || ast.indexSignatures.length > 0, elements: shape.elements }
    }
    case "TupleType":
      return {
        ...shape,
        elements: [...shape.elements, ...ast.elements.map((e) => e.type), ...ast.rest.map((r) => r.type)]
      }
    default:
      return shape
  }
}

const shapeOfAll = (asts: ReadonlyArray<AST.AST>): Shape =>
  asts.reduce<Shape>((acc, ast) => shapeOf(ast, acc), { keys: undefined, open: false, elements: [] })

/**
 * The keys present in a raw config value that the schema does not read, as dotted paths (`memory`,
 * `uploads.pdf_converter`, `models[].max_retries`), in file order and without duplicates.
 */
export const ignoredKeys = (raw: unknown, schema: Schema.Schema.Any = AppConfigSchema): ReadonlyArray<string> => {
  const out = new Set<string>()
  const walk = (node: unknown, asts: ReadonlyArray<AST.AST>, path: string) => {
    const shape = shapeOfAll(asts)
    if (Array.isArray(node)) {
      if (shape.elements.length > 0) for (const item of node) walk(item, shape.elements, `${path}[]`)
      return
    }
    if (!Json.isRecord(node) || shape.keys === undefined || shape.open) return
    for (const [key, value] of Object.entries(node)) {
      const known = shape.keys.get(key)
      if (known === undefined) out.add(joinPath(path, key))
      else walk(value, known, joinPath(path, key))
    }
  }
  walk(raw, [schema.ast], "")
  return [...out]
}

/**
 * The keys the schema reads in the mapping that holds an ignored key (`models[].api_kye`: a model entry's keys), to
 * name the one a typo meant; none when the path leads nowhere the schema knows.
 */
export const keysBeside = (path: string, schema: Schema.Schema.Any = AppConfigSchema): ReadonlyArray<string> => {
  let asts: ReadonlyArray<AST.AST> = [schema.ast]
  for (const part of path.split(".").slice(0, -1)) {
    const [, name = "", lists = ""] = /^(.*?)((?:\[\])*)$/.exec(part) ?? []
    const known = shapeOfAll(asts).keys?.get(name)
    if (known === undefined) return []
    asts = known
    for (let depth = 0; depth < lists.length / 2; depth++) asts = shapeOfAll(asts).elements
  }
  return [...(shapeOfAll(asts).keys?.keys() ?? [])]
}
