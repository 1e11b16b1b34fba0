/**
 * SkillActivation (SPEC §5.15, lead chain slot #16): a user message that starts with `/<skill-name>` activates
 * that skill for the run. Its SKILL.md (bounded) goes into every request of the run, in a hidden message right
 * before the user's, with the rest of the user's message as the request; SkillToolPolicy then enforces the
 * skill's `allowed-tools`. Request-only: the thread keeps what the user typed; the run's first answer carries
 * the skill's name (`additional_kwargs.slash_skill_activated`), so the thread says afterwards which was active.
 *
 * A name that cannot be activated ends the run with a reply instead of a model call: not installed (with the
 * closest installed names), disabled, not available to this agent, or unreadable. Reserved words (`/help`,
 * `/new`, ...) are never skills. Unlike DeerFlow, the activation is in every request of the run (not only the
 * first): a retried call and the calls after a tool result still carry the skill, and the requests of the run
 * keep a common prefix.
 *
 * It also binds the request's secrets for skills (`RunOptions.secrets`, see `SkillSecrets`) on every model call:
 * those the slash-activated skill and the thread's loaded skills declare (`required-secrets`) go to the `bash`
 * commands that answer the call, as environment variables; a change of what is bound is a `skill_secrets` custom
 * event naming skills and secret names, never a value. Every tool result of a run given secrets has their values
 * masked before anything outside this middleware sees it (the output budget's files, the thread, the events). A
 * `task` call is given the names of the skills bound for it (`SkillSecrets.DelegatedSkills`): the subagent's own
 * SkillActivation binds them too, where its skills allow them.
 *
 * With `skills.deferred_discovery`, this middleware also contributes `describe_skill`.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import type { ModelRequest, ModelResponse } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { RunEvents } from "../services/RunEvents.js"
import { emitCustom } from "../services/RunEvents.js"
import type { Catalog, Registry, Skill } from "../services/Skills.js"
import { ACTIVATED_KEY, closeMatches, parseSlash } from "../services/Skills.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import * as Tool from "../services/Tool.js"
import { escapeAttribute, escapeText } from "../state/Markup.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"
import { headChars } from "../state/Chars.js"
import { originalUserContent } from "./InputSanitization.js"
import { ToolError } from "../services/ToolService.js"

/** `additional_kwargs` key marking the activation message. */
export const ACTIVATION_KEY = "slash_skill_activation"

/** `additional_kwargs` key of the id of the user message the activation belongs to. */
export const TARGET_KEY = "slash_skill_activation_target_id"

/** `additional_kwargs` key of the activated SKILL.md's container path (read by SkillToolPolicy). */
export const PATH_KEY = "slash_skill_path"

/** Longest SKILL.md injected, in characters; a longer one is cut and the model reads the rest itself. */
export const MAX_SKILL_CHARS = 60_000

// Attribute escaping everywhere (quotes too), so the activation reads the same in content and attributes.
const escapeXml = escapeAttribute

/**
 * A tool's failure with `texts` masked in what is written of it (ToolErrorHandling puts a `ToolError`'s message, or a
 * defect's, into the result the model reads, its detail cut at 500 characters: a value whole, or its beginning where
 * the cut falls); the same failure when nothing changed. A masked `ToolError` loses its `cause`, which may repeat it.
 */
const maskFailure = (failure: unknown, texts: ReadonlyArray<string>): unknown => {
  if (texts.length === 0) return failure
  const hide = SkillSecrets.mask(texts)
  if (failure instanceof ToolError) {
    const message = hide(failure.message)
    return message === failure.message ? failure : new ToolError({
      tool: failure.tool,
      toolCallId: failure.toolCallId,
      errorType: failure.errorType,
      message
    })
  }
  if (failure instanceof Error) {
    const message = hide(failure.message)
    return message === failure.message ? failure : Object.assign(new Error(message), { name: failure.name })
  }
  if (typeof failure === "string") return hide(failure)
  return failure
}

/** A real user message: human, not hidden, not a summary. */
const isRealUser = (message: Message): boolean =>
  message.type === "human" && !M.isHidden(message) && message.name !== "summary"

/** Index of the latest real user message of a request, or -1. */
export const targetIndex = (messages: ReadonlyArray<Message>, memo?: Incremental.Memo<number>): number =>
  Incremental.lastIndexOf(messages, isRealUser, memo)

/** What the user typed (before the harness framed or extended it). */
export const userText = (message: Message): string => originalUserContent(message) ?? M.text(message)

/** What `<user_request>` says when the command came alone (DeerFlow's text). */
export const NO_TASK_TEXT = "No additional task text was provided after the slash skill command. Ask the user what " +
  "they want to do with this skill if the next step is unclear."

/** The activation message for a skill and the rest of the user's message. */
export const activationMessage = (skill: Skill, body: string, rest: string, targetId: string): Message => {
  const cut = body.length > MAX_SKILL_CHARS
  const shown = cut ? headChars(body, MAX_SKILL_CHARS) : body
  const sha = createHash("sha256").update(body).digest("hex")
  // DeerFlow's `_build_activation_reminder`, line for line (its tests pin the `<user_request>` block and the
  // fallback sentence); Antler adds only the note on a SKILL.md too long to show whole.
  const request = rest.trim() === "" ? NO_TASK_TEXT : escapeXml(rest.trim())
  const content = [
    "<slash_skill_activation>",
    `The user explicitly activated the \`${escapeXml(skill.name)}\` skill for this turn.`,
    "Treat the task text as:",
    "<user_request>",
    request,
    "</user_request>",
    "",
    "Follow this skill before choosing a general workflow. Load supporting resources from the same skill " +
    "directory only when needed.",
    "",
    `<skill name="${escapeXml(skill.name)}" category="${escapeXml(skill.category)}" ` +
    `path="${escapeXml(skill.location)}" sha256="${sha}" editable="${skill.category === "custom"}">`,
    `<skill_content encoding="xml-escaped">`,
    escapeXml(shown) +
    (cut
      ? `\n[... SKILL.md is ${body.length} characters; the rest is not shown here: read it from ` +
        `${escapeXml(skill.location)} with read_file, from line ${shown.split("\n").length}.]`
      : ""),
    "</skill_content>",
    "</skill>",
    "</slash_skill_activation>"
  ].join("\n")
  return M.human(content, {
    id: `${targetId}__slash_activation`,
    additional_kwargs: {
      hide_from_ui: true,
      [ACTIVATION_KEY]: true,
      [TARGET_KEY]: targetId,
      [PATH_KEY]: skill.location
    }
  })
}

/** Why a slash command activates nothing: the reply the user gets. */
export const refusal = (
  name: string,
  catalog: Catalog,
  allowlist: ReadonlyArray<string> | undefined
): string | undefined => {
  const skill = catalog.skills.find((s) => s.name === name)
  if (skill === undefined) {
    const usable = catalog.skills.filter((s) => s.enabled && (allowlist === undefined || allowlist.includes(s.name)))
    const near = closeMatches(name, usable.map((s) => s.name))
    const hint = near.length > 0
      ? ` Did you mean ${near.map((n) => `\`/${n}\``).join(", ")}?`
      : usable.length > 0
      ? ` Installed skills: ${usable.slice(0, 30).map((s) => `\`/${s.name}\``).join(", ")}` +
        `${usable.length > 30 ? ` (and ${usable.length - 30} more)` : ""}.`
      : " No skills are installed."
    return `Skill \`/${name}\` is not installed.${hint}`
  }
  if (!skill.enabled) {
    return `Skill \`/${name}\` is installed but disabled. Enable it before using slash activation ` +
      `(set skills.${name}.enabled to true in extensions_config.json).`
  }
  if (allowlist !== undefined && !allowlist.includes(name)) return `Skill \`/${name}\` is not available for this agent.`
  return undefined
}

/** A reply given instead of a model call. */
const reply = (text: string): ModelResponse => ({
  message: M.ai(text, { additional_kwargs: { slash_skill_refusal: true } })
})

/** Options of `layer`. */
export interface Options {
  readonly registry: Registry
  /** The skills this agent may use (a custom agent's list); all when undefined. */
  readonly allowlist?: ReadonlyArray<string> | undefined
  /** Contribute `describe_skill` (deferred skill discovery). */
  readonly describeTool?: boolean | undefined
  /**
   * A subagent's: its first message is the task its parent's model wrote, so a skill it slash-activates is the
   * model's choice, whose secrets bind only if it is not `secrets-autonomous: false`.
   */
  readonly subagent?: boolean | undefined
}

type Resolution =
  | { readonly _tag: "none" }
  | { readonly _tag: "refused"; readonly text: string }
  | { readonly _tag: "active"; readonly message: Message; readonly skill: Skill }

/** The SkillActivation middleware. */
export const layer = (options: Options): Middleware => {
  // where the latest real user message is, per thread, for the agent's life
  const memo = Incremental.makeMemo<number>()
  return MW.make(
    Effect.gen(function*() {
      const context = yield* RunContext
      const state = yield* RunState
      const secrets = SkillSecrets.entries(context.options.secrets)
      // (a subagent's: the skills its parent had bound for its task)
      const delegated = context.options.delegatedSkills ?? []
      // (every value the request gave, masked in every tool result of the run, bound or not)
      const masked = SkillSecrets.maskedTexts(secrets.values())
      // what the last model call bound, for the bash calls answering it, and what the audit said last
      let binding = SkillSecrets.unbound
      let audited: string | undefined
      // One resolution per run, for the user message it was made for.
      let resolved: { readonly targetId: string; readonly resolution: Resolution } | undefined
      // the user message whose first answer carries the activation's mark (ACTIVATED_KEY), once marked
      let marked: string | undefined

      const resolve = (target: Message): Effect.Effect<Resolution, never, RunEvents> => {
        const slash = parseSlash(userText(target))
        if (slash === undefined) return Effect.succeed({ _tag: "none" })
        return Effect.gen(function*(): Effect.fn.Return<Resolution, never, RunEvents> {
          const catalog = yield* options.registry.catalog
          const refused = refusal(slash.name, catalog, options.allowlist)
          if (refused !== undefined) return { _tag: "refused", text: refused }
          const skill = catalog.skills.find((s) => s.name === slash.name)!
          const body = yield* Effect.either(options.registry.read(skill))
          if (Either.isLeft(body)) {
            yield* Effect.logWarning(body.left.message)
            return {
              _tag: "refused",
              text: `Skill \`/${slash.name}\` could not be loaded safely. Please check the skill installation.`
            }
          }
          yield* emitCustom("skill_activation", { name: skill.name, path: skill.location })
          return { _tag: "active", skill, message: activationMessage(skill, body.right, slash.rest, target.id) }
        })
      }

      // The secrets the skills in use bind now (DeerFlow recomputes them on every model call: a skill evicted,
      // disabled or no longer given its value stops binding at once); the catalog is read only for a run given
      // secrets whose thread loaded skills, or a subagent's whose parent had bound some.
      const rebind = (resolution: Resolution): Effect.Effect<void, never, RunEvents> =>
        secrets.size === 0 ? Effect.void : Effect.gen(function*() {
          const loaded = (yield* state.get).skill_context
          // (skills that cannot be read bind nothing this call, the slash skill's neither: DeerFlow fails closed)
          const catalog = loaded.length === 0 && delegated.length === 0
            ? undefined
            : yield* options.registry.catalog.pipe(
              Effect.catchAllDefect((defect) =>
                Effect.as(Effect.logWarning(`The skills could not be read to bind secrets: ${String(defect)}`), null)
              )
            )
          const slash = resolution._tag === "active" && catalog !== null ? resolution.skill : undefined
          binding = catalog === null
            ? SkillSecrets.unbound
            : SkillSecrets.bind(
              SkillSecrets.sourcesOf(slash, loaded, catalog, options.allowlist, {
                delegated,
                slashByModel: options.subagent === true
              }),
              secrets
            )
          const changes = SkillSecrets.audit(binding)
          const key = JSON.stringify(changes)
          if (key === audited || (audited === undefined && changes.secrets.length === 0 &&
            Object.keys(changes.missing).length === 0)) return
          audited = key
          for (const [skill, names] of Object.entries(changes.missing)) {
            yield* Effect.logWarning(
              `Skill ${skill} is active but required secrets are missing from the request context: ${names.join(", ")}`
            )
          }
          yield* emitCustom("skill_secrets", { action: "bind_secrets", ...changes })
        })

      return {
        model: (request: ModelRequest, next) => {
          if (request.internal !== undefined) return next(request)
          const at = targetIndex(request.messages, memo)
          if (at < 0) {
            return secrets.size === 0 ? next(request) : Effect.zipRight(rebind({ _tag: "none" }), next(request))
          }
          const target = request.messages[at]!
          const known = resolved !== undefined && resolved.targetId === target.id
            ? Effect.succeed(resolved.resolution)
            : Effect.tap(resolve(target), (resolution) =>
              Effect.sync(() => {
                resolved = { targetId: target.id, resolution }
              }))
          return Effect.flatMap(secrets.size === 0 ? known : Effect.tap(known, rebind), (resolution) => {
            switch (resolution._tag) {
              case "none":
                return next(request)
              case "refused":
                return Effect.succeed(reply(resolution.text))
              case "active": {
                const messages = [...request.messages.slice(0, at), resolution.message, ...request.messages.slice(at)]
                if (marked === target.id) return next({ ...request, messages })
                // the run's first answer says which skill was active (the thread keeps what the user typed)
                return Effect.map(next({ ...request, messages }), (response) => {
                  marked = target.id
                  const message = response.message
                  return {
                    ...response,
                    message: {
                      ...message,
                      additional_kwargs: { ...message.additional_kwargs, [ACTIVATED_KEY]: resolution.skill.name }
                    }
                  }
                })
              }
            }
          })
        },
        ...(secrets.size === 0 ? {} : {
          tool: (call, next) => {
            const env = binding.env
            // (bash alone gets them; a subagent, under `task`, gets the names of the skills that bound them, and binds
            // them itself, where its own skills allow)
            const ran = call.name === "bash" && Object.keys(env).length > 0
              ? Effect.provideService(next(call), SkillSecrets.ActiveSecrets, { env })
              : call.name === "task" && binding.skills.length > 0
              ? Effect.provideService(next(call), SkillSecrets.DelegatedSkills, { skills: binding.skills })
              : next(call)
            // (a failure's text too: ToolErrorHandling, outside, writes it into the result the model reads)
            return Effect.map(ran, (result) => SkillSecrets.maskValue(result, masked)).pipe(
              Effect.mapError((error) =>
                error._tag === "ToolError" ? maskFailure(error, masked) as typeof error : error
              ),
              Effect.catchAllDefect((defect) => Effect.die(maskFailure(defect, masked)))
            )
          }
        })
      } satisfies MW.Wrappers
    }),
    { name: "SkillActivation", tools: options.describeTool === true ? [describeSkill(options)] : [] }
  )
}

// ---------------------------------------------------------------------------------------------------------
// describe_skill (deferred discovery)

/**
 * What `describe_skill` says about one skill. Its name, description, allowed tools and location come from a
 * SKILL.md anyone may install, so they are escaped: a description cannot close a tag or forge a harness block.
 */
export const describe = (skill: Skill): string => {
  const tools = skill.allowedTools === undefined ? "(all)" : skill.allowedTools.join(", ") || "(none)"
  return [
    `## Skill: ${escapeText(skill.name)}`,
    `- Description: ${escapeText(skill.description)} ${
      skill.category === "custom" ? "[custom, editable]" : "[built-in]"
    }`,
    `- Allowed tools: ${escapeText(tools)}`,
    `- Location: ${escapeText(skill.location)}`
  ].join("\n")
}

/** How well `words` match a skill: 10 for each word in its name, 1 for each in its description. */
const wordScore = (skill: Skill, words: ReadonlyArray<string>): number => {
  const name = skill.name.toLowerCase()
  const description = skill.description.toLowerCase()
  return words.reduce((sum, w) => sum + (name.includes(w) ? 10 : 0) + (description.includes(w) ? 1 : 0), 0)
}

/** The most skills a search (not a `select:`) gives. */
export const MAX_RESULTS = 5

/**
 * Skills matching a query, with `tool_search`'s forms (DeerFlow's `SkillCatalog.search`): `select:a,b` gives those
 * skills (uncapped); `+term more words` the skills whose name holds `term`, the more of the other words they hold
 * the earlier; other words the skills whose name (first) or description holds any of them. A search gives at most
 * `MAX_RESULTS`.
 */
export const findSkills = (skills: ReadonlyArray<Skill>, query: string): ReadonlyArray<Skill> => {
  const q = query.trim()
  if (q.startsWith("select:")) {
    const names = new Set(q.slice(7).split(",").map((n) => n.trim()).filter((n) => n !== ""))
    return [...names].flatMap((n) => skills.filter((s) => s.name === n))
  }
  const required = q.startsWith("+")
  const words = (required ? q.slice(1) : q).toLowerCase().split(/\s+/).filter((w) => w !== "")
  if (required) {
    const [term, ...rest] = words
    if (term === undefined) return []
    return skills
      .filter((skill) => skill.name.toLowerCase().includes(term))
      .map((skill, index) => ({ skill, index, score: wordScore(skill, rest) }))
      .sort((a, b) => b.score - a.score || a.index - b.index)
      .slice(0, MAX_RESULTS)
      .map((r) => r.skill)
  }
  return skills
    .map((skill) => ({ skill, score: wordScore(skill, words) }))
    .filter((r) => r.score > 0)
    .sort((a, b) => b.score - a.score || a.skill.name.localeCompare(b.skill.name))
    .slice(0, MAX_RESULTS)
    .map((r) => r.skill)
}

/**
 * `describe_skill`'s description, DeerFlow's docstring as LangChain's `@tool` hands it to the model (the indentation
 * of the lines after the first kept, as Python 3.12 leaves it in a function nested in another).
 */
const DESCRIBE_SKILL_DESCRIPTION = `Fetch usage metadata for installed skills so you can decide whether to load them.

        Skills appear by name in <skill_index> in the system prompt.  Until
        fetched, only the name is known.  This tool matches a query against
        installed skills and returns their full metadata — description, allowed
        tools, and file location — so you can decide whether to load the
        SKILL.md via read_file.

        Query forms:
          - "select:data-analysis,deep-research" -- fetch these exact skills (no cap)
          - "chart visualization" -- keyword search, best matches (up to 5)
          - "+podcast gen" -- require "podcast" in the name, rank by remaining terms (up to 5)`

const describeSkill = (options: Options) =>
  Tool.make({
    name: "describe_skill",
    description: DESCRIBE_SKILL_DESCRIPTION,
    parameters: Schema.Struct({
      name: Schema.String.annotations({
        description: "A skill name, `select:a,b`, `+term more words`, or words to search for."
      })
    }),
    handler: ({ name }) =>
      Effect.map(options.registry.catalog, (catalog) => {
        const usable = catalog.skills.filter((s) =>
          s.enabled && (options.allowlist === undefined || options.allowlist.includes(s.name))
        )
        const found = findSkills(usable, name)
        return found.length === 0 ? `No skills matched: ${name}` : found.map(describe).join("\n\n")
      })
  })

/** Its chain entry: a leading /<skill-name> puts the skill in every request of the run. */
export const entry = (options: Options) =>
  Chain.entry("SkillActivation", () => layer(options), [
    { inside: "LLMErrorHandling", reason: "a retried call still carries the activated skill" },
    {
      inside: "InputSanitization",
      reason: "it reads the run's own words (the user's, a subagent's task prompt), kept by the sanitiser"
    }
  ])
