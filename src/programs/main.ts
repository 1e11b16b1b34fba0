/**
 * The `antler` entry point: runs the CLI on `process.argv` with Node's platform services. Ctrl-C
 * (SIGINT) interrupts the command, which cancels a running run after its completed steps are saved.
 * Logs go to stderr (stdout carries the answer, or JSON lines), from level Warning unless `--log-level`.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Cli from "./cli/Cli.js"

const program = Cli.cli(process.argv).pipe(
  Effect.tapErrorCause((cause) =>
    Cli.isReported(cause) ? Effect.void : Effect.sync(() => void process.stderr.write(`${Cause.pretty(cause)}\n`))
  ),
  Logger.withMinimumLogLevel(LogLevel.Warning),
  Effect.provide(Logger.replace(
    Logger.defaultLogger,
    // colour only on a terminal, and never with NO_COLOR
    Logger.prettyLogger({ stderr: true, colors: (process.env.NO_COLOR ?? "") === "" ? "auto" : false })
  )),
  Effect.provide(NodeContext.layer)
)

// A reader that went away (`antler run "..." | head -1`) ends the command as Ctrl-C does (a run is cancelled, its
// completed steps saved, exit 130) instead of the process dying on an unhandled EPIPE with a stack trace. (Once the
// runtime took the signal, or after the command ended, nothing listens for it and the emit does nothing.)
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error
  process.emit("SIGINT")
})

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    const code = Cli.exitCode(exit)
    // Let piped output drain before the process may be ended.
    process.stdout.write("", () => process.stderr.write("", () => onExit(code)))
  }
})
