/**
 * The `bash` tool: runs a command in the thread's sandbox and answers with its output (or why it was stopped, and
 * the limits it ran into), while the output goes out as `tool_output` events as it comes.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type { SandboxConfig } from "../../../services/AppConfig.js"
import * as ProcessSecrets from "../../../services/ProcessSecrets.js"
import { RunContext } from "../../../services/RunContext.js"
import { RunEvents } from "../../../services/RunEvents.js"
import * as SkillSecrets from "../../../services/SkillSecrets.js"
import * as Tool from "../../../services/Tool.js"
import type { ToolCall } from "../../../state/Message.js"
import { BashArgs } from "./Args.js"
import * as Texts from "./Texts.js"
import type { ToolContext } from "./ToolContext.js"

/** The resource limits of bash commands, as the bash tool's description states them (empty when none). */
export const limitsText = (settings: SandboxConfig): string => {
  const parts = [
    settings.max_memory_mb > 0 ? `${settings.max_memory_mb} MB of memory per process` : "",
    settings.max_processes > 0 ? `${settings.max_processes} processes and threads at once` : "",
    settings.tmp_size_mb > 0 ? `${settings.tmp_size_mb} MB in /tmp` : "",
    settings.max_file_size_mb > 0 ? `${settings.max_file_size_mb} MB per file` : "",
    settings.disk_quota_mb > 0 ? `${settings.disk_quota_mb} MB for all of the thread's files` : ""
  ].filter((part) => part !== "")
  return parts.length === 0 ? "" : ` Limits: ${parts.join(", ")}; a command that exceeds one fails or is stopped.`
}

/**
 * The custom event that shows a running command's output as it comes (`bash`): `{ type: "tool_output",
 * tool_call_id, tool_name, text }`, a line or a few at a time, before the call's result (which is unchanged:
 * the model sees only the result). DeerFlow has no such event; the name is Antler's.
 */
export const TOOL_OUTPUT_EVENT = "tool_output"

/** The most output of one call sent as `tool_output` events; past it, one last event says `truncated: true`. */
export const TOOL_OUTPUT_MAX_CHARS = 64 * 1024

/**
 * Runs `body` with an output callback whose pieces go out as `tool_output` events of `call`, in order, from a
 * fiber of their own (the callback is called from a process's stream handlers, outside any fiber); the last
 * pieces are sent before `body`'s result is returned.
 */
export const publishingOutput = <A, E, R>(
  call: ToolCall,
  body: (onOutput: (text: string) => void) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | RunEvents> =>
  Effect.gen(function*() {
    const events = yield* RunEvents
    const queue = yield* Queue.unbounded<string>()
    let sent = 0
    let truncated = false
    const event = (data: Record<string, unknown>) =>
      events.emit({
        type: "custom",
        name: TOOL_OUTPUT_EVENT,
        data: { type: TOOL_OUTPUT_EVENT, tool_call_id: call.id, tool_name: call.name, ...data }
      })
    const publish = (pieces: Iterable<string>) =>
      Effect.suspend(() => {
        if (truncated) return Effect.void
        let text = [...pieces].join("")
        if (text === "") return Effect.void
        if (sent + text.length <= TOOL_OUTPUT_MAX_CHARS) {
          sent += text.length
          return event({ text })
        }
        text = text.slice(0, TOOL_OUTPUT_MAX_CHARS - sent)
        truncated = true
        return Effect.zipRight(text === "" ? Effect.void : event({ text }), event({ text: "", truncated: true }))
      })
    const pump = yield* Effect.fork(Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, Infinity), publish)))
    const rest = Fiber.interrupt(pump).pipe(Effect.zipRight(Queue.takeAll(queue)), Effect.flatMap(publish))
    return yield* body((text) => void Queue.unsafeOffer(queue, text)).pipe(Effect.ensuring(rest))
  })

/**
 * A timeout as the bash tool's notice says it, in DeerFlow's words and format (Python's `:g`, six significant
 * digits): `1 second`, `1.5 seconds`, `0.25 seconds`, `600 seconds`.
 */
export const timeoutDuration = (ms: number): string => {
  const seconds = Number((ms / 1000).toPrecision(6))
  return `${seconds} ${seconds === 1 ? "second" : "seconds"}`
}

/** Text, then a line of its own (DeerFlow's `output + "\n" + notice`, without an empty line between). */
const thenLine = (text: string, line: string): string =>
  text === "" ? line : `${text}${text.endsWith("\n") ? "" : "\n"}${line}`

/** The `bash` tool. */
export const bash = ({ disabledSkills, refusedSkill, settings, withSandbox }: ToolContext) => {
  const run = (args: typeof BashArgs.Type, call: ToolCall) =>
    withSandbox("bash", (sandbox) =>
      Effect.map(publishingOutput(call, (onOutput) =>
        // (a disabled skill's folder shows empty, or on the host is not there: DeerFlow's sandbox mounts the
        // enabled skills only; the secrets the skills in use bind come as variables, masked in the output)
        Effect.flatMap(Effect.all([
          Effect.serviceOption(SkillSecrets.ActiveSecrets),
          disabledSkills,
          Effect.serviceOption(RunContext),
          ProcessSecrets.current
        ]), ([active, hidden, run, process]) => {
          const env = Option.isSome(active) ? active.value.env : {}
          // (every value of the run masked before a long output's middle is cut out, bound or not: one the command
          // prints from a file, cut by the head's end, kept its beginning where the run's mask of whole values looks;
          // the process's own secrets too, which that mask and the store's find whole only)
          const given = Option.isSome(run) ? SkillSecrets.entries(run.value.options.secrets).values() : []
          const masked = [...SkillSecrets.maskedTexts([...Object.values(env), ...given]), ...(process?.secrets ?? [])]
            .sort((a, b) => b.length - a.length)
          return sandbox.exec(args.command, { onOutput, hidden, env, masked })
        })), (result) => {
        if (result.timedOut) {
          // DeerFlow's notice after the output so far (test_local_sandbox_command_timeout), saying what Antler
          // stops: not the command only but all it started (so DeerFlow's advice to background a server is left out)
          return thenLine(
            result.output,
            `Command timed out after ${timeoutDuration(result.timeoutMs)} and was terminated, together with every ` +
              "process it started."
          )
        }
        if (result.stopped !== undefined) {
          const before = result.output === "" ? "" : `\nOutput before it was stopped:\n${result.output}`
          return `Error: The command was stopped, together with every process it started: ${result.stopped}` +
            before
        }
        const notes = (result.notes ?? []).map((note) => `\n[limit: ${note}]`).join("")
        // DeerFlow's `(no output)` and `Exit Code: N` line
        if (result.exitCode === 0) return (result.output === "" ? "(no output)" : result.output) + notes
        return thenLine(result.output, `Exit Code: ${result.exitCode}`) + notes
      }))(call)
  return Tool.make({
    name: "bash",
    // DeerFlow's words, then what this sandbox does otherwise (its advice to background a server does not hold here)
    description: `${Texts.BASH_DESCRIPTION}\n\nIn this sandbox there is no network access, /tmp is private to the ` +
      "command, and anything the command starts, in the background too, is stopped when the command ends. " +
      `Commands time out after ${settings.bash_command_timeout} s. Long output keeps its start and end.` +
      limitsText(settings),
    parameters: BashArgs,
    handler: (args, call) =>
      // (a command naming a skill the run's role may not load is refused with the role's words; one reaching it
      // otherwise, by a glob or a `cd`, sees its folder empty or absent, as a disabled skill's)
      Effect.flatMap(
        refusedSkill(args.command),
        (refused) => (refused !== undefined ? Effect.succeed(refused) : run(args, call))
      )
  })
}
