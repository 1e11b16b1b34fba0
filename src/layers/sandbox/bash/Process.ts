/**
 * Running one sandboxed command as a real child process: the launch wrapper (inherited descriptors closed, the
 * cgroup joined, a lower priority), stdout and stderr captured together, a timeout and a guard that kill the whole
 * process group, and the same kill when the calling fiber is interrupted.
 */
import * as ChildProcess from "node:child_process"
import { StringDecoder } from "node:string_decoder"
import * as Effect from "effect/Effect"
import { SandboxError } from "../../../services/Sandbox.js"
import { OutputCollector, UNLIMITED_OUTPUT_CHARS } from "./Output.js"

/**
 * How a command is started (in its own process group): a bash wrapper closes every descriptor it inherited
 * beyond stdio and the `keep` descriptors meant for the program (Antler may itself have inherited descriptors
 * without close-on-exec, which the sandbox must not get), raises the OOM score (the kernel's OOM killer then
 * picks sandboxed processes first), joins the command's cgroup when there is one (`procs`, the group's
 * `cgroup.procs`, before anything is forked, so every descendant is in it), lowers the CPU priority, and execs
 * the program.
 */
export const wrapped = (
  procs: string | undefined,
  keep: number,
  file: string,
  args: ReadonlyArray<string>
) => ({
  file: "/bin/bash",
  args: [
    "-c",
    `for fd in /proc/self/fd/*; do
  fd=\${fd##*/}
  [ "$fd" -le 2 ] || [ "$fd" -lt "$1" ] || eval "exec $fd>&-" 2>/dev/null
done
echo 1000 2>/dev/null >/proc/self/oom_score_adj
if [ -n "$2" ]; then echo $$ >"$2" || { echo "antler: could not join the command's cgroup" >&2; exit 125; }; fi
shift 2
exec nice -n 10 "$@"`,
    "antler-sandbox",
    String(3 + keep),
    procs ?? "",
    file,
    ...args
  ]
})

/** Checked while a process runs: returns why to stop it now, or undefined to let it go on. */
export interface Guard {
  readonly intervalMs: number
  readonly check: () => Promise<string | undefined>
}

/** One process to run. */
export interface ProcessSpec {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** Output cap in chars (0 = unlimited, bounded by `UNLIMITED_OUTPUT_CHARS`). */
  readonly maxOutputChars: number
  /** Applied to the output before truncation (masks host paths). */
  readonly mask?: (text: string) => string
  /** Texts the process reads from fds 3, 4, ... (each written, then closed). */
  readonly inputs?: ReadonlyArray<string>
  /** A further fd (right after the inputs) whose text is collected into `status`. */
  readonly statusFd?: number | undefined
  /** Stops the process (and its group) when its check gives a reason. */
  readonly guard?: Guard
  /** Called with each piece of output (stdout or stderr, decoded) as it arrives; not masked, not capped. */
  readonly onOutput?: (chunk: string) => void
}

/** What a process did. */
export interface ProcessOutcome {
  readonly output: string
  readonly exitCode: number | null
  readonly signal: string | null
  readonly timedOut: boolean
  /** Why the guard stopped it, if it did. */
  readonly stopped?: string
  /** What the process wrote on `statusFd`. */
  readonly status: string
}

// After the main process exits, how long to wait for its pipes to close before giving up on them.
const PIPE_GRACE_MS = 500
// A status channel holds a few short lines; more is not read.
const STATUS_MAX_CHARS = 64 * 1024

const killGroup = (pid: number | undefined) => {
  if (pid === undefined) return
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // already gone
  }
}

/**
 * Runs a process in its own process group, stdout and stderr captured together (the sandbox's command writes both
 * to one pipe, so they keep the order the command wrote them in). On timeout, when the guard
 * says so, on interruption of the fiber and after the main process exits, the whole group is killed (under
 * bwrap the PID namespace then takes every descendant with it, including `setsid`/`nohup` children).
 */
export const run = (spec: ProcessSpec): Effect.Effect<ProcessOutcome, SandboxError> =>
  Effect.async<ProcessOutcome, SandboxError>((resume) => {
    const collector = new OutputCollector(spec.maxOutputChars > 0 ? spec.maxOutputChars : UNLIMITED_OUTPUT_CHARS)
    const inputs = spec.inputs ?? []
    if (spec.statusFd !== undefined && spec.statusFd !== 3 + inputs.length) {
      resume(Effect.die(new Error(`the status fd must be ${3 + inputs.length}`)))
      return
    }
    let child: ChildProcess.ChildProcess
    try {
      child = ChildProcess.spawn(spec.file, spec.args, {
        cwd: spec.cwd,
        env: { ...spec.env },
        detached: true,
        stdio: [
          "ignore",
          "pipe",
          "pipe",
          ...inputs.map(() => "pipe" as const),
          ...(spec.statusFd === undefined ? [] : ["pipe" as const])
        ]
      })
    } catch (cause) {
      resume(Effect.fail(new SandboxError({ reason: "io", message: "Could not start the command", cause })))
      return
    }
    inputs.forEach((text, i) => {
      const stream = child.stdio[3 + i] as NodeJS.WritableStream | null
      // The process may die before reading (EPIPE): that shows in its exit, not here.
      ;(stream as unknown as { on: (event: string, f: () => void) => void } | null)?.on("error", () => undefined)
      stream?.end(text)
    })
    let status = ""
    if (spec.statusFd !== undefined) {
      const stream = child.stdio[spec.statusFd] as NodeJS.ReadableStream | null
      stream?.on("error", () => undefined)
      stream?.on("data", (chunk: Buffer) => {
        if (status.length < STATUS_MAX_CHARS) status += chunk.toString("utf8")
      })
    }
    let timedOut = false
    let stopped: string | undefined
    let finished = false
    let exit: { code: number | null; signal: string | null } | undefined
    let grace: NodeJS.Timeout | undefined
    let guardTimer: NodeJS.Timeout | undefined
    const decoders = [new StringDecoder("utf8"), new StringDecoder("utf8")] as const
    const collect = (text: string) => {
      collector.push(text)
      if (spec.onOutput !== undefined && text !== "") spec.onOutput(text)
    }
    child.stdout!.on("data", (chunk: Buffer) => collect(decoders[0].write(chunk)))
    child.stderr!.on("data", (chunk: Buffer) => collect(decoders[1].write(chunk)))
    const timer = setTimeout(() => {
      timedOut = true
      killGroup(child.pid)
    }, spec.timeoutMs)

    const guard = spec.guard
    if (guard !== undefined) {
      const tick = () => {
        guardTimer = setTimeout(() => {
          guard.check().then(
            (reason) => {
              if (finished || exit !== undefined) return
              if (reason !== undefined && !timedOut) {
                stopped = reason
                killGroup(child.pid)
              } else {
                tick()
              }
            },
            () => {
              if (!finished && exit === undefined) tick()
            }
          )
        }, guard.intervalMs)
      }
      tick()
    }

    const stopTimers = () => {
      clearTimeout(timer)
      if (guardTimer !== undefined) clearTimeout(guardTimer)
    }
    const finish = () => {
      if (finished) return
      finished = true
      stopTimers()
      if (grace !== undefined) clearTimeout(grace)
      collect(decoders[0].end())
      collect(decoders[1].end())
      const output = collector.render(spec.maxOutputChars, spec.mask)
      resume(Effect.succeed({
        output,
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        timedOut,
        status,
        ...(stopped === undefined ? {} : { stopped })
      }))
    }
    child.once("error", (cause) => {
      if (finished) return
      finished = true
      stopTimers()
      resume(Effect.fail(new SandboxError({ reason: "io", message: `Could not start the command (${cause.message})` })))
    })
    child.once("exit", (code, signal) => {
      exit = { code, signal }
      if (guardTimer !== undefined) clearTimeout(guardTimer)
      // Whatever the command left running in its group goes too; then wait (briefly) for the pipes.
      killGroup(child.pid)
      grace = setTimeout(() => {
        for (const stream of child.stdio) stream?.destroy()
        finish()
      }, PIPE_GRACE_MS)
    })
    child.once("close", (code, signal) => {
      exit ??= { code, signal }
      finish()
    })

    return Effect.async<void>((done) => {
      if (finished || exit !== undefined) {
        killGroup(child.pid)
        done(Effect.void)
        return
      }
      finished = true
      stopTimers()
      // Wait for the kill to land, so an interrupted call leaves nothing running behind it.
      const fallback = setTimeout(() => done(Effect.void), 5_000)
      child.once("exit", () => {
        clearTimeout(fallback)
        done(Effect.void)
      })
      killGroup(child.pid)
    })
  })
