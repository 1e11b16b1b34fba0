/**
 * Why a subagent has no tool of an MCP server that lists its tools only with request secrets (`${secret:NAME}` in
 * its headers or env): a subagent gets none of its run's request secrets, so such a server is never listed or
 * called for it. A call the subagent's model makes of such a tool anyway is answered with that reason rather than
 * only "does not exist".
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SecretRefs from "../layers/mcp/SecretRefs.js"
import { Mcp } from "../services/Mcp.js"

/** Why a tool the model called is not the subagent's (`undefined`: no reason known). */
export type Why = (tool: string) => string | undefined

/** The servers naming request secrets that gave the subagent no tools. */
interface Gated {
  readonly name: string
  readonly prefixed: boolean
  readonly secrets: ReadonlyArray<string>
}

const reasonOf = (server: Gated): string =>
  `a subagent gets none of its run's request secrets, so it has no tool of MCP server '${server.name}', which ` +
  `lists its tools only with the request secret${server.secrets.length === 1 ? "" : "s"} ` +
  `${server.secrets.join(", ")}: ask the lead agent to call it`

/** An entry of the subagent's tool assembly (`ToolAssembly.Entry`). */
interface Entry {
  readonly source: string
  readonly server?: string | undefined
  readonly state: string
}

/**
 * For the servers naming request secrets none of whose tools are among the subagent's `entries`: the reason told
 * with a call of an unknown tool (named `<server>_...`, or any name when such a server sets `tool_name_prefix:
 * false`). `undefined` when there is no such server.
 */
export const explainer = Effect.fnUntraced(function*(entries: ReadonlyArray<Entry>) {
  const listed = new Set(entries.flatMap((e) => e.source === "mcp" && e.state !== "missing" ? [e.server] : []))
  const mcp = yield* Effect.serviceOption(Mcp)
  if (Option.isNone(mcp) || mcp.value.servers === undefined) return undefined
  const servers = yield* mcp.value.servers
  const gated: Array<Gated> = []
  for (const [name, config] of Object.entries(servers)) {
    const secrets = SecretRefs.namesOf(config)
    // (a server whose `${secret:...}`s cannot be used does not start at all: its tools are missing for another reason)
    if (config.enabled && secrets.length > 0 && !listed.has(name) && SecretRefs.problemOf(name, config) === undefined) {
      gated.push({ name, prefixed: config.tool_name_prefix, secrets })
    }
  }
  if (gated.length === 0) return undefined
  const why: Why = (tool) => {
    const named = gated.find((s) => s.prefixed && tool.startsWith(`${s.name}_`))
    const reasons = named !== undefined ? [named] : gated.filter((s) => !s.prefixed)
    return reasons.length === 0 ? undefined : reasons.map(reasonOf).join("; ")
  }
  return why
})
