/**
 * Terminal rendering of runs and threads. Pure string building: a renderer turns each run event into the
 * text to write (tokens as they arrive, each tool call as one compact line (`toolLine`), a running command's
 * output as it comes, a clipped result, custom events as one sentence each (`EVENT_SENTENCES`), an error once
 * with its cause, the end with its stop reason); `thread` and `threadList` render saved threads. Colour is a
 * flag: callers set it only for a TTY. `run` writes a run's events to stdout as they arrive, with a status
 * line (`Terminal`) on a terminal.
 *
 * Everything shown comes from a model, a server or a tool, so nothing is shown raw: control characters are
 * made visible (`Redact.controls`: no escape sequence from a model reaches the terminal), secrets and URL
 * credentials are replaced (`Redact`, with the secrets the caller knows), and tool arguments are previewed
 * to a bounded depth and length.
 *
 * This module is the CLI's entry to rendering (writing to the terminal and `run`); the pieces live under
 * `render/`: `Style`, `Text` (clipping and making text safe), `ToolCalls`, `Events` (custom events and a run's
 * end in words), `Human` and `Json` (the two renderers of a run) and `Threads` (saved threads). Each is
 * re-exported from here.
 */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import type { RunEndEvent } from "../../services/RunEvents.js"
import * as Redact from "../../state/Redact.js"
import type { RunEvent as RunEventSchema } from "../../services/RunEvents.js"
type RunEvent = typeof RunEventSchema.Type
import { endLine, isReply } from "./render/Events.js"
import type { RenderOptions } from "./render/Human.js"
import { human } from "./render/Human.js"
import { json } from "./render/Json.js"
import { style } from "./render/Style.js"
import * as Terminal from "./Terminal.js"

export type { EventSentence } from "./render/Events.js"
export {
  discardable,
  endLine,
  EVENT_SENTENCES,
  eventRaw,
  eventSentence,
  interruptText,
  isErrorFallback,
  isReply,
  STOP_REASONS
} from "./render/Events.js"
export type { HumanRenderer, RenderOptions } from "./render/Human.js"
export { human, LIVE_OUTPUT_LINES } from "./render/Human.js"
export { json, jsonLine, latestWrites } from "./render/Json.js"
export type { Style } from "./render/Style.js"
export { style } from "./render/Style.js"
export { clip, preview, safeText } from "./render/Text.js"
export { message, shortTime, statusWords, thread, threadList, todoLines } from "./render/Threads.js"
export { KEY_ARGUMENTS, keyArgument, toolCallLine, toolLine, toolLineParts } from "./render/ToolCalls.js"

// ---------------------------------------------------------------------------------------------------------
// Writing to the terminal

/** Writes to stdout. */
export const write = (text: string): Effect.Effect<void> =>
  text === "" ? Effect.void : Effect.sync(() => void process.stdout.write(text))

/**
 * Writes `value` to stdout as one line of JSON (a `--json` listing). What it holds may come from a model (threads,
 * memory, agents' SOULs): the control characters `JSON.stringify` leaves raw (DEL, C1, bidirectional overrides)
 * are escaped (`Redact.jsonControls`); the JSON means the same.
 */
export const writeJson = (value: unknown): Effect.Effect<void> =>
  Effect.suspend(() => write(`${Redact.jsonControls(JSON.stringify(value))}\n`))

/** Writes to stderr. */
export const writeError = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(text))

/** Whether stdout is a terminal (a status line is drawn only there). */
export const isTerminal = (): boolean => process.stdout.isTTY === true

/** Whether stdout gets colour: only a TTY, and never with `NO_COLOR`. */
export const useColor = (): boolean => isTerminal() && (process.env.NO_COLOR ?? "") === ""

const noEnd: RunEndEvent = {
  type: "run_end",
  status: "error",
  stop_reason: "error",
  error: { name: "Error", message: "the run ended without an end event" }
}

const cancelledEnd: RunEndEvent = { type: "run_end", status: "cancelled", stop_reason: "cancelled" }

/** Options of `run`. */
export interface RunOptions extends Omit<RenderOptions, "color"> {
  /** One JSON object per line instead of text. */
  readonly json: boolean
  readonly threadId: string
  readonly runId: string
  /** Draw a status line (spinner and elapsed time) while the run waits. Default: when stdout is a terminal. */
  readonly status?: boolean | undefined
}

/** How a run went: its end, and whether the model replied (see `discardable`). */
export interface Outcome {
  readonly end: RunEndEvent
  readonly replied: boolean
}

/**
 * Streams a run to stdout (human text, or one JSON object per line with `json`) and returns how it went.
 * On a terminal (not with `json`), a status line shows what the run waits for and for how long.
 * Interrupting it (Ctrl-C) cancels the run: completed steps are saved before the interruption completes,
 * and a last line says so. `redact` hides the caller's secrets from everything written.
 */
export const run = <R>(
  events: Stream.Stream<RunEvent, never, R>,
  options: RunOptions
): Effect.Effect<Outcome, never, R> =>
  Effect.scoped(Effect.gen(function*() {
    const color = useColor()
    const s = style(color)
    const writeOut = (text: string) => void (text === "" || process.stdout.write(text))
    const status = !options.json && (options.status ?? isTerminal())
      ? yield* Terminal.statusLine({ write: writeOut, dim: s.dim })
      : undefined
    const human_ = options.json ? undefined : human({ ...options, color })
    const jsonRender = options.json ? json(options.threadId, options.runId, options.redact) : undefined
    let end: RunEndEvent | undefined
    let replied = false
    const show = (text: string, ended = false) =>
      Effect.sync(() => {
        if (status === undefined) writeOut(text)
        else status.write(text, ended ? undefined : human_?.activity())
      })
    // A log line (stderr, the same terminal) goes on a line of its own: the status line is cleared first.
    const logging = <A, E, R2>(effect: Effect.Effect<A, E, R2>) =>
      status === undefined ? effect : Effect.locallyWith(effect, FiberRef.currentLoggers, HashSet.map((logger) =>
        Logger.make((input) => {
          status.clear()
          return logger.log(input)
        })))
    return yield* Stream.runForEach(events, (event) =>
      Effect.suspend(() => {
        if (event.type === "run_end") end = event
        if (event.type === "message" && isReply(event.message)) replied = true
        return show(human_ !== undefined ? human_(event) : jsonRender!(event))
      })).pipe(
        Effect.map((): Outcome => ({ end: end ?? noEnd, replied })),
        Effect.onInterrupt(() =>
          show(
            options.json
              ? jsonRender!.end(cancelledEnd)
              : `\n${endLine(cancelledEnd, options.threadId, s)}\n`,
            true
          )
        ),
        logging
      )
  }))
