/**
 * What every sandbox tool's handler shares: the settings, and the runner that acquires the sandbox of the run's
 * thread (lazily; idempotent) and turns sandbox errors and anything unexpected into `Error:` text with host paths
 * masked, letting interruption through.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { SandboxConfig } from "../../../services/AppConfig.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as Authz from "../../../services/Authorization.js"
import { RunContext } from "../../../services/RunContext.js"
import type { RunEvents } from "../../../services/RunEvents.js"
import type { Sandbox } from "../../../services/Sandbox.js"
import { SandboxError, SandboxProvider } from "../../../services/Sandbox.js"
import type { HandlerOutput } from "../../../services/Tool.js"
import type { ToolCall } from "../../../state/Message.js"
import * as Bash from "../Bash.js"
import * as SkillsDirectory from "../../SkillsDirectory.js"
import * as SkillGate from "./SkillGate.js"
import { normalizeVirtual } from "./Text.js"

/** A tool's work on the run's sandbox. */
export type Body = (sandbox: Sandbox, call: ToolCall) => Effect.Effect<HandlerOutput, SandboxError, RunEvents>

/** A sandbox error as the model sees it. */
export const errorText = (error: SandboxError) => `Error: ${error.message}`

/** `stat` for a path that should be a file: a missing one is reported as a missing file. */
export const statFile = (sandbox: Sandbox, path: string) =>
  Effect.catchIf(
    sandbox.stat(path),
    (e) => e.reason === "not_found",
    (e) => Effect.fail(new SandboxError({ ...e, message: `File not found: ${e.path ?? normalizeVirtual(path)}` }))
  )

const recover = <R>(
  name: string,
  effect: Effect.Effect<HandlerOutput, SandboxError, R>,
  mask: (text: string) => string
) =>
  Effect.catchAllCause(effect, (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.failCause(cause as Cause.Cause<never>)
      : Effect.succeed(unexpected(name, cause, mask)))

const unexpected = (name: string, cause: Cause.Cause<unknown>, mask: (text: string) => string): string => {
  const failure = Cause.squash(cause)
  if (failure instanceof SandboxError) return errorText(failure)
  const message = failure instanceof Error ? failure.message : String(failure)
  // A message from outside the sandbox code may carry a host path: mask it, and drop anything absolute left.
  const safe = mask(message).replace(/(^|[\s'"(])\/(?!mnt\/)[^\s'")]*/g, "$1<path>")
  return `Error: ${name} failed unexpectedly: ${safe}`
}

/** What the tools are built with. */
export interface ToolContext {
  readonly settings: SandboxConfig
  /** Where the model sees the skills (`skills.container_path`). */
  readonly skillsContainer: string
  /** Whether `read_file` marks its results with what it read (`read_before_write.enabled`). */
  readonly markReads: boolean
  /**
   * Runs a handler on the sandbox; sandbox errors and anything unexpected become `Error:` text with host paths
   * masked. Interruption passes through untouched.
   */
  readonly withSandbox: (
    name: string,
    body: Body
  ) => (call: ToolCall) => Effect.Effect<HandlerOutput, never, RunContext | RunEvents>
  /**
   * The virtual folders of the disabled skills and of those the run's role may not load, which `bash` does not see
   * (read when asked).
   */
  readonly disabledSkills: Effect.Effect<ReadonlyArray<string>>
  /** The role's refusal when a command names a path of a skill the run's role may not load (`SkillGate`). */
  readonly refusedSkill: (command: string) => Effect.Effect<string | undefined>
  /**
   * Runs a file tool's `body` on `path` unless the path lies in a disabled skill's folder (then the model reads
   * why it is refused); `body` is given the test for the paths its listing or search must leave out
   * (`SkillGate`). The skills are read only when the path can reach their mount.
   */
  readonly gate: <E, R>(
    path: string,
    body: (hidden: (path: string) => boolean) => Effect.Effect<HandlerOutput, E, R>
  ) => Effect.Effect<HandlerOutput, E, R>
}

/** The context over the provider and the configuration. */
export const make = Effect.gen(function*() {
  const provider = yield* SandboxProvider
  const app = yield* AppConfigService
  const withSandbox: ToolContext["withSandbox"] = (name, body) => (call) =>
    Effect.flatMap(RunContext, (run) => provider.acquire(run.threadId, run.userId)).pipe(
      Effect.flatMap((sandbox) => recover(name, body(sandbox, call), sandbox.mask)),
      (effect) => recover(name, effect, (text) => text)
    )
  const container = app.config.skills.container_path
  const nothingHidden = () => false
  // the skills the run's role may not load (none outside a run with authorization)
  const denied = Effect.map(Effect.serviceOption(Authz.DeniedSkills), Option.getOrUndefined)
  const gate: ToolContext["gate"] = (path, body) =>
    // (called as the tool's call runs: a path far from the skills costs one comparison)
    !SkillGate.reaches(path, container) ? body(nothingHidden) : Effect.flatMap(denied, (access) => {
      const catalog = SkillsDirectory.catalogOf(app)
      const disabled = SkillGate.disabledOf(catalog)
      const blocked = SkillGate.blockedBy(disabled, path)
      if (blocked !== undefined) return Effect.succeed(SkillGate.refusal(blocked))
      const refused = access === undefined ? [] : SkillGate.foldersOf(catalog, access.names)
      const refusedBy = SkillGate.blockedBy(refused, path)
      if (refusedBy !== undefined) return Effect.succeed(Authz.skillRefusal(access!.role, refusedBy))
      const hidden = [...disabled, ...refused]
      return body((entry) => SkillGate.blockedBy(hidden, entry) !== undefined)
    })
  return {
    settings: app.config.sandbox,
    skillsContainer: container,
    markReads: app.config.read_before_write.enabled,
    disabledSkills: Effect.map(denied, (access) => {
      const catalog = SkillsDirectory.catalogOf(app)
      const refused = access === undefined ? [] : SkillGate.foldersOf(catalog, access.names)
      return [...SkillGate.disabledOf(catalog), ...refused].map((d) => d.folder)
    }),
    refusedSkill: (command) =>
      Effect.map(denied, (access) => {
        if (access === undefined || access.names.size === 0) return undefined
        const refused = SkillGate.foldersOf(SkillsDirectory.catalogOf(app), access.names)
        const named = Bash.pathInFolders(command, refused.map((d) => d.folder))
        const skill = named === undefined ? undefined : refused.find((d) => d.folder === named.folder)
        return skill === undefined ? undefined : Authz.skillRefusal(access.role, skill.name)
      }),
    withSandbox,
    gate
  } satisfies ToolContext
})
