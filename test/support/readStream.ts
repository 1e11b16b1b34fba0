/**
 * Reading a Node stream in tests: its text until a condition holds of it, or to its end.
 */
import type { Readable } from "node:stream"

/** Reads `stream` until `done` holds of what came so far (or it ends); returns the text. */
export const readUntil = (stream: Readable, done: (text: string) => boolean = () => false) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    const onData = (piece: string) => {
      text += piece
      if (done(text)) {
        stream.off("data", onData)
        stream.pause()
        resolve(text)
      }
    }
    stream.setEncoding("utf8").on("data", onData).once("end", () => resolve(text)).once("error", reject).resume()
  })
