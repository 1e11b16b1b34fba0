/**
 * One ACP invocation over the official SDK (`@agentclientprotocol/sdk`, stable v1, stdio): the agent is started
 * as a child process in its workspace, asked `initialize`, `session/new` (its `cwd` the workspace) and one
 * `session/prompt`; its answer is the text of the `agent_message_chunk` updates (thoughts and tool calls are
 * left out, as in DeerFlow), bounded. Meanwhile the client answers the agent: permission requests are approved
 * or refused as configured, file reads and writes are served inside the workspace only (see `Workspace`), and
 * anything else (terminals) is not offered.
 *
 * The agent runs as a host process with the rights of Antler's user, not in the sandbox: its environment is a
 * small safe one plus its configured `env` (never Antler's own, which holds API keys), and it dies with Antler
 * however Antler ends (a parent-death signal, see `ParentDeath`), and at the end of the call with its process
 * group. Every failure (the command missing, the agent crashing or breaking the protocol, the timeout) is an
 * `AcpError` with a readable message; the agent's stderr tail is added where it helps. What the agent says (its
 * answer, its stderr, its errors) is masked as it arrives (`Invocation.redact`), before any of it is cut.
 */
import type * as Acp from "@agentclientprotocol/sdk"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import { Readable, Writable } from "node:stream"
import type { AcpAgentConfig } from "../../services/AppConfig.js"
import * as OptionalPackage from "../../internal/OptionalPackage.js"
import type { Redactor } from "../../state/Redact.js"
import * as Redact from "../../state/Redact.js"
import * as ParentDeath from "../ParentDeath.js"
import { clean } from "../SearchProviders.js"
import * as Workspace from "./Workspace.js"

/** Why an invocation failed. */
export class AcpError extends Schema.TaggedError<AcpError>()("AcpError", {
  agent: Schema.String,
  reason: Schema.Literal("not_found", "start", "crashed", "protocol", "timeout"),
  message: Schema.String
}) {}

/** What the agent answered. */
export interface Answer {
  /** Its message text, cut at `maxChars`. */
  readonly text: string
  readonly truncated: boolean
  readonly stopReason: string
}

/** One invocation. */
export interface Invocation {
  readonly name: string
  readonly config: AcpAgentConfig
  readonly prompt: string
  /** The workspace's host directory (made by the caller). */
  readonly workspace: string
  /** How children get their parent-death signal (found once by the caller). */
  readonly wrapper: ParentDeath.Wrapper
  /** The most answer text kept (default 100,000 characters). */
  readonly maxChars?: number | undefined
  /** The longest JSON-RPC message accepted from the agent (default 8 MiB). */
  readonly maxMessageBytes?: number | undefined
  /** The client's version in the handshake. */
  readonly version?: string | undefined
  /**
   * What the agent's words are masked with as they arrive, before its answer, its stderr's tail or an error quoting
   * it is cut (a cut inside a secret keeps its beginning, which no later mask of the whole value finds). Default: its
   * `env` values.
   */
  readonly redact?: Redactor | undefined
}

/** The environment variables passed on from Antler's own (nothing secret), before the agent's `env`. */
export const SAFE_ENV = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR", "TZ"]

/** The agent's environment: the safe variables of Antler's, then its configured `env`. */
export const environment = (config: AcpAgentConfig): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const name of SAFE_ENV) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return { ...env, ...config.env }
}

const ACP_SDK = "@agentclientprotocol/sdk"

const loadSdk = () => import("@agentclientprotocol/sdk")

const STDERR_TAIL = 2000

const SAFE_ID = /^[\x20-\x7e]{0,200}$/

const errorText = (error: unknown, hide: Redactor = Redact.none): string =>
  clean(hide.text(error instanceof Error ? error.message : String(error)), 500)

/** What an invocation's words are masked with (`Invocation.redact`). */
const hiderOf = (inv: Invocation): Redactor => inv.redact ?? Redact.make(Object.values(inv.config.env))

/** Ends the child and its process group: SIGTERM, then SIGKILL after a second. */
const terminate = (child: ChildProcess.ChildProcess): Promise<void> => {
  const kill = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal)
    } catch {
      child.kill(signal)
    }
  }
  if (child.exitCode !== null || child.signalCode !== null) {
    // the leader is gone; what it started may not be
    kill("SIGKILL")
    return Promise.resolve()
  }
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(hard)
      clearTimeout(last)
      kill("SIGKILL")
      resolve()
    }
    child.once("exit", done)
    const hard = setTimeout(() => kill("SIGKILL"), 1000)
    const last = setTimeout(done, 2000)
    kill("SIGTERM")
  })
}

/**
 * What a command not found on `PATH` says (DeerFlow's `_format_invocation_error`): the agent and the command, and
 * what to do, for MiniMax Code (`mcode`) and the plain `codex` CLI (which does not speak ACP) in their own words.
 */
export const notFoundMessage = (agent: string, command: string, codexFound: boolean): string => {
  const head = `ACP agent '${agent}': Command '${clean(command, 200)}' was not found on PATH.`
  if (command === "codex-acp" && codexFound) {
    return `${head} The installed \`codex\` CLI does not speak ACP directly. Install a Codex ACP adapter (for ` +
      `example \`npx @zed-industries/codex-acp\`) or update \`acp_agents.${agent}.command\` and \`args\` in ` +
      "config.yaml."
  }
  if (agent === "mcode") {
    return `${head} Install it with \`npm install --global @minimax-ai/code\`, run \`mcode login\`, and restart ` +
      "Antler so it inherits the updated PATH. If Antler runs in a container, ensure `mcode` is installed and " +
      "authenticated inside it."
  }
  return `${head} Install the agent binary or update acp_agents.${agent}.command in config.yaml.`
}

interface Running {
  readonly child: ChildProcess.ChildProcess
  /** Settles (never rejects) when the child exits: how it ended. */
  readonly exited: Promise<string>
  /** Its stderr's tail, masked as it arrived (`Invocation.redact`; see `spawn`). */
  stderr: string
  /** What the stderr's redactor still holds back (a last word that may be a value's beginning), hidden. */
  readonly held: () => string
}

const spawn = (inv: Invocation): Effect.Effect<Running, AcpError> =>
  Effect.suspend(() => {
    const env = environment(inv.config)
    const fail = (reason: AcpError["reason"], message: string) =>
      Effect.fail(new AcpError({ agent: inv.name, reason, message }))
    if (ParentDeath.which(inv.config.command, env.PATH, inv.workspace) === undefined) {
      const codexFound = ParentDeath.which("codex", env.PATH, inv.workspace) !== undefined
      return fail("not_found", notFoundMessage(inv.name, inv.config.command, codexFound))
    }
    const { args, command } = ParentDeath.wrap(inv.wrapper, inv.config.command, inv.config.args, {
      path: env.PATH,
      cwd: inv.workspace
    })
    return Effect.try({
      try: () => {
        const child = ChildProcess.spawn(command, [...args], {
          cwd: inv.workspace,
          env,
          stdio: ["pipe", "pipe", "pipe"],
          // its own process group, ended whole at the end of the call
          detached: true,
          windowsHide: true
        })
        // (masked as its stderr arrives, before its tail is cut: a cut inside a secret kept its beginning, which no
        // mask of the whole value finds; a value split between chunks waits for its rest)
        const hidden = hiderOf(inv).stream()
        const running: Running = {
          child,
          stderr: "",
          held: () => hidden.peek(),
          exited: new Promise<string>((resolve) => {
            child.once("error", (error) => resolve(`it could not be started: ${errorText(error)}`))
            child.once("exit", (code, signal) =>
              resolve(signal !== null ? `it was killed by ${signal}` : `it exited with code ${code}`))
          })
        }
        child.stderr!.on("data", (chunk: Buffer) => {
          running.stderr = (running.stderr + hidden.push(chunk.toString("utf8"))).slice(-STDERR_TAIL)
        })
        // a write to a process that is gone fails here rather than crashing the app
        child.stdin!.on("error", () => undefined)
        return running
      },
      catch: (error) => new AcpError({ agent: inv.name, reason: "start", message: errorText(error) })
    })
  })

/** The answer to an agent's permission request: `allow_once`, else `allow_always`, when approving; else refused. */
export const permissionOutcome = (
  options: ReadonlyArray<Acp.PermissionOption>,
  approve: boolean
): Acp.RequestPermissionResponse => {
  if (approve) {
    for (const kind of ["allow_once", "allow_always"] as const) {
      const option = options.find((o) => o.kind === kind)
      if (option !== undefined) return { outcome: { outcome: "selected", optionId: option.optionId } }
    }
  }
  return { outcome: { outcome: "cancelled" } }
}

// The protocol, start to answer: resolves with the answer, rejects with what went wrong.
const converse = async (
  sdk: Awaited<ReturnType<typeof loadSdk>>,
  inv: Invocation,
  running: Running
): Promise<Answer> => {
  const maxChars = inv.maxChars ?? 100_000
  const workspace = Workspace.make(inv.workspace)
  const chunks: Array<string> = []
  let kept = 0
  let truncated = false
  // (the answer masked as it arrives, then cut: a value split between chunks waits for its rest)
  const hidden = hiderOf(inv).stream()
  const keep = (text: string) => {
    if (kept >= maxChars) {
      truncated ||= text !== ""
      return
    }
    const part = text.slice(0, maxChars - kept)
    truncated ||= part.length < text.length
    chunks.push(part)
    kept += part.length
  }
  let sessionId: string | undefined
  const ours = (id: string) => {
    if (sessionId !== undefined && id !== sessionId) throw sdk.RequestError.invalidParams(undefined, "unknown session")
  }
  const refuse = (error: unknown) =>
    error instanceof Workspace.Refused ? sdk.RequestError.invalidParams(undefined, error.message) : error
  const app = sdk.client({ name: "antler" })
    .onNotification(sdk.methods.client.session.update, ({ params }) => {
      if (params.sessionId !== sessionId) return
      const update = params.update
      if (update.sessionUpdate !== "agent_message_chunk" || update.content.type !== "text") return
      if (kept >= maxChars) truncated ||= update.content.text !== ""
      else keep(hidden.push(update.content.text))
    })
    .onRequest(sdk.methods.client.session.requestPermission, ({ params }) => {
      ours(params.sessionId)
      return permissionOutcome(params.options, inv.config.auto_approve_permissions)
    })
    .onRequest(sdk.methods.client.fs.readTextFile, async ({ params }) => {
      ours(params.sessionId)
      try {
        return { content: await Workspace.readText(workspace, params.path, params.line, params.limit) }
      } catch (error) {
        throw refuse(error)
      }
    })
    .onRequest(sdk.methods.client.fs.writeTextFile, async ({ params }) => {
      ours(params.sessionId)
      try {
        await Workspace.writeText(workspace, params.path, params.content)
        return {}
      } catch (error) {
        throw refuse(error)
      }
    })
  const stream = sdk.ndJsonStream(
    Writable.toWeb(running.child.stdin!) as WritableStream<Uint8Array>,
    Readable.toWeb(running.child.stdout!) as unknown as ReadableStream<Uint8Array>,
    { maxMessageBytes: inv.maxMessageBytes ?? 8 * 1024 * 1024 }
  )
  // The SDK logs some messages it cannot place (a response to an unknown request, with its id) on stderr: an id
  // that is not short printable ASCII is dropped here, so nothing the agent sends can drive a terminal.
  const filtered = {
    writable: stream.writable,
    readable: stream.readable.pipeThrough(
      new TransformStream<Acp.AnyMessage, Acp.AnyMessage>({
        transform: (message, controller) => {
          const id = (message as { readonly id?: unknown } | null)?.id
          if (typeof id !== "string" || SAFE_ID.test(id)) controller.enqueue(message)
        }
      })
    )
  }
  const stopReason = await app.connectWith(filtered, async (ctx) => {
    await ctx.request(sdk.methods.agent.initialize, {
      protocolVersion: sdk.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
      clientInfo: { name: "antler", title: "Antler", version: inv.version ?? "0.1.0" }
    })
    const model = inv.config.model ?? undefined
    const session = await ctx.request(sdk.methods.agent.session.new, {
      cwd: workspace.root,
      mcpServers: [],
      ...(model === undefined || model === "" ? {} : { _meta: { model } })
    })
    if (typeof session?.sessionId !== "string") throw new Error("session/new answered without a session id")
    sessionId = session.sessionId
    const response = await ctx.request(sdk.methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: inv.prompt }]
    })
    return String(response?.stopReason ?? "end_turn")
  })
  keep(hidden.end())
  return { text: chunks.join(""), truncated, stopReason }
}

/**
 * Runs one invocation: the agent started, asked, answered, and stopped (also when the call is interrupted or
 * times out after `config.timeout_seconds`).
 */
export const invoke = (inv: Invocation): Effect.Effect<Answer, AcpError> => {
  const seconds = inv.config.timeout_seconds
  // an optional package: without it, the call says which package to install (and no agent is started)
  const sdkLoaded = Effect.tryPromise({
    try: () => OptionalPackage.load([ACP_SDK], "run ACP agents", loadSdk),
    catch: (error) =>
      new AcpError({ agent: inv.name, reason: "start", message: `ACP agent '${inv.name}': ${errorText(error)}` })
  })
  return Effect.flatMap(sdkLoaded, (sdk) => Effect.acquireUseRelease(
    spawn(inv),
    (running) =>
      Effect.gen(function*() {
        const stderrTail = () => {
          const tail = clean(running.stderr + running.held(), 300)
          return tail === "" ? "" : ` (its stderr: ${tail})`
        }
        return yield* Effect.tryPromise({
          try: () => {
            // the agent's end, as a failure: a conversation still under way when it exits has lost its peer
            const ended = running.exited.then((how) => {
              throw new AcpError({
                agent: inv.name,
                reason: how.startsWith("it could not be started") ? "start" : "crashed",
                message: `ACP agent '${inv.name}' ended before answering: ${how}`
              })
            })
            return Promise.race([converse(sdk, inv, running), ended])
          },
          catch: (error) => error
        }).pipe(
          Effect.catchAll((error) =>
            Effect.flatMap(
              // a crash is often seen first as the connection closing: wait briefly for the exit to name it
              Effect.promise(() =>
                Promise.race([running.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 200))])
              ),
              (how) => {
                if (error instanceof AcpError) {
                  return Effect.fail(new AcpError({ ...error, message: `${error.message}${stderrTail()}` }))
                }
                const crashed = how !== undefined
                return Effect.fail(
                  new AcpError({
                    agent: inv.name,
                    reason: crashed ? "crashed" : "protocol",
                    message: crashed
                      ? `ACP agent '${inv.name}' ended before answering: ${how}${stderrTail()}`
                      : `ACP agent '${inv.name}' broke the protocol: ${errorText(error, hiderOf(inv))}${stderrTail()}`
                  })
                )
              }
            )
          ),
          Effect.timeoutFail({
            duration: seconds * 1000,
            onTimeout: () =>
              new AcpError({
                agent: inv.name,
                reason: "timeout",
                message: `ACP agent '${inv.name}' timed out after ${seconds} seconds without responding. The agent ` +
                  `process has been terminated. If this agent handles long-running tasks, increase ` +
                  `acp_agents.${inv.name}.timeout_seconds in config.yaml.`
              })
          })
        )
      }),
    (running) => Effect.promise(() => terminate(running.child))
  ))
}
