/**
 * `invoke_acp_agent` (DeerFlow's tool of that name): hands a task to one of the external agents of `acp_agents`
 * and returns its answer. The agent works in the thread's ACP workspace (`{home}/users/{user}/threads/{thread}/
 * acp-workspace`), which the lead agent's tools see read-only at `/mnt/acp-workspace`; see `acp/Client` for how
 * it is run. Its answer is bounded, host paths in it are masked (the workspace shows as `/mnt/acp-workspace`)
 * and secrets are redacted from it before any cut (the agents' `env` values, the process's own secrets and the run's
 * request secrets: `ProcessSecrets.ofRun`); every failure is a readable `Error: ...` result.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { AcpAgentsConfig } from "../services/AppConfig.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext } from "../services/RunContext.js"
import { ACP_WORKSPACE, acpWorkspacePath, SafeId } from "../services/Sandbox.js"
import * as Tool from "../services/Tool.js"
import * as Redact from "../state/Redact.js"
import * as AcpClient from "./acp/Client.js"
import * as ParentDeath from "./ParentDeath.js"
import { clean } from "./SearchProviders.js"
import { HIDDEN_HOME, makeMask } from "./sandbox/VirtualPaths.js"

export { AcpError } from "./acp/Client.js"

/** The tool's name. */
export const NAME = "invoke_acp_agent"

/** The longest prompt the model may send. */
export const MAX_PROMPT_CHARS = 100_000

/** The most answer text the model gets. */
export const MAX_ANSWER_CHARS = 50_000

export const InvokeAcpAgentArgs = Schema.Struct({
  agent: Schema.String.annotations({ description: "Name of the ACP agent to invoke" }),
  prompt: Schema.String.pipe(Schema.maxLength(MAX_PROMPT_CHARS)).annotations({
    description: "The task for the agent: concise and self-contained (it does not see this conversation)"
  })
})

/** The tool's description: what it does, the agents and what each is good at, where results land. */
export const description = (agents: AcpAgentsConfig): string =>
  // DeerFlow's words (`build_invoke_acp_agent_tool`), which its prompts are tuned to
  "Invoke an external ACP-compatible agent and return its final response.\n\n" +
  "Available agents:\n" +
  Object.entries(agents).map(([name, agent]) => `- ${name}: ${agent.description}`).join("\n") + "\n\n" +
  "IMPORTANT: ACP agents operate in their own independent workspace. Do NOT include /mnt/user-data paths in the " +
  "prompt. Give the agent a self-contained task description — it will produce results in its own workspace. " +
  `After the agent completes, its output files are accessible at ${ACP_WORKSPACE}/ (read-only).`

/** The secrets of the configured agents: their `env` values. */
export const secrets = (agents: AcpAgentsConfig): ReadonlyArray<string> =>
  Object.values(agents).flatMap((agent) => Object.values(agent.env))

/** Options of the tool. */
export interface Options {
  readonly agents: AcpAgentsConfig
  /** The data directory (absolute). */
  readonly home: string
  /** The `setpriv` giving agents a parent-death signal (default: found on PATH); `false`: none. */
  readonly setpriv?: string | false | undefined
  readonly maxAnswerChars?: number | undefined
}

const decodeId = Schema.decodeUnknownEither(SafeId)

/** The tool over `options.agents` (build it once per agent: the parent-death wrapper is found on first use). */
export const make = (options: Options): Effect.Effect<Tool.Tool> =>
  Effect.gen(function*() {
    const agents = options.agents
    const home = Path.resolve(options.home)
    const own = secrets(agents)
    const wrapper = yield* Effect.cached(Effect.tap(ParentDeath.find(options.setpriv), (found) =>
      found._tag === "none" && options.setpriv !== false
        ? Effect.logWarning(
          `ACP agents start without a parent-death signal (${found.reason}): an agent may outlive Antler if ` +
            "Antler is killed"
        )
        : Effect.void))
    const maxChars = options.maxAnswerChars ?? MAX_ANSWER_CHARS
    return Tool.make({
      name: NAME,
      description: description(agents),
      parameters: InvokeAcpAgentArgs,
      handler: ({ agent, prompt }) =>
        Effect.gen(function*() {
          const config = Object.hasOwn(agents, agent) ? agents[agent] : undefined
          if (config === undefined) {
            // DeerFlow's text; the name the model gave is cleaned of control characters and clipped
            return `Error: Unknown agent '${clean(agent, 100)}'. Available: ${Object.keys(agents).join(", ")}`
          }
          const run = yield* RunContext
          for (const id of [run.threadId, run.userId]) {
            if (Either.isLeft(decodeId(id))) {
              return `Error: ACP agents need a thread and user id that are safe path names`
            }
          }
          const workspace = acpWorkspacePath(home, run.userId, run.threadId)
          const made = yield* Effect.either(Effect.try(() => Fs.mkdirSync(workspace, { recursive: true })))
          if (Either.isLeft(made)) return `Error: Could not create the ACP workspace for ACP agent '${agent}'`
          yield* Effect.logInfo(`invoking ACP agent '${agent}' (prompt: ${prompt.length} characters)`)
          // (the agents' env values, the process's secrets (a key the agent read from a file Antler's user can read)
          // and the run's, masked in its words as they arrive, before its answer or its stderr's tail is cut)
          const process = yield* ProcessSecrets.current
          const redact = yield* ProcessSecrets.ofRun(Redact.make([...own, ...(process?.secrets ?? [])]))
          const answered = yield* Effect.either(AcpClient.invoke({
            name: agent,
            config,
            prompt,
            workspace,
            wrapper: yield* wrapper,
            maxChars,
            redact
          }))
          const mask = makeMask([
            [workspace, ACP_WORKSPACE],
            [realOrSelf(workspace), ACP_WORKSPACE],
            [home, HIDDEN_HOME],
            [realOrSelf(home), HIDDEN_HOME]
          ])
          const safe = (text: string) => redact.text(mask(text))
          if (Either.isLeft(answered)) {
            const message = safe(answered.left.message)
            yield* Effect.logWarning(`invoke_acp_agent: ${message}`)
            return `Error: ${message}`
          }
          const { text, truncated } = answered.right
          yield* Effect.logInfo(`ACP agent '${agent}' answered ${text.length} characters`)
          const body = text.trim() === "" ? "(no response)" : safe(text)
          return truncated ? `${body}\n\n[The answer was cut at ${maxChars} characters.]` : body
        })
    })
  })

const realOrSelf = (path: string) => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return path
  }
}
