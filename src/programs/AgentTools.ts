/**
 * The tools that write custom agents (SPEC §7.12–7.13):
 *
 * - `setup_agent(soul, description, skills?)`, the bootstrap agent's: writes the agent the conversation was
 *   started for (`agent_name` of the run, the run's user's agent), or the default agent's `SOUL.md` when none
 *   was named (only in an admin's run, `RunOptions.admin`: every user's default agent reads it), and emits an
 *   `agent_created` event.
 * - `update_agent(soul?, description?, skills?, tool_groups?, model?)`, a custom agent's: changes the agent
 *   itself; unchanged fields are left out, `"null"` / `"none"` / `"undefined"` count as left out, unmanaged
 *   settings (`github:`, `thinking_enabled`, `model_settings`...) are kept. Changes apply from the next run.
 *
 * Both write atomically (see `CustomAgents.save`) and answer errors as `Error: ...` results; a run's agent name
 * that is not a name is refused (never taken for "no name", which would be the default agent's soul). What the model
 * writes (the SOUL, the description) is redacted first: no secret of the process reaches an agent's files.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ModelConfig } from "../services/AppConfig.js"
import { RunContext } from "../services/RunContext.js"
import { RunEvents } from "../services/RunEvents.js"
import * as Tool from "../services/Tool.js"
import * as Redact from "../state/Redact.js"
import * as CustomAgents from "./CustomAgents.js"
import { echoed } from "../state/Chars.js"

/** Name of the event `setup_agent` emits when it wrote an agent. */
export const AGENT_CREATED_EVENT = "agent_created"

/** The run's agent name (`RunOptions.extra.agent_name`), when it is a valid name. */
export const agentNameOf = (context: RunContext["Type"]): string | undefined => {
  const name = context.options.extra?.agent_name
  return typeof name === "string" && CustomAgents.isAgentName(name) ? name : undefined
}

/**
 * What the agent tools answer when the run's agent name is not a name (the factory refuses such a run, so this is
 * a guard): nothing is written, and the default agent's soul is not taken for it.
 */
export const invalidNameOf = (context: RunContext["Type"]): string | undefined => {
  const name = context.options.extra?.agent_name
  if (name == null || agentNameOf(context) !== undefined) return undefined
  const problem = typeof name === "string" ? CustomAgents.nameProblem(name) : "not a name"
  return `Error: Invalid agent name ${JSON.stringify(name)}: ${problem ?? "not a name"}. Nothing was written.`
}

const NULLS: ReadonlySet<string> = new Set(["null", "none", "undefined"])

/** A string argument, or undefined when left out or sent as "null" / "none" / "undefined". */
export const given = (value: string | null | undefined): string | undefined =>
  value == null || NULLS.has(value.trim().toLowerCase()) ? undefined : value

/** A list argument: undefined when left out (or a null word); an error text for any other string. */
export const givenList = (
  value: ReadonlyArray<string> | string | null | undefined,
  field: string
): { readonly value: ReadonlyArray<string> | undefined } | { readonly error: string } => {
  if (value == null) return { value: undefined }
  if (typeof value === "string") {
    return NULLS.has(value.trim().toLowerCase())
      ? { value: undefined }
      : { error: `Error: ${field} must be a list of names (e.g. ["a", "b"]), or left out.` }
  }
  return { value: value.map((v) => v.trim()).filter((v) => v !== "") }
}

const StringList = Schema.Union(Schema.Array(Schema.String), Schema.String, Schema.Null)

// The tools' descriptions and their arguments' are DeerFlow's word for word (its setup_agent_tool.py and
// update_agent_tool.py docstrings as LangChain's `@tool(parse_docstring=True)` hands them to the model: the
// paragraphs before `Args:` joined by a space, each `Args:` entry its argument's description).

/** The arguments of `setup_agent`. */
export const SetupArgs = Schema.Struct({
  soul: Schema.String.annotations({
    description: "Full SOUL.md content defining the agent's personality and behavior."
  }),
  description: Schema.String.annotations({ description: "One-line description of what the agent does." }),
  skills: Schema.optional(StringList).annotations({
    description: "Optional list of skill names this agent should use. None means use all enabled skills, empty list " +
      "means no skills."
  })
})

/** `setup_agent`'s answer in a run without an agent name that is not an admin's: nothing is written. */
export const NOT_ADMIN = "Error: This conversation was started without an agent name, so it would write the default " +
  "agent's SOUL.md, which every user's default agent reads; only an admin may change it. Nothing was written. " +
  "Start the conversation for a named agent (agent_name) to create an agent of your own."

/**
 * `setup_agent` over a data directory (the tool writes through the file system it is made with); `redact`: the
 * secrets the files it writes must not hold.
 */
export const setupAgent = (
  home: string,
  redact: Redact.Redactor = Redact.none
): Effect.Effect<Tool.Tool<typeof SetupArgs.Type>, never, FileSystem.FileSystem> =>
  Effect.map(FileSystem.FileSystem, (fs) =>
    Tool.make({
      name: "setup_agent",
      description: "Setup the custom DeerFlow agent.",
      parameters: SetupArgs,
      handler: (args) =>
        Effect.gen(function*() {
          const context = yield* RunContext
          if (args.soul.trim() === "") {
            return "Error: soul content is empty; nothing was written. Write the SOUL.md content first, then call " +
              "setup_agent."
          }
          const skills = givenList(args.skills, "skills")
          if ("error" in skills) return skills.error
          const invalid = invalidNameOf(context)
          if (invalid !== undefined) return invalid
          const name = agentNameOf(context)
          const soul = redact.text(args.soul)
          if (name === undefined) {
            // every user's default agent reads this file: only an admin's run writes it (see gateway/Auth.ts)
            if (context.options.admin !== true) return NOT_ADMIN
            yield* CustomAgents.saveGlobalSoul(home, soul)
            yield* Effect.flatMap(RunEvents, (events) =>
              events.emit({
                type: "custom",
                name: AGENT_CREATED_EVENT,
                data: { name: null, message: "The default agent's SOUL.md was written." }
              }))
            return "The default agent's SOUL.md was saved. It takes effect from the next conversation."
          }
          const existing = yield* Effect.either(CustomAgents.load(home, context.userId, name))
          const base = existing._tag === "Right" ? existing.right.raw : {}
          yield* CustomAgents.save(home, context.userId, name, {
            config: {
              ...base,
              name,
              description: redact.text(args.description.trim()),
              ...(skills.value !== undefined ? { skills: redact.value(skills.value) } : {})
            },
            soul
          })
          yield* Effect.flatMap(RunEvents, (events) =>
            events.emit({
              type: "custom",
              name: AGENT_CREATED_EVENT,
              data: { name, message: `Agent '${name}' created. Run it with: antler run --agent ${name} "..."` }
            }))
          return `Agent '${name}' created successfully!`
        }).pipe(
          Effect.catchTag("AgentError", (error) => Effect.succeed(`Error: ${error.message}`)),
          Effect.provideService(FileSystem.FileSystem, fs)
        )
    }))

/** The arguments of `update_agent`. */
export const UpdateArgs = Schema.Struct({
  soul: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Optional full replacement SOUL.md content."
  }),
  description: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Optional new one-line description."
  }),
  skills: Schema.optional(StringList).annotations({
    description: "Optional skill whitelist. ``[]`` = no skills, omit = unchanged."
  }),
  tool_groups: Schema.optional(StringList).annotations({
    description: "Optional tool-group whitelist. ``[]`` = empty, omit = unchanged."
  }),
  model: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Optional model override (must match a configured model name)."
  })
})

const UPDATE_AGENT_DESCRIPTION = `Persist updates to the current custom agent's SOUL.md and config.yaml. Use this \
when the user asks to refine the agent's identity, description,
skill whitelist, tool-group whitelist, or default model. Only the fields
you explicitly pass are updated; omitted fields keep their existing values. Pass \`\`soul\`\` as the FULL replacement \
SOUL.md content — there is no patch
semantics, so always start from the current SOUL and apply your edits. Pass \`\`skills=[]\`\` to disable all skills \
for this agent. Omit \`\`skills\`\`
entirely to keep the existing whitelist. Do not pass literal strings like
\`\`"null"\`\` / \`\`"none"\`\` / \`\`"undefined"\`\` for unchanged fields; omit those
fields instead.`

const mapDefined = <A, B>(value: A | undefined, f: (a: A) => B): B | undefined =>
  value === undefined ? undefined : f(value)

const sameList = (a: unknown, b: ReadonlyArray<string>) =>
  Array.isArray(a) && a.length === b.length && a.every((x, i) => x === b[i])

/**
 * `update_agent` over a data directory and the configured models (the tool writes through the file system it is
 * made with); `redact`: the secrets the files it writes must not hold.
 */
export const updateAgent = (
  home: string,
  models: ReadonlyArray<Pick<ModelConfig, "name">>,
  redact: Redact.Redactor = Redact.none
): Effect.Effect<Tool.Tool<typeof UpdateArgs.Type>, never, FileSystem.FileSystem> =>
  Effect.map(FileSystem.FileSystem, (fs) =>
    Tool.make({
      name: "update_agent",
      description: UPDATE_AGENT_DESCRIPTION,
      parameters: UpdateArgs,
      handler: (args) =>
        Effect.gen(function*() {
          const context = yield* RunContext
          const invalid = invalidNameOf(context)
          if (invalid !== undefined) return invalid
          const name = agentNameOf(context)
          if (name === undefined) return NO_AGENT
          const soul = mapDefined(given(args.soul), redact.text)
          const description = mapDefined(given(args.description), redact.text)
          const model = given(args.model)
          const skills = redact.value(givenList(args.skills, "skills"))
          if ("error" in skills) return skills.error
          const groups = redact.value(givenList(args.tool_groups, "tool_groups"))
          if ("error" in groups) return groups.error
          if ([soul, description, model, skills.value, groups.value].every((v) => v === undefined)) {
            return "Error: No fields provided. Give at least one of soul, description, skills, tool_groups, model; " +
              "leave out the fields that do not change (rather than sending \"null\")."
          }
          if (soul !== undefined && soul.trim() === "") {
            return "Error: soul content is empty; the SOUL.md was not changed. Omit the soul field to keep the " +
              "current one."
          }
          if (model !== undefined && !models.some((m) => m.name === model)) {
            const names = models.map((m) => m.name).join(", ") || "(none)"
            return `Error: Unknown model "${echoed(model)}". Configured models: ${names}.`
          }
          const refused = (step: "load" | "save") =>
            Effect.mapError((error: CustomAgents.AgentError) => refusalOf(error, step, home, context.userId))
          const agent = yield* refused("load")(CustomAgents.load(home, context.userId, name))
          const raw = agent.raw
          const next: Record<string, unknown> = { ...raw }
          const changed: Array<string> = []
          if (description !== undefined && description !== raw.description) {
            next.description = description
            changed.push("description")
          }
          if (model !== undefined && model !== raw.model) {
            next.model = model
            changed.push("model")
          }
          if (skills.value !== undefined && !sameList(raw.skills, skills.value)) {
            next.skills = skills.value
            changed.push("skills")
          }
          if (groups.value !== undefined && !sameList(raw.tool_groups, groups.value)) {
            next.tool_groups = groups.value
            changed.push("tool_groups")
          }
          const soulChanged = soul !== undefined && soul.trim() !== (agent.soul ?? "")
          if (soulChanged) changed.push("soul")
          if (changed.length === 0) {
            return `No changes applied to agent '${name}': the values given are the current ones.`
          }
          yield* refused("save")(CustomAgents.save(home, context.userId, name, {
            config: next,
            ...(soulChanged ? { soul } : {})
          }))
          return `Agent '${name}' updated successfully. Changed: ${changed.join(", ")}. ` +
            "The new configuration takes effect on the next user turn."
        }).pipe(
          Effect.catchTag("AgentError", (error) => Effect.succeed(`Error: ${error.message}`)),
          Effect.provideService(FileSystem.FileSystem, fs)
        )
    }))

/** What `update_agent` answers in a run that names no custom agent (DeerFlow's sentence). */
export const NO_AGENT = "Error: update_agent is only available inside a custom agent's chat. There is no " +
  "agent_name in the current runtime context, so there is nothing to update. If you are inside the bootstrap flow, " +
  "use setup_agent instead."

/**
 * An agent `update_agent` cannot read or write, in DeerFlow's words: missing or unreadable (`load`), only in the
 * shared layout, which a user's run never writes (`save`). The data directory is not named: the text goes to the
 * model and a gateway's client. Other errors are left as they are.
 */
const refusalOf = (
  error: CustomAgents.AgentError,
  step: "load" | "save",
  home: string,
  userId: string
): CustomAgents.AgentError => {
  const name = error.name
  const message = step === "load" && error.reason === "not_found"
    ? `Agent '${name}' does not exist for the current user. Use setup_agent to create a new agent first.`
    : step === "load" && error.reason === "invalid_config"
    ? `Agent '${name}' has an unreadable config: ${CustomAgents.messageFromHome(error, home)}`
    : step === "save" && error.reason === "legacy"
    ? `Agent '${name}' only exists in the legacy shared layout and is not scoped to a user. Move agents/${name} of ` +
      `the data directory to users/${userId}/agents/${name} before updating.`
    : undefined
  return message === undefined ? error : new CustomAgents.AgentError({ ...error, message })
}
