/**
 * The skills a thread loaded (DeerFlow's `skill_context.py`): a `SKILL.md` under the skills root read with one of
 * the file-read tools (`summarization.skill_file_read_tool_names`) becomes a `skill_context` entry `{name, path,
 * description, loaded_at}`, which DurableContext keeps in the state and projects into every request, so the model
 * still knows which skills it loaded after their reads were summarised away. The read's result must carry the
 * `skill_context_entry` ToolErrorHandling stamps on successful skill reads, for the same path as the call: a
 * result that only looks like a skill file (an error, another path) is not a load.
 *
 * DurableContext records a load with the read's result (`loadOf`: the next request's policies see it, as after
 * DeerFlow's `before_model` capture; a re-read moves the skill to the end), and checks the history for loads it
 * has not recorded (`extractSkills`, `changedSkills`) before each model call.
 */
import * as Path from "node:path"
import type { AIMessage, Message, ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { SkillEntry } from "../state/ThreadState.js"
import { callPath, SKILL_CONTEXT_ENTRY_KEY, skillFilePath, stampSkillRead } from "./ToolErrorHandling.js"
import { headChars } from "../state/Chars.js"

/** Where skills are and which tools read them. */
export interface Settings {
  readonly skillsRoot: string
  readonly readTools: ReadonlySet<string>
}

const MAX_DESCRIPTION = 500

/** The stamped metadata of a skill read, when the result carries one. */
export const stamped = (message: ToolMessage): { readonly path: string; readonly description: string } | undefined => {
  const raw = message.additional_kwargs?.[SKILL_CONTEXT_ENTRY_KEY]
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined
  const { description, path } = raw as { readonly path?: unknown; readonly description?: unknown }
  if (typeof path !== "string") return undefined
  const text = typeof description === "string"
    ? headChars(description.replace(/\s+/g, " ").trim(), MAX_DESCRIPTION)
    : ""
  return { path, description: text }
}

/** A skill's name: the folder of its `SKILL.md`. */
const skillName = (path: string): string => Path.posix.basename(Path.posix.dirname(path))

/** The AI message before `index` that made the call `id`, if any. */
const callOf = (messages: ReadonlyArray<Message>, index: number, id: string) => {
  for (let i = index - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type !== "ai") continue
    const call = M.toolCalls(message as AIMessage).find((c) => c.id === id)
    if (call !== undefined) return call
  }
  return undefined
}

/** The skill loads among `messages[from..]`: each successful, stamped read of a `SKILL.md` under the root. */
export const extractSkills = (
  messages: ReadonlyArray<Message>,
  settings: Settings,
  from = 0
): ReadonlyArray<SkillEntry> => {
  const out: Array<SkillEntry> = []
  for (let i = from; i < messages.length; i++) {
    const message = messages[i]!
    if (message.type !== "tool" || message.status === "error") continue
    const metadata = stamped(message)
    if (metadata === undefined) continue
    const call = callOf(messages, i, message.tool_call_id)
    if (call === undefined || !settings.readTools.has(call.name)) continue
    const requested = callPath(call)
    const path = requested === undefined ? undefined : skillFilePath(requested, settings.skillsRoot)
    if (path === undefined || path !== metadata.path) continue
    out.push({ name: skillName(path), path, description: metadata.description, loaded_at: i })
  }
  return out
}

/**
 * The skill a read's result loads, when the call read a `SKILL.md` under the root and succeeded (what
 * ToolErrorHandling stamps on it, `stampSkillRead`); `loadedAt` is where the result goes in the thread.
 */
export const loadOf = (
  call: ToolCall,
  message: ToolMessage,
  settings: Settings,
  loadedAt: number
): SkillEntry | undefined => {
  if (!settings.readTools.has(call.name)) return undefined
  const metadata = stamped(stampSkillRead(message, call, settings.readTools, settings.skillsRoot))
  if (metadata === undefined) return undefined
  const path = metadata.path
  return { name: skillName(path), path, description: metadata.description, loaded_at: loadedAt }
}

/**
 * The loads that change the thread's skills: a skill it does not have yet, or has with another name or description.
 * Of several loads of one file only the last counts (the file may have changed between them).
 */
export const changedSkills = (
  current: ReadonlyArray<SkillEntry>,
  found: ReadonlyArray<SkillEntry>
): ReadonlyArray<SkillEntry> => {
  if (found.length === 0) return found
  const last = new Map<string, SkillEntry>()
  for (const s of found) {
    last.delete(s.path)
    last.set(s.path, s)
  }
  const byPath = new Map(current.map((s) => [s.path, s]))
  return Array.from(last.values()).filter((s) => {
    const known = byPath.get(s.path)
    return known === undefined || known.name !== s.name || known.description !== s.description
  })
}
