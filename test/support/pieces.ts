/** A text cut into pieces, as a stream may deliver it (for property tests of readers of streamed text). */

/** `text` cut at `points` (each taken modulo the text's length + 1; repeats and order do not matter). */
export const cutAt = (text: string, points: ReadonlyArray<number>): Array<string> => {
  const at = [...new Set(points.map((p) => p % (text.length + 1)))].sort((a, b) => a - b)
  const out: Array<string> = []
  let from = 0
  for (const p of at) {
    out.push(text.slice(from, p))
    from = p
  }
  out.push(text.slice(from))
  return out
}
