/**
 * The field kinds the configuration's sections share: a nullable field with a default, numbers, and a model
 * server's address with its readable refusal.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** An optional field that may also be `null`, taking `value()` when absent or null. */
export const withDefault = <S extends Schema.Schema.Any>(schema: S, value: () => Schema.Schema.Type<S>) =>
  Schema.optionalWith(schema, { default: value as any, nullable: true }) as Schema.optionalWith<
    S,
    { default: () => Schema.Schema.Type<S>; nullable: true }
  >

export const PositiveInt = Schema.Number.pipe(Schema.int(), Schema.positive())
export const NonNegativeInt = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
export const Fraction = Schema.Number.pipe(Schema.between(0, 1))

/**
 * A positive whole number, also written as its digits (`"1048576"`, and what a `$VAR` gives, which is text once
 * read), as DeerFlow's gateway reads its `uploads:` limits (`int(value)`). Other text is refused, naming it.
 */
export const PositiveIntOrDigits = Schema.transformOrFail(Schema.Union(Schema.Number, Schema.String), PositiveInt, {
  strict: true,
  decode: (value, _, ast) =>
    typeof value === "number"
      ? ParseResult.succeed(value)
      : /^\s*\+?\d+\s*$/.test(value)
      ? ParseResult.succeed(Number(value.trim()))
      : ParseResult.fail(new ParseResult.Type(ast, value, `expected a whole number, got ${JSON.stringify(value)}`)),
  encode: ParseResult.succeed
})

const TRUE_WORDS: ReadonlySet<string> = new Set(["1", "true", "yes", "on"])
const FALSE_WORDS: ReadonlySet<string> = new Set(["0", "false", "no", "off", ""])

/**
 * A boolean, also written as text as DeerFlow reads `uploads.auto_convert_documents`: `"1"`, `"true"`, `"yes"`,
 * `"on"` (any case, spaces around) and 1 are true; `"0"`, `"false"`, `"no"`, `"off"`, `""` and 0 false. Other text
 * or numbers (which DeerFlow takes as true or false) are refused, naming them.
 */
export const BooleanOrWord = Schema.transformOrFail(
  Schema.Union(Schema.Boolean, Schema.Number, Schema.String),
  Schema.Boolean,
  {
    strict: true,
    decode: (value, _, ast) => {
      if (typeof value === "boolean") return ParseResult.succeed(value)
      const word = String(value).trim().toLowerCase()
      return TRUE_WORDS.has(word)
        ? ParseResult.succeed(true)
        : FALSE_WORDS.has(word) && (typeof value === "string" || word === "0")
        ? ParseResult.succeed(false)
        : ParseResult.fail(new ParseResult.Type(ast, value, `expected true or false, got ${JSON.stringify(value)}`))
    },
    encode: ParseResult.succeed
  }
)

/**
 * Why a model server address cannot be used, or undefined when it can: it must be an `http://` or `https://`
 * URL with a host. The value is not repeated (a key pasted into the wrong field must not be printed), except
 * as the suggested fix when it looks like a host without its scheme (`localhost:11434/v1`).
 */
export const baseUrlProblem = (value: string): string | undefined => {
  let url: URL | undefined
  try {
    url = new URL(value)
  } catch {
    url = undefined
  }
  if (url !== undefined && (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "") {
    return undefined
  }
  const hostLike = /^[A-Za-z0-9.-]+(:\d+)?(\/\S*)?$/.test(value) && /[.:]|^localhost/.test(value)
  return hostLike
    ? `expected an http:// or https:// URL; did you mean http://${value}?`
    : "expected an http:// or https:// URL, such as http://localhost:11434/v1"
}

export const JsonRecord = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const BaseUrl = Schema.String.pipe(Schema.filter((value) => baseUrlProblem(value) ?? true))
