/**
 * DeerMem's prompt templates (`prompts_dir`, `memory_update.chat.yaml`): a chat template decoded from its YAML,
 * checked to keep the memory update's protocol (the placeholders of the memory and the conversation, the JSON keys
 * the updater decodes and the labels the write gate reads), and rendered with Python's `str.format` syntax
 * (`{name}`, `{{` and `}}` for braces). Pure: reading the files is `layers/memory/PromptFiles.ts`'s.
 */
import * as Either from "effect/Either"
import type { UpdateVariables } from "./MemoryPrompt.js"
import * as PyFormat from "./PyFormat.js"
import { isRecord } from "./Json.js"

/** A message of a chat template: `system`, or the user's (DeerMem reads any other role as the user's). */
export interface TemplateMessage {
  readonly role: "system" | "user"
  readonly content: string
}

/** A chat template (`format: chat`): its messages, in order. */
export interface ChatTemplate {
  readonly messages: ReadonlyArray<TemplateMessage>
}

/** What a template must keep: the placeholders it may use and must use, the JSON keys it must name, and why. */
export interface Protocol {
  readonly placeholders: ReadonlyArray<string>
  readonly required: ReadonlyArray<string>
  readonly keys: ReadonlyArray<string>
  readonly why: string
}

/**
 * The memory update's (`memory_update.chat.yaml`): DeerMem's five placeholders, the memory and the conversation
 * among them; an answer is read only with `user`, `history` and `newFacts`, and the write gate stores only what is
 * labelled with `scope`, `durability` and `authority` (a template without them has every write refused).
 */
export const UPDATE_PROTOCOL: Protocol = {
  placeholders: [
    "current_memory",
    "conversation",
    "correction_hint",
    "staleness_review_section",
    "consolidation_section"
  ] satisfies ReadonlyArray<keyof UpdateVariables>,
  required: ["current_memory", "conversation"],
  keys: ["user", "history", "newFacts", "factsToRemove", "shouldUpdate", "scope", "durability", "authority"],
  why: `the memory update reads an answer with "user", "history" and "newFacts", and stores only what is ` +
    `labelled with "scope", "durability" and "authority"`
}

/** The staleness review's (`staleness_review.yaml`): the facts due, and the key of the removals. */
export const STALENESS_PROTOCOL: Protocol = {
  placeholders: ["stale_facts"],
  required: ["stale_facts"],
  keys: ["staleFactsToRemove"],
  why: `the review's removals are read from "staleFactsToRemove"`
}

/** Consolidation's (`consolidation.yaml`): the groups, and the keys of a merge and the write gate's labels. */
export const CONSOLIDATION_PROTOCOL: Protocol = {
  placeholders: ["consolidation_groups", "max_groups"],
  required: ["consolidation_groups"],
  keys: ["factsToConsolidate", "sourceIds", "consolidated", "scope", "durability", "authority"],
  why: `merges are read from "factsToConsolidate" ("sourceIds", "consolidated"), and stored only labelled with ` +
    `"scope", "durability" and "authority"`
}

/** Characters of a template's messages together, at most (DeerMem's own is about 12,000). */
export const MAX_TEMPLATE_CHARS = 60_000

/**
 * Placeholders of a template at most, counting repeats (DeerMem's use each once): each is a copy of its value, and
 * a template must not make a prompt of thousands of copies of the conversation.
 */
export const MAX_PLACEHOLDERS = 16

/** A template rendered as Python's `str.format` renders it (`PyFormat.format`); else why not. */
export const render = PyFormat.format

/**
 * A chat template from the value of its YAML file, as DeerMem's `load_prompt_messages` reads it (`format` `chat`
 * when given; a non-empty list `messages` of `{role, content}`, `role` `user` when missing); else why not.
 */
export const decodeChat = (data: unknown): Either.Either<ChatTemplate, string> => {
  const value = data ?? {}
  if (!isRecord(value)) return Either.left("expected a mapping with 'messages'")
  const format = value.format ?? "chat"
  if (format !== "chat") return Either.left(`expected format 'chat', got ${JSON.stringify(format)}`)
  const list = value.messages
  if (!Array.isArray(list) || list.length === 0) return Either.left("missing or empty 'messages'")
  const messages: Array<TemplateMessage> = []
  for (const [index, entry] of list.entries()) {
    if (!isRecord(entry)) return Either.left(`messages[${index}] is not a mapping with 'role' and 'content'`)
    const content = entry.content ?? ""
    if (typeof content !== "string") return Either.left(`messages[${index}].content is not text`)
    messages.push({ role: entry.role === "system" ? "system" : "user", content })
  }
  return Either.right({ messages })
}

/** Templates' texts checked against a protocol (size, rendering, placeholders, keys); else what is wrong. */
const checkTexts = (texts: ReadonlyArray<string>, protocol: Protocol): Either.Either<void, string> => {
  const size = texts.reduce((n, text) => n + text.length, 0)
  if (size > MAX_TEMPLATE_CHARS) return Either.left(`it holds ${size} characters, over ${MAX_TEMPLATE_CHARS}`)
  const probe = Object.fromEntries(protocol.placeholders.map((name) => [name, `\u0000${name}\u0000`]))
  const rendered: Array<string> = []
  for (const [index, text] of texts.entries()) {
    const out = render(text, probe)
    if (Either.isLeft(out)) return Either.left(texts.length === 1 ? out.left : `messages[${index}]: ${out.left}`)
    rendered.push(out.right)
  }
  const all = rendered.join("\n")
  const used = all.split("\u0000").length - 1
  if (used / 2 > MAX_PLACEHOLDERS) {
    return Either.left(`it uses ${used / 2} placeholders, over ${MAX_PLACEHOLDERS} (each is a copy of its value)`)
  }
  const placeholders = protocol.required.filter((name) => !all.includes(`\u0000${name}\u0000`))
  if (placeholders.length > 0) {
    return Either.left(`it does not use ${placeholders.map((name) => `{${name}}`).join(", ")}`)
  }
  const keys = protocol.keys.filter((key) => !all.includes(`"${key}"`))
  if (keys.length > 0) {
    return Either.left(
      `it does not name the answer's keys ${keys.map((key) => `"${key}"`).join(", ")} (${protocol.why})`
    )
  }
  return Either.void
}

/**
 * A chat template checked as a memory update's (`UPDATE_PROTOCOL`): its size, a user message, every message
 * rendering with DeerMem's five variables, the placeholders of the memory and the conversation, and the protocol's
 * keys; else what is wrong.
 */
export const checkUpdate = (template: ChatTemplate): Either.Either<ChatTemplate, string> => {
  if (!template.messages.some((m) => m.role === "user")) return Either.left("it has no user message")
  return Either.map(checkTexts(template.messages.map((m) => m.content), UPDATE_PROTOCOL), () => template)
}

/**
 * A text template from the value of its YAML file, as DeerMem's `load_prompt` reads it (`format` `text` when given,
 * a non-empty `template`), checked against `protocol`; else why not.
 */
export const decodeText = (data: unknown, protocol: Protocol): Either.Either<string, string> => {
  const value = data ?? {}
  if (!isRecord(value)) return Either.left("expected a mapping with 'template'")
  const format = value.format ?? "text"
  if (format !== "text") return Either.left(`expected format 'text', got ${JSON.stringify(format)}`)
  const template = value.template
  if (typeof template !== "string" || template === "") return Either.left("missing or empty 'template'")
  return Either.map(checkTexts([template], protocol), () => template)
}

/** A checked text template rendered with its values. */
export const renderText = (template: string, variables: Readonly<Record<string, string>>): string =>
  // a checked template renders with its protocol's variables: a failure here is a template never checked
  Either.getOrThrow(render(template, variables))

/** A memory update's request from a checked template: its system messages (joined), then its user messages. */
export interface RenderedUpdate {
  readonly system: string | undefined
  readonly user: ReadonlyArray<string>
}

/** A checked memory update's template rendered with the update's variables. */
export const renderUpdate = (template: ChatTemplate, variables: UpdateVariables): RenderedUpdate => {
  const values: Readonly<Record<string, string>> = { ...variables }
  // a checked template renders with these variables (`checkUpdate`): a failure here is a template never checked
  const text = (content: string) => Either.getOrThrow(render(content, values))
  const system = template.messages.filter((m) => m.role === "system").map((m) => text(m.content))
  return {
    system: system.length === 0 ? undefined : system.join("\n\n"),
    user: template.messages.filter((m) => m.role === "user").map((m) => text(m.content))
  }
}
