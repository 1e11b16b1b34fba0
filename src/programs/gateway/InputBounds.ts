/**
 * The bounds on what a request adds to a thread's messages (`gateway.max_message_bytes`, `max_run_input_bytes`):
 * each message of a run's `input` (and its `command.resume`, which becomes a message) and of a state update, and a
 * run's `input` and `command` together, as bytes of JSON. A message is kept in the thread's checkpoints, in its run's
 * `kwargs` and in every state of its history after it, so its size is refused at the boundary, before anything is
 * decoded further or stored: a 413 naming the field and the bound.
 */
import { isRecord } from "../../state/Json.js"
import { formatBytes } from "../Upload.js"

/** The bounds, in bytes of JSON (UTF-8). */
export interface Bounds {
  /** One message (`gateway.max_message_bytes`). */
  readonly maxMessageBytes: number
  /** A run's `input` and `command` together (`gateway.max_run_input_bytes`). */
  readonly maxInputBytes: number
}

/** The defaults of `gateway.max_message_bytes` and `gateway.max_run_input_bytes`. */
export const DEFAULTS: Bounds = { maxMessageBytes: 2 * 1024 ** 2, maxInputBytes: 4 * 1024 ** 2 }

/** The bounds of the gateway's configuration. */
export const fromConfig = (
  gateway: { readonly max_message_bytes: number; readonly max_run_input_bytes: number }
): Bounds => ({ maxMessageBytes: gateway.max_message_bytes, maxInputBytes: gateway.max_run_input_bytes })

/** The bytes of `value` as JSON (0 for what JSON leaves out). */
export const jsonBytes = (value: unknown): number => {
  const text = JSON.stringify(value)
  return text === undefined ? 0 : Buffer.byteLength(text)
}

const tooLarge = (where: string, size: number, key: string, limit: number, what: string) =>
  `${where}: ${size} bytes of JSON, more than gateway.${key} (${limit}, ${formatBytes(limit)}), the most ${what}.`

/**
 * Why the messages `list` (raw, as sent; `where` names the list, e.g. `input.messages`) are too large, if one is:
 * the first message past `maxMessageBytes`, named by its index.
 */
export const messagesProblem = (list: unknown, where: string, bounds: Bounds): string | undefined => {
  if (!Array.isArray(list)) return undefined
  for (const [index, message] of list.entries()) {
    const size = jsonBytes(message)
    if (size > bounds.maxMessageBytes) {
      return tooLarge(`${where}.${index}`, size, "max_message_bytes", bounds.maxMessageBytes, "one message holds")
    }
  }
  return undefined
}

/**
 * Why a message of a run request is too large, if one is: a message of `input.messages`, or `command.resume` (it
 * becomes the answer message), past `maxMessageBytes`.
 */
export const runMessagesProblem = (
  request: { readonly input?: unknown; readonly command?: unknown },
  bounds: Bounds
): string | undefined => {
  const messages = isRecord(request.input) ? request.input.messages : undefined
  const message = messagesProblem(messages, "input.messages", bounds)
  if (message !== undefined) return message
  const resume = isRecord(request.command) ? jsonBytes(request.command.resume) : 0
  return resume > bounds.maxMessageBytes
    ? tooLarge("command.resume", resume, "max_message_bytes", bounds.maxMessageBytes, "one message holds")
    : undefined
}

/** Why a run request's `input` and `command` are too large together (past `maxInputBytes`), if they are. */
export const runInputProblem = (
  request: { readonly input?: unknown; readonly command?: unknown },
  bounds: Bounds
): string | undefined =>
  totalProblem([request.input, request.command], request.command == null ? "input" : "input and command", bounds)

/** Why `values` (what one request adds to a thread; `where` names them) are too large together, if they are. */
export const totalProblem = (values: ReadonlyArray<unknown>, where: string, bounds: Bounds): string | undefined => {
  const size = values.reduce<number>((sum, value) => sum + jsonBytes(value), 0)
  return size <= bounds.maxInputBytes
    ? undefined
    : tooLarge(where, size, "max_run_input_bytes", bounds.maxInputBytes, "a run's input holds")
}
