/**
 * The checkpoint codec of the SQL thread stores (SQLite and PostgreSQL): a step's updates as the JSON text a
 * checkpoint row holds, with configured secrets redacted and values JSON cannot carry refused before they are
 * written; and that text (or a snapshot's) parsed and Schema-decoded when read back, a failure saying what was
 * wrong and where. The file or database is a boundary: another process, an older build or a hand edit may have
 * written it.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import { StoreError } from "../../services/RunContext.js"
import * as FastDecode from "../../internal/FastDecode.js"
import * as Json from "../../state/Json.js"
import type * as Redact from "../../state/Redact.js"
import type { ThreadState } from "../../state/ThreadState.js"
import type * as TS from "../../state/ThreadState.js"

// Schema-decoded with "preserve": provider fields the schemas do not name (a text block's `citations`) must
// survive a reload. FastDecode keeps plain parsed messages as they are, and gives Schema's result otherwise.
const decodeStateUpdates = FastDecode.decodeStateUpdates

const formatPath = (segments: ReadonlyArray<PropertyKey>): string =>
  segments.map((s) => (typeof s === "number" ? `[${s}]` : `.${String(s)}`)).join("") || "(root)"

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max - 3)}...` : text)

/** Renders a decoding failure as `at <path>: <problem>` lines. */
export const formatParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .slice(0, 3)
    .map((issue) => `at ${formatPath(issue.path)}: ${clip(issue.message)}`)
    .join("; ")

/** Parses the JSON text of a row and decodes it; the failure says what was wrong and where. */
const decodeJsonText = <A>(decode: (json: unknown) => Either.Either<A, ParseResult.ParseError>) =>
(text: unknown): Either.Either<A, string> => {
  if (typeof text !== "string") return Either.left(`expected JSON text, found ${text === null ? "NULL" : typeof text}`)
  let json: unknown
  try {
    json = Json.parse(text)
  } catch (error) {
    return Either.left(`not valid JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Either.mapLeft(decode(json), formatParseError)
}

/** Parses and Schema-decodes the text of a checkpoint row; the failure says what was wrong and where. */
export const decodeUpdates: (text: unknown) => Either.Either<ReadonlyArray<TS.StateUpdate>, string> = decodeJsonText(
  decodeStateUpdates
)

/**
 * Whether JSON would not carry a value as it is (NaN, Infinity, undefined, a function), looking where
 * `JSON.stringify` looks: own enumerable keys, array items, not inside what a `toJSON` replaces.
 */
const lossyIn = (value: unknown): boolean => {
  switch (typeof value) {
    case "number":
      return !Number.isFinite(value)
    case "undefined":
    case "function":
      return true
    case "object": {
      if (value === null) return false
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (lossyIn(value[i])) return true
        return false
      }
      if (typeof (value as { readonly toJSON?: unknown }).toJSON === "function") return false
      const record = value as Record<string, unknown>
      for (const key in record) if (Object.hasOwn(record, key) && lossyIn(record[key])) return true
      return false
    }
    default:
      return false
  }
}

/**
 * The JSON text of a checkpoint. Values JSON cannot carry (NaN, Infinity, undefined in an array, functions)
 * are flagged while writing; a flagged checkpoint is decoded once more, and refused when the row could not
 * be loaded again (a `NaN` file size would be `null`), so `append` never writes what `load` would reject.
 */
export const encodeUpdates = (updates: ReadonlyArray<TS.StateUpdate>): Either.Either<string, string> => {
  let text: string
  try {
    // (no replacer: `JSON.stringify` keeps its fast path; the values JSON cannot carry are looked for apart)
    text = JSON.stringify(updates)
  } catch (error) {
    return Either.left(`not representable as JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  if (!lossyIn(updates)) return Either.right(text)
  return Either.match(decodeUpdates(text), {
    onLeft: (problem) => Either.left(`holds a value JSON cannot carry (NaN, Infinity, ...): once written, ${problem}`),
    onRight: () => Either.right(text)
  })
}

/**
 * A step's checkpoint as the stores write it: its JSON text with configured secrets redacted (the common case
 * costs one scan of the text; only a checkpoint holding a secret is rebuilt), and the title it sets, if any.
 * Updates JSON cannot carry are a `StoreError` naming the thread.
 */
export const checkpointOf = (
  threadId: string,
  given: ReadonlyArray<TS.StateUpdate>,
  redactor: Redact.Redactor
): Either.Either<{ readonly text: string; readonly title: string | null | undefined }, StoreError> => {
  let updates = given
  let text = encodeUpdates(updates)
  if (Either.isRight(text) && redactor.test(text.right)) {
    updates = redactor.value(updates)
    text = encodeUpdates(updates)
  }
  return Either.isLeft(text)
    ? Either.left(
      new StoreError({
        operation: "append",
        message: `Cannot save a checkpoint of thread "${threadId}": the step's updates ${text.left}`
      })
    )
    : Either.right({ text: text.right, title: titleOf(updates) })
}

/** The title the updates leave on the thread: `undefined` when none of them sets one. */
export const titleOf = (updates: ReadonlyArray<TS.StateUpdate>): string | null | undefined => {
  for (let i = updates.length - 1; i >= 0; i--) {
    const title = updates[i]!.title
    if (title !== undefined) return title
  }
  return undefined
}

const decodeThreadState = FastDecode.decodeThreadState

/** Parses and Schema-decodes the text of a snapshot row. */
export const decodeSnapshot: (text: unknown) => Either.Either<ThreadState, string> = decodeJsonText(decodeThreadState)
