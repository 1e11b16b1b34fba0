/**
 * DeerFlow's logging settings: `log_level` (how much the gateway logs) and `logging.enhance` (request trace ids:
 * an `X-Trace-Id` taken from each request or made, answered in its response headers and written in its log lines,
 * as text or JSON). Both are read when `antler serve` starts, as DeerFlow's `configure_logging()` reads them once.
 */
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import { withDefault } from "./Fields.js"

/** Python's level names that DeerFlow's `logging_level_from_config` knows, each as Effect's level. */
const LEVELS: Readonly<Record<string, LogLevel.LogLevel>> = {
  notset: LogLevel.All,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  critical: LogLevel.Fatal
}

/**
 * `log_level`: a level's name in any case, spaces around it ignored, empty meaning `info` (DeerFlow's default).
 * A name DeerFlow would take silently as `info` is refused, naming the levels there are.
 */
export const LogLevelName = Schema.String.pipe(
  Schema.filter((name) => Object.hasOwn(LEVELS, name.trim().toLowerCase()) || name.trim() === "", {
    message: () => `expected a log level: ${Object.keys(LEVELS).join(", ")} (in any case)`
  })
)

/** The Effect level of a `log_level` the schema took. */
export const levelOf = (name: string): LogLevel.LogLevel => {
  const key = name.trim().toLowerCase()
  return key === "" ? LogLevel.Info : LEVELS[key] ?? LogLevel.Info
}

/** `logging.enhance`: request trace correlation (off by default, as DeerFlow's). */
export const LoggingEnhanceConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  /** How each log line is written: `text` (`[trace_id=...]` in the line) or `json` (one object a line). */
  format: withDefault(Schema.Literal("text", "json"), () => "text" as const)
})
export type LoggingEnhanceConfig = typeof LoggingEnhanceConfig.Type

/** `logging`. */
export const LoggingConfig = Schema.Struct({
  enhance: withDefault(LoggingEnhanceConfig, () => ({ enabled: false, format: "text" as const }))
})
export type LoggingConfig = typeof LoggingConfig.Type
