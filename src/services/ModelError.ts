/**
 * Why a model call failed: the error of the model port (`ModelService`), in a module of its own so that the run's
 * types (`RunContext.RunFailure`) can name it without importing the port.
 */
import * as Schema from "effect/Schema"

/** Why a model call failed. */
export const ModelErrorReason = Schema.Literal(
  "connection",
  "timeout",
  "rate_limit",
  "server",
  "auth",
  "quota",
  "bad_request",
  "invalid_response",
  "empty_response",
  "other"
)
export type ModelErrorReason = typeof ModelErrorReason.Type

/** A failed model call, with what a retry policy needs to classify it. */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  reason: ModelErrorReason,
  message: Schema.String,
  /** The provider's error class, e.g. `APIConnectionError`, `RateLimitError`. */
  errorType: Schema.String,
  status: Schema.optional(Schema.Number),
  code: Schema.optional(Schema.String),
  /** `retry-after` / `retry-after-ms` response headers, lower-cased, when the provider sent them. */
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cause: Schema.optional(Schema.Defect)
}) {}
