/** A logger that keeps each message's text (`logged`; `only` warnings if asked), to provide to what should warn. */
import * as Logger from "effect/Logger"

export const captureLogs = (only?: "Warning") => {
  const logged: Array<string> = []
  const capture = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) => {
      if (only === undefined || logLevel._tag === only) {
        logged.push((Array.isArray(message) ? message : [message]).join(" "))
      }
    })
  )
  return { capture, logged }
}
