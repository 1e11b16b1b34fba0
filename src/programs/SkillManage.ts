/**
 * `skill_manage`, DeerFlow's tool for skill self-evolution (`skill_evolution.enabled`): the agent creates,
 * patches, edits and deletes its own skills under `custom/` of the skills directory, and adds or removes their
 * supporting files; every change goes into the skill's history (`CustomSkills`). The skills directory is read by
 * every user's agent, so the tool acts only in an admin's run (`RunOptions.admin`: the CLI's, a gateway token with
 * `admin: true`); the factory offers it only there, and the tool refuses anywhere else all the same.
 *
 * The arguments are the model's: decoded, each text bounded (`CustomSkills.MAX_FILE_BYTES`), the name hyphen-case
 * and the path a supporting file's (see `CustomSkills`); what it writes is redacted of the process's secrets
 * before it is checked and stored. Every refusal is an error result saying what was wrong; nothing is written
 * then. A change applies from the next run (the skills are read again when they changed).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { RunContext } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import * as Json from "../state/Json.js"
import * as Redact from "../state/Redact.js"
import * as CustomSkills from "./CustomSkills.js"

/** The tool's name (DeerFlow's). */
export const NAME = "skill_manage"

/** What the tool can do (DeerFlow's actions). */
export const ACTIONS = ["create", "patch", "edit", "delete", "write_file", "remove_file"] as const

/**
 * The longest text argument decoded (a SKILL.md, a supporting file, a patch's find or replace): twice the largest
 * file, so that a file a little too large is refused by the store, with its size and the limit.
 */
const MAX_TEXT_CHARS = 2 * CustomSkills.MAX_FILE_BYTES

const Text = Schema.String.pipe(Schema.maxLength(MAX_TEXT_CHARS))

/**
 * The arguments of `skill_manage` (DeerFlow's fields, described in its words: its skill_manage_tool.py `Args:`
 * entries as LangChain's `@tool(parse_docstring=True)` hands them to the model).
 */
export const Args = Schema.Struct({
  action: Schema.Literal(...ACTIONS).annotations({
    description: "One of create, patch, edit, delete, write_file, remove_file."
  }),
  name: Schema.String.pipe(Schema.maxLength(256)).annotations({ description: "Skill name in hyphen-case." }),
  content: Schema.optional(Schema.NullOr(Text)).annotations({
    description: "New file content for create, edit, or write_file."
  }),
  path: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(1024)))).annotations({
    description: "Supporting file path for write_file or remove_file."
  }),
  find: Schema.optional(Schema.NullOr(Text)).annotations({ description: "Existing text to replace for patch." }),
  replace: Schema.optional(Schema.NullOr(Text)).annotations({ description: "Replacement text for patch." }),
  expected_count: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 10_000))))
    .annotations({ description: "Optional expected number of replacements for patch." })
})
export type Args = typeof Args.Type

/** The answer in a run that is not an admin's: nothing is written. */
export const NOT_ADMIN = "Error: Skills are read by every user's agent; only an admin's run may create or change " +
  "them. Nothing was written."

const refuse = (message: string) => ({ content: `Error: ${message}`, status: "error" as const })

/** `skill_manage` over the store of a skills directory; `redact`: the secrets a skill must not hold. */
export const make = (
  store: CustomSkills.Store,
  redact: Redact.Redactor = Redact.none
): Tool.Tool<Args> =>
  Tool.make({
    name: NAME,
    // DeerFlow's docstring, word for word
    description: "Manage custom skills under skills/custom/.",
    parameters: Args,
    handler: (args) =>
      Effect.gen(function*() {
        const context = yield* RunContext
        // every user's agent reads the skills directory: only an admin's run changes it (see gateway/Auth.ts)
        if (context.options.admin !== true) return { content: NOT_ADMIN, status: "error" as const }
        const by: CustomSkills.Author = { author: "agent", threadId: context.threadId }
        const name = args.name
        const content = args.content == null ? undefined : redact.text(args.content)
        switch (args.action) {
          case "create":
            if (content === undefined) return refuse("content is required for create.")
            yield* store.create(name, content, by)
            return `Created custom skill '${name.trim()}'.`
          case "edit":
            if (content === undefined) return refuse("content is required for edit.")
            yield* store.edit(name, content, by)
            return `Updated custom skill '${name.trim()}'.`
          case "patch": {
            if (args.find == null || args.replace == null) return refuse("find and replace are required for patch.")
            const done = yield* store.patch(name, {
              find: args.find,
              replace: redact.text(args.replace),
              expectedCount: args.expected_count ?? undefined
            }, by)
            return `Patched custom skill '${name.trim()}' (${done.replaced} replacement(s) applied, ${done.found} ` +
              "match(es) found)."
          }
          case "delete":
            yield* store.remove(name, by)
            return `Deleted custom skill '${name.trim()}'.`
          case "write_file":
            if (args.path == null || content === undefined) {
              return refuse("path and content are required for write_file.")
            }
            yield* store.writeFile(name, args.path, content, by)
            return `Wrote '${args.path}' for custom skill '${name.trim()}'.`
          case "remove_file":
            if (args.path == null) return refuse("path is required for remove_file.")
            yield* store.removeFile(name, args.path, by)
            return `Removed '${args.path}' from custom skill '${name.trim()}'.`
        }
      }).pipe(
        Effect.catchTag("CustomSkillError", (error) =>
          error.reason === "io"
            ? Effect.zipRight(
              Effect.logError(`skill_manage: ${error.message}`, error.cause),
              Effect.succeed(refuse("The skill could not be written (see the server's log). Nothing was changed."))
            )
            : Effect.succeed(refuse(
              // what SkillScan blocked, its findings as DeerFlow's `_raise_static_block` adds them (secrets redacted)
              error.findings === undefined ? error.message : `${error.message} Findings: ${
                Json.pythonDumpsUnsorted({ skill_name: args.name.trim(), findings: error.findings })
              }`
            )))
      )
  })
