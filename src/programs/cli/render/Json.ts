/**
 * The JSON-lines renderer of a run (`--json`): one event per line, encoded with the event Schema, its strings
 * redacted and the control characters JSON leaves raw escaped; token deltas held back while a secret may be
 * split across them, and the user's message sent once.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { RunEvent as RunEventSchema } from "../../../services/RunEvents.js"
type RunEvent = typeof RunEventSchema.Type
import * as Redact from "../../../state/Redact.js"

/**
 * One run event as a JSON line (encoded with the event Schema), carrying the thread id and run id (and `extra`
 * fields before them). Its strings are redacted (`redact`), and the control characters JSON leaves raw (DEL, C1,
 * bidirectional overrides) are escaped.
 */
export const jsonLine = (
  event: RunEvent,
  threadId: string,
  runId: string,
  redact = Redact.none,
  extra: Readonly<Record<string, unknown>> = {}
): string => {
  const encoded = Either.getOrElse(encodeEvent(event), () => event)
  const { type, ...rest } = redact.value(encoded) as { type: string } & Record<string, unknown>
  return `${Redact.jsonControls(JSON.stringify({ type, ...rest, ...extra, thread_id: threadId, run_id: runId }))}\n`
}

/**
 * A filter of a run's events (stateful) that sends the user's message once: the run writes it, then stamps
 * it (same id, with its name and the run's id and time) at once; only the stamped write is passed on. It holds a
 * human message until the next event; `end` returns what it still holds.
 */
export const latestWrites = () => {
  let held: RunEvent | undefined
  const pass = (event: RunEvent): ReadonlyArray<RunEvent> => {
    const before = held
    held = undefined
    const rewrites = before !== undefined && before.type === "message" && event.type === "message" &&
      event.message.id === before.message.id
    const out = before === undefined || rewrites ? [] : [before]
    if (event.type === "message" && event.message.type === "human") held = event
    else out.push(event)
    return out
  }
  return Object.assign(pass, {
    end: (): ReadonlyArray<RunEvent> => {
      const rest = held === undefined ? [] : [held]
      held = undefined
      return rest
    }
  })
}

/** The run's total token usage on `run_end`, named as the gateway's `GET /api/threads/{id}/token-usage` names it. */
export interface RunUsage {
  readonly total_input_tokens: number
  readonly total_output_tokens: number
  readonly total_tokens: number
}

/**
 * A sum of a run's token usage (stateful): every `token_usage` delta of its state events (the lead agent's calls,
 * its subagents' and the middlewares' own, as the thread's token usage counts them).
 */
export const usageTotal = () => {
  let input = 0
  let output = 0
  let total = 0
  const add = (event: RunEvent): void => {
    if (event.type !== "state") return
    for (const delta of event.update.token_usage ?? []) {
      input += delta.input_tokens
      output += delta.output_tokens
      total += delta.total_tokens
    }
  }
  return Object.assign(add, {
    total: (): RunUsage => ({ total_input_tokens: input, total_output_tokens: output, total_tokens: total })
  })
}

/**
 * A JSON-lines renderer for one run (stateful): like `jsonLine`, but token deltas go through a streaming
 * redactor per message, so a secret split across deltas never appears; what it held back comes as one more
 * token event just before the message (or the end of the run). The user's message is sent once (see
 * `latestWrites`). `run_end` carries the run's total token usage (`usage`, see `RunUsage`); `end(event)` is the
 * line of an end the run did not send (a run stopped with Ctrl-C).
 */
export const json = (threadId: string, runId: string, redact = Redact.none) => {
  const streams = new Map<string, Redact.TextStream>()
  const writes = latestWrites()
  const usage = usageTotal()
  const line = (event: RunEvent) => jsonLine(event, threadId, runId, redact)
  const endLine = (event: RunEvent & { readonly type: "run_end" }) =>
    jsonLine(event, threadId, runId, redact, { usage: usage.total() })
  const flush = (messageId: string) => {
    let text = ""
    for (const kind of ["reasoning", "text"] as const) {
      const stream = streams.get(`${kind}:${messageId}`)
      if (stream === undefined) continue
      streams.delete(`${kind}:${messageId}`)
      const rest = stream.end()
      if (rest !== "") text += line({ type: "token", message_id: messageId, [kind]: rest })
    }
    return text
  }
  const one = (event: RunEvent): string => {
    switch (event.type) {
      case "token": {
        let text = ""
        for (const kind of ["reasoning", "text"] as const) {
          const delta = event[kind]
          if (delta === undefined || delta === "") continue
          const key = `${kind}:${event.message_id}`
          let stream = streams.get(key)
          if (stream === undefined) streams.set(key, stream = redact.stream())
          const shown = stream.push(delta)
          if (shown !== "") text += line({ type: "token", message_id: event.message_id, [kind]: shown })
        }
        return text
      }
      case "message":
        return flush(event.message.id) + line(event)
      case "run_end": {
        let text = ""
        for (const key of [...streams.keys()]) text += flush(key.slice(key.indexOf(":") + 1))
        return text + endLine(event)
      }
      default:
        return line(event)
    }
  }
  return Object.assign(
    (event: RunEvent): string => {
      usage(event)
      return writes(event).map(one).join("")
    },
    { end: endLine }
  )
}

const encodeEvent = Schema.encodeEither(RunEventSchema)
