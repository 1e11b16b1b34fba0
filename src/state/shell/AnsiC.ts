/**
 * ANSI-C quoting (`$'…'`): the value of its body, its escapes decoded as bash decodes them (`\n`, `\e`, octal,
 * `\x`, `\u`, `\U`, `\cX`). Part of the shell lexer's reading of words (`ShellLexer`), and of the audit.
 */

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  a: "\u0007",
  b: "\b",
  e: "\u001b",
  E: "\u001b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
  "\\": "\\",
  "'": "'",
  "\"": "\"",
  "?": "?"
}

const codePoint = (digits: string, radix: number): string => {
  const n = Number.parseInt(digits, radix)
  return n <= 0x10ffff ? String.fromCodePoint(n) : ""
}

/** The value of the body of an ANSI-C string (`$'…'`, without its quotes): its escapes decoded as bash does. */
export const decodeAnsiC = (body: string): string => {
  let out = ""
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!
    if (c !== "\\" || i + 1 >= body.length) {
      out += c
      continue
    }
    const e = body[++i]!
    const simple = SIMPLE_ESCAPES[e]
    if (simple !== undefined) {
      out += simple
      continue
    }
    const take = (re: RegExp, max: number) => {
      let digits = ""
      while (digits.length < max && i + 1 < body.length && re.test(body[i + 1]!)) digits += body[++i]
      return digits
    }
    if (/[0-7]/.test(e)) {
      out += codePoint(e + take(/[0-7]/, 2), 8)
    } else if (e === "x" || e === "u" || e === "U") {
      const digits = take(/[0-9A-Fa-f]/, e === "x" ? 2 : e === "u" ? 4 : 8)
      out += digits === "" ? `\\${e}` : codePoint(digits, 16)
    } else if (e === "c" && i + 1 < body.length) {
      out += String.fromCharCode(body[++i]!.toUpperCase().charCodeAt(0) & 0x1f)
    } else out += `\\${e}`
  }
  return out
}
