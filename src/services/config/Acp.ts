/**
 * `acp_agents`: external coding agents the lead agent may hand a task to with `invoke_acp_agent`, each run as a
 * child process speaking the Agent Client Protocol over stdio (DeerFlow's `ACPAgentConfig`, same keys).
 */
import * as Schema from "effect/Schema"
import { PositiveInt, withDefault } from "./Fields.js"

/** What an agent's name may be: it is what the model passes as `agent`, and it appears in messages. */
export const AcpAgentName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/))

/** One ACP agent. */
export const AcpAgentConfig = Schema.Struct({
  /** The program that speaks ACP on its stdin and stdout (an adapter such as `codex-acp`, or `mcode`). */
  command: Schema.NonEmptyTrimmedString,
  args: withDefault(Schema.Array(Schema.String), () => []),
  /**
   * Variables set for the agent, on top of a small safe environment (PATH, HOME, USER, LANG...); Antler's own
   * environment, API keys included, is never passed on. `$VAR` values come from Antler's environment, as
   * everywhere in `config.yaml`. The values are secrets: they are redacted from everything printed or stored.
   */
  env: withDefault(Schema.Record({ key: Schema.String, value: Schema.String }), () => ({})),
  /** What the agent is good at; shown to the model in the tool's description. */
  description: Schema.NonEmptyTrimmedString,
  /** A model hint passed to the agent in the new session's `_meta.model` (optional). */
  model: Schema.optional(Schema.NullOr(Schema.String)),
  /**
   * Approve the agent's permission requests (`allow_once`, else `allow_always`); by default every request is
   * refused, and the agent must work without asking.
   */
  auto_approve_permissions: withDefault(Schema.Boolean, () => false),
  /** The most one `invoke_acp_agent` call may take, start to answer; the agent is then stopped. */
  timeout_seconds: withDefault(PositiveInt, () => 1800)
})
export type AcpAgentConfig = typeof AcpAgentConfig.Type

const isName = Schema.is(AcpAgentName)

/** `acp_agents`: agents by name (a name that cannot be one is an issue at that name). */
export const AcpAgentsConfig = Schema.Record({ key: Schema.String, value: AcpAgentConfig }).pipe(
  Schema.filter((agents) => {
    const bad: Array<string> = Object.keys(agents).filter((name) => !isName(name))
    if (bad.length === 0) return true
    return bad.map((name) => ({
      path: [name],
      message: `${JSON.stringify(name.slice(0, 80))} cannot be an ACP agent's name: ` +
        "use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
    }))
  })
)
export type AcpAgentsConfig = typeof AcpAgentsConfig.Type
