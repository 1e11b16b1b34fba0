/**
 * A run's listing of the MCP servers that list their tools only with its request secrets (`${secret:NAME}`:
 * `Mcp.Service.catalogWith`), made before the agent factory's lock, which every run of every user takes to get its
 * agent (a kept one too). Such a listing starts the server with the run's values and waits for its answer (seconds:
 * an `npx` start, a server checking that user's credential), and made under the lock it held up every other user's
 * runs for as long, one listing after another. Only a listing made per run is handed on (an agent built from it is
 * never kept); a configuration without such a server asks nothing more of a run than before.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SecretRefs from "../layers/mcp/SecretRefs.js"
import type { Mcp } from "../services/Mcp.js"
import type * as ToolAssembly from "./ToolAssembly.js"

/** The run an agent is built for (`ToolAssembly.Options.run`). */
export type ForRun = ToolAssembly.Options["run"]

/** `run` with its own listing (`catalog`) when one of `mcp`'s enabled servers lists only with request secrets. */
export const listed = (mcp: Option.Option<Mcp["Type"]>, run: ForRun): Effect.Effect<ForRun> =>
  Effect.gen(function*() {
    if (run === undefined || run.catalog !== undefined || Option.isNone(mcp)) return run
    const { catalogWith, servers } = mcp.value
    if (catalogWith === undefined || servers === undefined) return run
    const gated = Object.values(yield* servers).some((c) => c.enabled && SecretRefs.namesOf(c).length > 0)
    if (!gated) return run
    const catalog = yield* catalogWith(run.secrets)
    return catalog.perRun === true ? { ...run, catalog } : run
  })
