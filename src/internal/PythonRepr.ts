/**
 * Python's `repr` of a string, as DeerFlow's f-strings print it (`{value!r}`): the model reads DeerFlow's words,
 * quotes included.
 */

/** A string as Python's `repr` writes it: single quotes unless it holds one and no double quote; escapes. */
export const stringRepr = (text: string): string => {
  const quote = text.includes("'") && !text.includes("\"") ? "\"" : "'"
  let out = quote
  for (const ch of text) {
    const code = ch.codePointAt(0)!
    if (ch === "\\" || ch === quote) out += `\\${ch}`
    else if (ch === "\n") out += "\\n"
    else if (ch === "\r") out += "\\r"
    else if (ch === "\t") out += "\\t"
    // what Python does not print as is (control, format, separators other than the space, unassigned)
    else if (ch !== " " && /[\p{C}\p{Z}]/u.test(ch)) {
      out += code < 0x100
        ? `\\x${code.toString(16).padStart(2, "0")}`
        : code < 0x10000
        ? `\\u${code.toString(16).padStart(4, "0")}`
        : `\\U${code.toString(16).padStart(8, "0")}`
    } else out += ch
  }
  return out + quote
}
