/**
 * DeerMem's prompt files (`memory.backend_config.prompts_dir`): `memory_update.chat.yaml`, the memory update's
 * prompt as a chat template (a system message and a user message, `{current_memory}`, `{conversation}`,
 * `{correction_hint}`, `{staleness_review_section}`, `{consolidation_section}`); `staleness_review.yaml` and
 * `consolidation.yaml`, the words of those two sections (`{stale_facts}`; `{consolidation_groups}`,
 * `{max_groups}`); and per custom agent the same files in `{prompts_dir}/{agent}/`, which win for its memory.
 * (DeerMem's `fact_extraction.yaml` is used by nothing in DeerMem, and not read.)
 *
 * The directory's files are read at startup, an agent's when its memory is first updated (each once per app, as
 * DeerMem caches them). A template must keep its protocol (`state/MemoryTemplate.ts`: the memory and the
 * conversation, the JSON keys the answer is read by, the write gate's labels). The directory's file missing or
 * refused leaves the built-in words, an agent's file refused leaves the directory's (or the built-in), with one
 * warning naming the key, the files and why; DeerMem refuses to start (or fails the agent's updates) instead. An
 * agent without its own file uses the directory's, quietly.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Path from "node:path"
import { isSafeId } from "../../services/Sandbox.js"
import * as MemoryTemplate from "../../state/MemoryTemplate.js"
import { readYaml } from "./YamlFiles.js"

/** The memory update's template file. */
export const UPDATE_FILE = "memory_update.chat.yaml"

/** The staleness review's template file (`{stale_facts}`). */
export const STALENESS_FILE = "staleness_review.yaml"

/** Consolidation's template file (`{consolidation_groups}`, `{max_groups}`). */
export const CONSOLIDATION_FILE = "consolidation.yaml"

/** The templates of a memory from `prompts_dir`; each undefined: the built-in one. */
export interface Templates {
  readonly update?: MemoryTemplate.ChatTemplate | undefined
  readonly staleness?: string | undefined
  readonly consolidation?: string | undefined
}

/** A directory's templates (only those of its files that were found and accepted), and what was not used. */
interface Read {
  readonly templates: Templates
  readonly missing: ReadonlyArray<string>
  readonly refused: ReadonlyArray<{ readonly file: string; readonly problem: string }>
}

/** A file's template decoded and checked, or why not; undefined when the file does not exist. */
const readOne = <A>(
  file: string,
  decode: (data: unknown) => Either.Either<A, string>
): Either.Either<A, string> | undefined => {
  const read = readYaml(file)
  if (read._tag === "Missing") return undefined
  return read._tag === "Invalid" ? Either.left(read.problem) : decode(read.value)
}

/** The templates of one directory (`prompts_dir`, or an agent's folder in it), each file read and checked. */
export const readTemplates = (dir: string): Read => {
  const missing: Array<string> = []
  const refused: Array<{ file: string; problem: string }> = []
  const one = <A>(name: string, decode: (data: unknown) => Either.Either<A, string>): A | undefined => {
    const file = Path.join(dir, name)
    const found = readOne(file, decode)
    if (found === undefined) missing.push(file)
    else if (Either.isLeft(found)) refused.push({ file, problem: found.left })
    return found === undefined || Either.isLeft(found) ? undefined : found.right
  }
  const templates: Templates = {
    update: one(UPDATE_FILE, (data) => Either.flatMap(MemoryTemplate.decodeChat(data), MemoryTemplate.checkUpdate)),
    staleness: one(STALENESS_FILE, (data) => MemoryTemplate.decodeText(data, MemoryTemplate.STALENESS_PROTOCOL)),
    consolidation: one(
      CONSOLIDATION_FILE,
      (data) => MemoryTemplate.decodeText(data, MemoryTemplate.CONSOLIDATION_PROTOCOL)
    )
  }
  return { templates, missing, refused }
}

/** The prompt files of a memory service. */
export interface PromptFiles {
  /** The templates of an agent's memory (or the user's); each undefined: the built-in one. */
  readonly templates: (agentName: string | undefined) => Effect.Effect<Templates>
}

const BUILT_IN = "the built-in prompt is used"

/**
 * The prompt files of `prompts_dir` (`dir`, resolved; undefined: the built-in prompts): the directory's templates
 * are read now (one warning naming those missing or refused), an agent's when first asked for (one warning naming
 * those refused; a missing one is the directory's, quietly).
 */
export const make = (dir: string | undefined): Effect.Effect<PromptFiles> =>
  Effect.gen(function*() {
    if (dir === undefined) return { templates: () => Effect.succeed({}) }
    const warn = (problems: ReadonlyArray<string>) =>
      problems.length === 0
        ? Effect.void
        : Effect.logWarning(`memory.backend_config.prompts_dir (${dir}): ${problems.join("; ")}`)
    const own = readTemplates(dir)
    yield* warn([
      ...own.missing.map((file) => `${file}: not found (${BUILT_IN})`),
      ...own.refused.map(({ file, problem }) => `${file}: ${problem} (${BUILT_IN})`)
    ])
    const fallback = own.templates
    const fallbackOf = (name: string) => {
      const file = Path.join(dir, name)
      return own.missing.includes(file) || own.refused.some((r) => r.file === file) ? BUILT_IN : `${file} is used`
    }
    // read once per agent (the layer lives as long as the app): what an agent's memory uses
    const agents = new Map<string, Templates>()
    const ofAgent = (agent: string) =>
      Effect.gen(function*() {
        const known = agents.get(agent)
        if (known !== undefined) return known
        const read = readTemplates(Path.join(dir, agent))
        yield* warn(read.refused.map(({ file, problem }) => `${file}: ${problem} (${fallbackOf(Path.basename(file))})`))
        const templates: Templates = {
          update: read.templates.update ?? fallback.update,
          staleness: read.templates.staleness ?? fallback.staleness,
          consolidation: read.templates.consolidation ?? fallback.consolidation
        }
        agents.set(agent, templates)
        return templates
      })
    return {
      templates: (agentName) =>
        agentName === undefined || !isSafeId(agentName) ? Effect.succeed(fallback) : ofAgent(agentName)
    }
  })
