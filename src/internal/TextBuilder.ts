/**
 * A text built from many small pieces, such as a streamed answer token by token, kept compact while it grows.
 * `text += piece` makes V8 keep a rope: a node of 32 bytes per piece, holding each piece's own string too, until
 * the text is read whole. A 2,000-token answer then takes about 110 KB where its characters take 8 KB, and a run
 * keeps its answer so far in several places. Here the pieces are joined in batches: one node per `BATCH` pieces.
 */

/** Pieces joined at once. */
const BATCH = 64

/** A growing text (a class: one small object per text, its methods shared, as texts are made per message). */
export class TextBuilder {
  private joined = ""
  private readonly pieces: Array<string> = []
  private size = 0

  /** Adds `piece` at the end. */
  append(piece: string): void {
    if (piece === "") return
    this.size += piece.length
    this.pieces.push(piece)
    if (this.pieces.length >= BATCH) this.settle()
  }

  /** The text so far. */
  text(): string {
    this.settle()
    return this.joined
  }

  /** Its length so far, in UTF-16 code units (as `text().length`). */
  length(): number {
    return this.size
  }

  private settle(): void {
    const pieces = this.pieces
    if (pieces.length === 0) return
    this.joined += pieces.length === 1 ? pieces[0]! : pieces.join("")
    pieces.length = 0
  }
}

/** An empty text. */
export const make = (): TextBuilder => new TextBuilder()
