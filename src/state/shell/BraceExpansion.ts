/**
 * Brace expansion of an unquoted word, as bash does it before a command runs (`{rm,-rf,/}` is three words),
 * bounded in depth, in the words it makes and in the length of the word. Used by the shell lexer
 * (`ShellLexer`) on every unquoted word.
 */

/** How many words a brace expansion may make before it is left unexpanded. */
const MAX_BRACE_WORDS = 64
/** Longer words are not expanded (a command is short; expanding is quadratic in the word). */
const MAX_BRACE_WORD = 512

/**
 * The words bash makes of an unquoted word with a brace list (`{rm,-rf,/}` is `rm -rf /`, `f{,.bak}` is
 * `f f.bak`), or `undefined` when there is none (or it would make more than 64 words). Sequences
 * (`{1..3}`) are not expanded: they cannot spell a command.
 */
export const expandBraces = (word: string): ReadonlyArray<string> | undefined => {
  if (!word.includes(",") || /['"\\$`]/.test(word) || word.length > MAX_BRACE_WORD) return undefined
  const out = expandFrom(word, 0)
  return out === undefined || out.length < 2 ? undefined : out
}

const expandFrom = (word: string, depth: number): Array<string> | undefined => {
  if (depth > 8) return undefined
  for (let open = word.indexOf("{"); open !== -1; open = word.indexOf("{", open + 1)) {
    let level = 0
    const commas: Array<number> = []
    let close = -1
    for (let i = open; i < word.length && close === -1; i++) {
      if (word[i] === "{") level++
      else if (word[i] === "}") {
        level--
        if (level === 0) close = i
      } else if (word[i] === "," && level === 1) commas.push(i)
    }
    if (close === -1) continue
    if (commas.length === 0) continue
    const prefix = word.slice(0, open)
    const suffix = word.slice(close + 1)
    const bounds = [open, ...commas, close]
    const out: Array<string> = []
    for (let k = 0; k + 1 < bounds.length; k++) {
      const alternatives = expandFrom(word.slice(bounds[k]! + 1, bounds[k + 1]), depth + 1)
      if (alternatives === undefined) return undefined
      for (const alternative of alternatives) {
        const rest = expandFrom(prefix + alternative + suffix, depth + 1)
        if (rest === undefined) return undefined
        out.push(...rest)
        if (out.length > MAX_BRACE_WORDS) return undefined
      }
    }
    return out
  }
  return [word]
}
