/** A logger that keeps each message's text (`logged`), to provide to what should warn. */
import * as Logger from "effect/Logger"

export const captureLogs = () => {
  const logged: Array<string> = []
  const capture = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => void logged.push((Array.isArray(message) ? message : [message]).join(" ")))
  )
  return { capture, logged }
}
