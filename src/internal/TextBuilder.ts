/**
 * A text built from many small pieces, such as a streamed answer token by token, kept compact while it grows.
 * `text += piece` makes V8 keep a rope: a node of 32 bytes per piece, holding each piece's own string too, until
 * the text is read whole. A 2,000-token answer then takes about 110 KB where its characters take 8 KB, and a run
 * keeps its answer so far in several places. Here the pieces are joined in batches: one node per `BATCH` pieces.
 */

/** Pieces joined at once. */
const BATCH = 64

/** A growing text. */
export interface TextBuilder {
  /** Adds `piece` at the end. */
  readonly append: (piece: string) => void
  /** The text so far. */
  readonly text: () => string
  /** Its length so far, in UTF-16 code units (as `text().length`). */
  readonly length: () => number
}

/** An empty text. */
export const make = (): TextBuilder => {
  let joined = ""
  const pieces: Array<string> = []
  let length = 0
  const settle = () => {
    if (pieces.length === 0) return
    joined += pieces.length === 1 ? pieces[0]! : pieces.join("")
    pieces.length = 0
  }
  return {
    append: (piece) => {
      if (piece === "") return
      length += piece.length
      pieces.push(piece)
      if (pieces.length >= BATCH) settle()
    },
    text: () => {
      settle()
      return joined
    },
    length: () => length
  }
}
