/**
 * Python's `str.format` over named text values, as DeerFlow's prompt templates are filled (DeerMem's memory prompts,
 * the title prompt): `{name}` is the value of `name`, `{{` and `}}` are literal braces.
 */
import * as Either from "effect/Either"

/**
 * A template rendered as Python's `str.format` renders it: `{name}` is the variable's value, `{{` and `}}` are
 * braces; else why not (an unknown name, a lone brace, or a placeholder with a conversion, a format or an index,
 * which DeerMem's templates never use).
 */
export const format = (
  template: string,
  variables: Readonly<Record<string, string>>
): Either.Either<string, string> => {
  let out = ""
  let i = 0
  while (i < template.length) {
    const c = template[i]!
    if (c === "{" && template[i + 1] === "{") {
      out += "{"
      i += 2
    } else if (c === "}" && template[i + 1] === "}") {
      out += "}"
      i += 2
    } else if (c === "}") {
      return Either.left(`a single '}' at character ${i} (write '}}' for a brace)`)
    } else if (c === "{") {
      const end = template.indexOf("}", i + 1)
      if (end === -1) return Either.left(`a single '{' at character ${i} (write '{{' for a brace)`)
      const name = template.slice(i + 1, end)
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        return Either.left(`the placeholder {${name.slice(0, 40)}} at character ${i} is not a plain {name}`)
      }
      if (!Object.hasOwn(variables, name)) {
        return Either.left(`unknown placeholder {${name}} (known: ${Object.keys(variables).join(", ")})`)
      }
      out += variables[name]!
      i = end + 1
    } else {
      // (one pass over the template: a text of many braces costs no more than one of none)
      let stop = i + 1
      while (stop < template.length && template[stop] !== "{" && template[stop] !== "}") stop++
      out += template.slice(i, stop)
      i = stop
    }
  }
  return Either.right(out)
}
