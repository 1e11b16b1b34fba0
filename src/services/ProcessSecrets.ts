/**
 * The process's own secrets (its models' keys, its tools' and MCP servers' credentials), as the redactor the app
 * hides them with, provided once per app by whoever knows them (`Factory.layer`'s `redact`). A middleware that cuts a
 * text to a length (a tool's output, an error's detail, a title) masks it with them and the run's request secrets
 * first: the masks after it (the stream's, the store's) find whole values only, and a cut inside one would keep its
 * beginning. Absent (an agent built without it): none.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Redactor } from "../state/Redact.js"
import * as Redact from "../state/Redact.js"
import { RunContext } from "./RunContext.js"
import * as SkillSecrets from "./SkillSecrets.js"

/** The process's secrets (see the module's header). */
export class ProcessSecrets extends Context.Tag("antler/ProcessSecrets")<ProcessSecrets, Redactor>() {}

/** The process's redactor in context, if any (read where an agent is built, or inside a run). */
export const current: Effect.Effect<Redactor | undefined> = Effect.map(
  Effect.serviceOption(ProcessSecrets),
  Option.getOrUndefined
)

/**
 * What a text a run cuts is masked with before its cut: `process`'s secrets and the request secrets of the run the
 * call happens in (`SkillSecrets.runRedactor`).
 */
export const ofRun = (process: Redactor | undefined): Effect.Effect<Redactor> =>
  Effect.map(Effect.serviceOption(RunContext), (run) =>
    SkillSecrets.runRedactor(process ?? Redact.none, Option.isSome(run) ? run.value.options.secrets : undefined))

/** `ofRun` of the process's redactor in context (`current`): what a run's text is masked with before its cut. */
export const inRun: Effect.Effect<Redactor> = Effect.flatMap(current, ofRun)
