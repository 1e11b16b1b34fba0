/**
 * The sandbox tools (SPEC §7.2–7.9): `bash`, `ls`, `read_file`, `write_file`, `str_replace`, `glob`, `grep`,
 * `present_files` and, for vision models, `view_image`. Arguments are Schema-typed (every field described,
 * so the JSON Schema the model sees explains itself). Each call acquires the run's thread sandbox lazily
 * (idempotent), and every failure comes back as a readable `Error: ...` result naming virtual paths only.
 *
 * This module assembles them; they live under `sandbox/tools/`: `BashTool`, `ReadTools` (`ls`, `read_file`,
 * `view_image`), `WriteTools` (`write_file`, `str_replace`), `SearchTools` (`glob`, `grep`) and `PresentFiles`,
 * over a shared `ToolContext`, with their arguments (`Args`), the RE2 pattern compiler (`Patterns`) and pure
 * helpers (`Text`, `Listing`, `Images`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AppConfigService } from "../services/AppConfig.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import type * as Tool from "../services/Tool.js"
import { ToolService } from "../services/ToolService.js"
import * as BashTool from "./sandbox/tools/BashTool.js"
import * as PresentFiles from "./sandbox/tools/PresentFiles.js"
import * as ReadTools from "./sandbox/tools/ReadTools.js"
import * as SearchTools from "./sandbox/tools/SearchTools.js"
import * as ToolContext from "./sandbox/tools/ToolContext.js"
import * as WriteTools from "./sandbox/tools/WriteTools.js"
import * as Toolkit from "./Toolkit.js"

export {
  BashArgs,
  GlobArgs,
  GrepArgs,
  LsArgs,
  PresentFilesArgs,
  ReadFileArgs,
  StrReplaceArgs,
  ViewImageArgs,
  WriteFileArgs
} from "./sandbox/tools/Args.js"
export { limitsText, publishingOutput, TOOL_OUTPUT_EVENT, TOOL_OUTPUT_MAX_CHARS } from "./sandbox/tools/BashTool.js"
export { IMAGE_TYPES, MAX_IMAGE_BYTES, sniffImage } from "./sandbox/tools/Images.js"
export { isJunk, JUNK_NAMES } from "./sandbox/tools/Listing.js"
export type { Compiled } from "./sandbox/tools/Patterns.js"
export { compileGlob, compileSearch, globSource } from "./sandbox/tools/Patterns.js"
export { SEARCH_TIME_LIMIT } from "./sandbox/tools/SearchTools.js"
export {
  clampMax,
  countOccurrences,
  headTruncate,
  normalizeVirtual,
  replaceLiteral,
  selectLines
} from "./sandbox/tools/Text.js"

/** What the tool list is built for. */
export interface Options {
  /** Whether the model accepts images (`view_image` is offered only then). */
  readonly vision: boolean
  /** Offer `bash` (default true). Without bubblewrap and host bash, bash answers how to enable it. */
  readonly bash?: boolean
}

/** The names of the tools, in list order. */
export const toolNames = (options: Options): ReadonlyArray<string> => [
  ...(options.bash === false ? [] : ["bash"]),
  "ls",
  "read_file",
  "write_file",
  "str_replace",
  "glob",
  "grep",
  "present_files",
  ...(options.vision ? ["view_image"] : [])
]

/**
 * The tools over the sandbox of the run they are called in. Build them once (per agent): each call acquires
 * the sandbox of the run's thread (`RunContext.threadId`/`userId`) from the provider, which is idempotent.
 */
export const tools = (options: Options) =>
  Effect.map(ToolContext.make, (context) => {
    const all: Array<Tool.Tool> = []
    if (options.bash !== false) all.push(BashTool.bash(context))
    all.push(
      ReadTools.ls(context),
      ReadTools.readFile(context),
      WriteTools.writeFile(context),
      WriteTools.strReplace(context),
      SearchTools.glob(context),
      SearchTools.grep(context),
      PresentFiles.presentFiles(context)
    )
    if (options.vision) all.push(ReadTools.viewImage(context))
    return all as ReadonlyArray<Tool.Tool>
  })

/**
 * `glob` or `grep` with the operator's cap on `max_results` (a `tools[]` entry's `max_results`, which DeerFlow's
 * config.example.yaml sets: 200 and 100); the smaller of it and the call's own wins.
 */
export const search = (name: "glob" | "grep", maxResults: number) =>
  Effect.map(ToolContext.make, (context) =>
    name === "glob" ? SearchTools.glob(context, { maxResults }) : SearchTools.grep(context, { maxResults }))

/** The base ToolService over the sandbox tools. Unknown tools are answered as Toolkit does. */
export const layer = (
  options: Options
): Layer.Layer<ToolService, never, SandboxProvider | AppConfigService> =>
  Layer.effect(ToolService, Effect.map(tools(options), Toolkit.make))
