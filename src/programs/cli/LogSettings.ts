/**
 * How `antler serve` logs as its configuration says, as DeerFlow's gateway does (`configure_logging`): from
 * `log_level` (unless `--log-level` was given, which wins), and with `logging.enhance.enabled` one line per record
 * naming the request's trace id (`TraceId`): `text` (`2026-01-02T03:04:05.006Z - WARNING - [trace_id=...] - the
 * message`, `-` outside a request) or `json` (`{"timestamp","level","trace_id","message"}`, one object a line).
 * Logs still go to stderr, cleaned of secrets and control characters (`CliCommand.withCleanLogs`, inside this).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { type AppConfig, levelOf } from "../../services/AppConfig.js"

/** Whether the command line gave `--log-level` (set by `Cli.cli`); it then wins over `log_level`. */
export class LogLevelGiven extends Context.Reference<LogLevelGiven>()("antler/cli/LogLevelGiven", {
  defaultValue: () => false
}) {}

/** The key of the trace id's log annotation (`TraceId.LOG_KEY`, named here to keep the gateway out of the CLI). */
const TRACE_KEY = "trace_id"

/** A level as Python's logging names it, where DeerFlow's log readers expect it (`WARNING`, not `WARN`). */
const levelName = (level: LogLevel.LogLevel): string => {
  switch (level._tag) {
    case "Warning":
      return "WARNING"
    case "Fatal":
      return "CRITICAL"
    default:
      return level.label
  }
}

/** A message's parts as one text (a logged cause is one of them, see `withCleanLogs`). */
const text = (message: unknown): string =>
  (Array.isArray(message) ? message : [message]).map((part) => typeof part === "string" ? part : String(part))
    .join(" ")

/** One log line, as `logging.enhance.format` writes it. */
export const line = (format: "text" | "json", options: Logger.Logger.Options<unknown>): string => {
  const trace = Option.getOrElse(HashMap.get(options.annotations, TRACE_KEY), () => "-")
  const timestamp = options.date.toISOString()
  const level = levelName(options.logLevel)
  return format === "json"
    ? JSON.stringify({ timestamp, level, trace_id: trace, message: text(options.message) })
    : `${timestamp} - ${level} - [trace_id=${String(trace)}] - ${text(options.message)}`
}

/** The logger of `logging.enhance`: a line per record on stderr. */
const traceLogger = (format: "text" | "json") =>
  Logger.make((options) => void process.stderr.write(`${line(format, options)}\n`))

/**
 * Runs `effect` (the gateway) logging as `config` says: its `log_level` unless `--log-level` was given, and with
 * `logging.enhance.enabled` the trace logger instead of the human one (the tracer's own logger, which adds log
 * events to spans, stays).
 */
export const configured = (config: AppConfig) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(LogLevelGiven, (given) => {
    const enhance = config.logging.enhance
    const logged = !enhance.enabled ? effect : Effect.locallyWith(effect, FiberRef.currentLoggers, (loggers) =>
      HashSet.add(HashSet.filter(loggers, (logger) => logger === Logger.tracerLogger), traceLogger(enhance.format)))
    return given || config.log_level == null ? logged : Logger.withMinimumLogLevel(logged, levelOf(config.log_level))
  })
