/**
 * Why a subagent has no tool of an MCP server that lists its tools only with request secrets (`${secret:NAME}` in
 * its headers or env): a subagent gets its run's request secrets (same user, same run), so such a server is listed
 * and called for it with them; a run that did not give one the server names has none of its tools, for the lead
 * agent as for its subagents. A call the subagent's model makes of such a tool anyway is answered with that reason
 * rather than only "does not exist".
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SecretRefs from "../layers/mcp/SecretRefs.js"
import * as Authz from "../services/Authorization.js"
import { Mcp } from "../services/Mcp.js"

/** Why a tool the model called is not the subagent's (`undefined`: no reason known). */
export type Why = (tool: string) => string | undefined

/** The servers naming request secrets that gave the subagent no tools. */
interface Gated {
  readonly name: string
  readonly prefixed: boolean
  /** The secrets it names that the run did not give. */
  readonly missing: ReadonlyArray<string>
}

const reasonOf = (server: Gated): string =>
  `the subagent has no tool of MCP server '${server.name}': it lists its tools only with the request ` +
  `secret${server.missing.length === 1 ? "" : "s"} ${server.missing.join(", ")}, which this run did not give ` +
  "(context.secrets, antler run --secret NAME)"

/** An entry of the subagent's tool assembly (`ToolAssembly.Entry`). */
interface Entry {
  readonly source: string
  readonly server?: string | undefined
  readonly state: string
}

/**
 * For the servers naming request secrets the run did not all give (`given`: the names it gave) none of whose tools
 * are among the subagent's `entries`: the reason told with a call of an unknown tool (named `<server>_...`, or any
 * name when such a server sets `tool_name_prefix: false`). `undefined` when there is no such server. With
 * `authorization`, only the servers the run's `role` may use are named (one it may not is not told of: its name and
 * its secrets' names).
 */
export const explainer = Effect.fnUntraced(function*(
  entries: ReadonlyArray<Entry>,
  given: ReadonlySet<string>,
  authorization?: Authz.Authorization | undefined,
  role?: string | null | undefined
) {
  const listed = new Set(entries.flatMap((e) => e.source === "mcp" && e.state !== "missing" ? [e.server] : []))
  const mcp = yield* Effect.serviceOption(Mcp)
  if (Option.isNone(mcp) || mcp.value.servers === undefined) return undefined
  const servers = yield* mcp.value.servers
  const gated: Array<Gated> = []
  for (const [name, config] of Object.entries(servers)) {
    const missing = SecretRefs.namesOf(config).filter((secret) => !given.has(secret))
    // (a server whose `${secret:...}`s cannot be used does not start at all, and one given them all that has no
    // tools failed to list them: its tools are missing for another reason)
    const usable = SecretRefs.problemOf(name, config) === undefined
    if (config.enabled && missing.length > 0 && !listed.has(name) && usable) {
      gated.push({ name, prefixed: config.tool_name_prefix, missing })
    }
  }
  if (gated.length > 0 && authorization !== undefined) {
    const principal = Authz.principalOf({ role }, authorization.defaultRole)
    const usable = new Set(yield* Authz.visible(authorization, principal, "mcp_server", gated.map((s) => s.name)))
    gated.splice(0, gated.length, ...gated.filter((s) => usable.has(s.name)))
  }
  if (gated.length === 0) return undefined
  const why: Why = (tool) => {
    const named = gated.find((s) => s.prefixed && tool.startsWith(`${s.name}_`))
    const reasons = named !== undefined ? [named] : gated.filter((s) => !s.prefixed)
    return reasons.length === 0 ? undefined : reasons.map(reasonOf).join("; ")
  }
  return why
})
