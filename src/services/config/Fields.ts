/**
 * The field kinds the configuration's sections share: a nullable field with a default, numbers, and a model
 * server's address with its readable refusal.
 */
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
