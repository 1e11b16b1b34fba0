/**
 * A status line for a terminal: while a run waits (for the model, for a tool), a spinner with what it waits
 * for and for how long (`⠹ waiting for gpt-4o-mini · 3.2s`), redrawn ten times a second on the line below
 * the output. Whatever is written goes through it: the status line is cleared first and drawn again after,
 * only when the output ends with a line end (so it never breaks a line being streamed). For terminals only:
 * the CLI never makes one for a pipe or for `--json`.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

/** The spinner's frames. */
export const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"] as const

/** How long something has taken, for people: `0.4s`, `12.0s`, `2m 05s`. */
export const elapsed = (ms: number): string => {
  if (ms < 60_000) return `${(Math.max(0, ms) / 1000).toFixed(1)}s`
  const seconds = Math.floor(ms / 1000)
  return `${Math.floor(seconds / 60)}m ${String(seconds % 60).padStart(2, "0")}s`
}

/** The text of the status line: a spinner frame, what it waits for, and for how long. */
export const statusText = (label: string, ms: number, frame: number): string =>
  `${FRAMES[frame % FRAMES.length]} ${label} · ${elapsed(ms)}`

// Styling codes that close a styled line after its line end (`\x1b[2m...\n\x1b[22m`).
const TRAILING_STYLE = /(?:\x1b\[[0-9;]*m)+$/

// Back to the start of the line and erase it (no colour: this is cursor control, sent to terminals only).
const CLEAR = "\r\x1b[2K"

/** A status line over a writer. */
export interface StatusLine {
  /** Writes `text` (the status line cleared before, drawn after), then shows `activity` (none: no line). */
  readonly write: (text: string, activity: string | undefined) => void
  /** Clears the status line (it comes back with the next `write` that has an activity). */
  readonly clear: () => void
}

/** Options of a status line. */
export interface Options {
  /** Writes to the terminal, synchronously. */
  readonly write: (text: string) => void
  /** Dims the status text (colour on). */
  readonly dim?: (text: string) => string
  /** Redraw interval, milliseconds (default 100). */
  readonly intervalMs?: number
}

/**
 * A status line that redraws itself on a fiber of the scope until the scope closes (which clears it).
 * Elapsed times come from the `Clock`.
 */
export const statusLine = (options: Options): Effect.Effect<StatusLine, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const dim = options.dim ?? ((text: string) => text)
    let label: string | undefined
    let since = 0
    let frame = 0
    let drawn = false
    let atLineStart = true
    const clear = () => {
      if (!drawn) return
      options.write(CLEAR)
      drawn = false
    }
    const draw = () => {
      if (label === undefined || !atLineStart) return
      options.write(`${CLEAR}${dim(statusText(label, clock.unsafeCurrentTimeMillis() - since, frame++))}`)
      drawn = true
    }
    const line: StatusLine = {
      write: (text, activity) => {
        if (text !== "") {
          clear()
          options.write(text)
          atLineStart = text.replace(TRAILING_STYLE, "").endsWith("\n")
        }
        if (activity !== label) {
          label = activity
          since = clock.unsafeCurrentTimeMillis()
          if (label === undefined) clear()
        }
        if (!drawn || text !== "") draw()
      },
      clear
    }
    yield* Effect.addFinalizer(() => Effect.sync(clear))
    yield* Effect.sync(draw).pipe(
      Effect.repeat(Schedule.spaced(Duration.millis(options.intervalMs ?? 100))),
      Effect.forkScoped
    )
    return line
  })
