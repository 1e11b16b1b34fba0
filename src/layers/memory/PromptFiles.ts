/**
 * DeerMem's prompt files (`memory.backend_config.prompts_dir`): `memory_update.chat.yaml`, the memory update's
 * prompt as a chat template (a system message and a user message, `{current_memory}`, `{conversation}`,
 * `{correction_hint}`, `{staleness_review_section}`, `{consolidation_section}`), and per custom agent
 * `{prompts_dir}/{agent}/memory_update.chat.yaml`, which wins for that agent's memory.
 *
 * The directory's file is read at startup, an agent's when its memory is first updated (each once per app, as
 * DeerMem caches them). A template must keep the update's protocol (`state/MemoryTemplate.ts`: the memory and the
 * conversation, the JSON keys the answer is read by, the write gate's labels). The directory's file missing or
 * refused leaves the built-in prompt, an agent's file refused leaves the directory's (or the built-in), each with
 * one warning naming the key, the file and why; DeerMem refuses to start (or fails the agent's updates) instead.
 * An agent without its own file uses the directory's, quietly.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Path from "node:path"
import { isSafeId } from "../../services/Sandbox.js"
import * as MemoryTemplate from "../../state/MemoryTemplate.js"
import { readYaml } from "./YamlFiles.js"

/** The memory update's template file. */
export const UPDATE_FILE = "memory_update.chat.yaml"

/** A file's template: absent, the template, or why it is refused. */
type Found =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Template"; readonly template: MemoryTemplate.ChatTemplate }
  | { readonly _tag: "Refused"; readonly problem: string }

/** The memory update's template of a file, decoded and checked. */
export const readUpdateTemplate = (file: string): Found => {
  const read = readYaml(file)
  if (read._tag === "Missing") return read
  const checked = read._tag === "Invalid"
    ? Either.left(read.problem)
    : Either.flatMap(MemoryTemplate.decodeChat(read.value), MemoryTemplate.checkUpdate)
  return Either.match(checked, {
    onLeft: (problem) => ({ _tag: "Refused", problem }),
    onRight: (template) => ({ _tag: "Template", template })
  })
}

/** The prompt files of a memory service. */
export interface PromptFiles {
  /** The memory update's template of an agent's memory (or the user's), or undefined: the built-in prompt. */
  readonly updateTemplate: (agentName: string | undefined) => Effect.Effect<MemoryTemplate.ChatTemplate | undefined>
}

/**
 * The prompt files of `prompts_dir` (`dir`, resolved; undefined: the built-in prompt): the directory's template is
 * read now (one warning when it is missing or refused), an agent's when first asked for.
 */
export const make = (dir: string | undefined): Effect.Effect<PromptFiles> =>
  Effect.gen(function*() {
    if (dir === undefined) return { updateTemplate: () => Effect.succeed(undefined) }
    const warn = (file: string, problem: string, instead: string) =>
      Effect.logWarning(`memory.backend_config.prompts_dir (${dir}): ${file}: ${problem} (${instead} is used)`)
    const globalFile = Path.join(dir, UPDATE_FILE)
    const found = readUpdateTemplate(globalFile)
    if (found._tag !== "Template") {
      yield* warn(globalFile, found._tag === "Missing" ? "not found" : found.problem, "the built-in prompt")
    }
    const fallback = found._tag === "Template" ? found.template : undefined
    // read once per agent (the layer lives as long as the app): what an agent's memory uses
    const agents = new Map<string, MemoryTemplate.ChatTemplate | undefined>()
    const ofAgent = (agent: string) =>
      Effect.gen(function*() {
        if (agents.has(agent)) return agents.get(agent)
        const file = Path.join(dir, agent, UPDATE_FILE)
        const own = readUpdateTemplate(file)
        if (own._tag === "Refused") {
          yield* warn(file, own.problem, fallback === undefined ? "the built-in prompt" : `${globalFile}`)
        }
        const template = own._tag === "Template" ? own.template : fallback
        agents.set(agent, template)
        return template
      })
    return {
      updateTemplate: (agentName) =>
        agentName === undefined || !isSafeId(agentName) ? Effect.succeed(fallback) : ofAgent(agentName)
    }
  })
