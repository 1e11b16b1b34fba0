/**
 * ToolErrorHandling (SPEC §5.13, lead chain slot 14): the innermost converter of tool failures.
 *
 * - A `ToolError` or a defect from anything inside becomes an error ToolMessage the model can read:
 *   `Error: Tool '{name}' failed with {ErrorType}: {detail}. ...`, the detail cut at 500 characters. A
 *   failing `task` gets the subagent failure text and `subagent_status: "failed"` so the delegation ledger
 *   and UI see a terminal status.
 * - `Interrupt` failures (a clarification) and fiber interruption pass through untouched.
 * - Every result gets `additional_kwargs.deerflow_tool_meta` (status, error_type, recoverable_by_model,
 *   recommended_next_action, source) when it has none, so ToolProgress reads a signal instead of text. A
 *   `web_fetch` page whose title is only an HTTP status line ("404 Not Found") is an error page, not a success.
 * - A successful read of `/mnt/skills/**\/SKILL.md` gets `additional_kwargs.skill_context_entry = {path,
 *   description}` (description from the YAML front matter), which DurableContext needs to remember the skill.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Path from "node:path"
import { AppConfigService } from "../services/AppConfig.js"
import { FRONT_MATTER } from "../services/Skills.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import type { Interrupt, ToolError, ToolResult } from "../services/ToolService.js"
import type { ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import { charsOf, headChars, joinChars } from "../state/Chars.js"
import * as SubagentStatus from "../state/SubagentStatus.js"
import { MAX_SKILL_DESCRIPTION } from "../state/ThreadState.js"
import * as Middleware from "./Middleware.js"
import * as OnDemand from "../internal/OnDemand.js"
import * as Chain from "./Chain.js"

/** The `additional_kwargs` key of the result metadata. */
export const TOOL_META_KEY = "deerflow_tool_meta"
/** The `additional_kwargs` key of a skill read. */
export const SKILL_CONTEXT_ENTRY_KEY = "skill_context_entry"
/** How much of an error detail the model sees. */
export const MAX_DETAIL_CHARS = 500

/** What every failure result ends with (DeerFlow's `_RECOVERY_HINT`; its tests pin the text). */
const RECOVERY_HINT = "Continue with available context, or choose an alternative tool."

/** What a tool result means, for the middlewares that react to results rather than read them. */
export interface ToolMeta {
  readonly status: "success" | "error" | "partial_success"
  readonly error_type: string | null
  readonly recoverable_by_model: boolean
  readonly recommended_next_action: "continue" | "rewrite_query" | "try_alternative" | "summarize" | "stop"
  readonly source: "exception" | "tool_return" | "content_analysis" | "progress_middleware"
}

type Category = Pick<ToolMeta, "recoverable_by_model" | "recommended_next_action"> & { readonly error_type: string }

const RULES: ReadonlyArray<readonly [ReadonlyArray<string>, Category]> = [
  [["401", "403", "unauthorized", "authentication", "invalid api key"], {
    error_type: "auth",
    recoverable_by_model: false,
    recommended_next_action: "stop"
  }],
  [["rate limit", "rate limited", "rate_limit"], {
    error_type: "rate_limited",
    recoverable_by_model: false,
    recommended_next_action: "summarize"
  }],
  [["timeout", "timed out", "connection", "network error", "temporarily unavailable"], {
    error_type: "transient",
    recoverable_by_model: false,
    recommended_next_action: "try_alternative"
  }],
  [["not configured", "not installed", "missing required", "disabled", "no api key"], {
    error_type: "config",
    recoverable_by_model: false,
    recommended_next_action: "stop"
  }],
  [["permission denied", "access denied", "path traversal", "forbidden"], {
    error_type: "permission",
    recoverable_by_model: true,
    recommended_next_action: "try_alternative"
  }],
  [["no results found", "no content found", "no images found", "no results"], {
    error_type: "no_results",
    recoverable_by_model: true,
    recommended_next_action: "rewrite_query"
  }],
  [["not found", "no such file", "does not exist", "404"], {
    error_type: "not_found",
    recoverable_by_model: true,
    recommended_next_action: "rewrite_query"
  }],
  [["unexpected error", "internal error", "500"], {
    error_type: "internal",
    recoverable_by_model: false,
    recommended_next_action: "stop"
  }]
]

const UNKNOWN: Category = {
  error_type: "unknown",
  recoverable_by_model: true,
  recommended_next_action: "try_alternative"
}

// Bare status codes match as whole numbers only ("took 500ms" is not an internal error).
const numeric: ReadonlyMap<string, RegExp> = new Map(
  RULES.flatMap(([keywords]) =>
    keywords.filter((k) => /^\d+$/.test(k)).map((k) => [k, new RegExp(`\\b${k}\\b`)] as const)
  )
)

// One case-insensitive scan instead of lower-casing the whole result.
const PARTIAL_MARKERS = new RegExp(
  [
    "partial results",
    "limited results",
    "truncated",
    "results may be incomplete",
    "no results found",
    "no content found",
    "no images found"
  ].join("|"),
  "i"
)

const NO_ERROR: ReadonlySet<string> = new Set(["none", "null", "false", "no", "ok", "success", "n/a", ""])

/** The category of an error text, by keywords (first rule wins). */
export const classifyErrorText = (text: string): Category => {
  const lower = text.toLowerCase()
  for (const [keywords, category] of RULES) {
    for (const keyword of keywords) {
      const re = numeric.get(keyword)
      if (re !== undefined ? re.test(lower) : lower.includes(keyword)) return category
    }
  }
  return UNKNOWN
}

// ---------------------------------------------------------------------------------------------------------
// web_fetch error pages (DeerFlow #4273): a page fetched with a 200 can still be a server's error page. Its
// title is then nothing but a status line ("404 Not Found", "Page not found"); matched by equality after
// dropping leading status codes and generic nouns, so "404 Ways to Cook Rice" stays a document.

/** The tools whose result is a rendered remote page. */
const PAGE_TOOLS: ReadonlySet<string> = new Set(["web_fetch"])

/** Reason phrases of error pages, by the error type the keyword rules give the same words. */
const ERROR_PAGE_PHRASES: ReadonlyMap<string, string> = new Map([
  ["unauthorized", "auth"],
  ["proxy authentication required", "auth"],
  ["forbidden", "permission"],
  ["access denied", "permission"],
  ["permission denied", "permission"],
  ["not found", "not_found"],
  ["too many requests", "rate_limited"],
  ["internal server error", "internal"],
  ["not implemented", "internal"],
  ["bad gateway", "transient"],
  ["service unavailable", "transient"],
  ["service temporarily unavailable", "transient"],
  ["gateway timeout", "transient"]
])

/** Words a server puts before the reason phrase ("HTTP Error 404 - Not Found", "Page not found"). */
const TITLE_FILLER: ReadonlySet<string> = new Set([
  "http", "error", "page", "the", "file", "or", "directory", "url", "resource"
])

// Python's str.splitlines and str.strip, as DeerFlow reads the title
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/
const pyStrip = (text: string): string => text.replace(/^[\s\x1c-\x1f]+/, "").replace(/[\s\x1c-\x1f]+$/, "")

/** The bare reason phrase of a title that is only a status line ("404 Not Found" -> "not found"), else undefined. */
const statusLine = (title: string): string | undefined => {
  const words = title.toLowerCase().replace(/[^0-9a-z]+/g, " ").split(" ").filter((w) => w !== "")
  let i = 0
  while (i < words.length) {
    const word = words[i]!
    const code = /^\d{3}$/.test(word) ? Number(word) : 0
    if (!TITLE_FILLER.has(word) && !(code >= 400 && code <= 599)) break
    i++
  }
  return i < words.length ? words.slice(i).join(" ") : undefined
}

/** The category of a `web_fetch` result whose title is only an HTTP error status line, else undefined. */
export const errorPageCategory = (name: string | undefined, content: string): Category | undefined => {
  if (name === undefined || !PAGE_TOOLS.has(name)) return undefined
  const first = content.split(LINE_BREAK).find((line) => pyStrip(line) !== "") ?? ""
  const phrase = statusLine(pyStrip(first.replace(/^#+/, "")))
  const type = phrase === undefined ? undefined : ERROR_PAGE_PHRASES.get(phrase)
  return type === undefined ? undefined : RULES.find(([, category]) => category.error_type === type)?.[1]
}

const meta = (status: ToolMeta["status"], source: ToolMeta["source"], category?: Category): ToolMeta => ({
  status,
  error_type: category?.error_type ?? null,
  recoverable_by_model: category?.recoverable_by_model ?? true,
  recommended_next_action: category?.recommended_next_action ??
    (status === "partial_success" ? "rewrite_query" : "continue"),
  source
})

/** The `error` field of a JSON object result (`{"error": "..."}`), unless it says "no error". */
const jsonError = (content: string): string | undefined => {
  const first = content.trimStart()[0]
  if (first !== "{") return undefined
  try {
    const data: unknown = JSON.parse(content)
    if (typeof data !== "object" || data === null || Array.isArray(data)) return undefined
    const error = (data as Record<string, unknown>).error
    // (what Python's `not error` reads as none: an empty list or object too)
    if (error === undefined || error === null || error === false || error === 0 || error === "") return undefined
    if (typeof error === "object" && Object.keys(error).length === 0) return undefined
    if (typeof error === "string") return NO_ERROR.has(error.trim().toLowerCase()) ? undefined : error
    return JSON.stringify(error)
  } catch {
    return undefined
  }
}

const isJsonObject = (content: string): boolean => {
  if (content.trimStart()[0] !== "{") return false
  try {
    const data: unknown = JSON.parse(content)
    return typeof data === "object" && data !== null && !Array.isArray(data)
  } catch {
    return false
  }
}

/** The metadata of a result the tool returned (not an exception), from its status and text. */
export const classifyResult = (message: ToolMessage): ToolMeta => {
  const content = M.contentText(message.content)
  if (message.status === "error" && !content.startsWith("Error:")) {
    const error = jsonError(content)
    if (error !== undefined) return meta("error", "tool_return", classifyErrorText(error))
    // A JSON object without an `error` key: its incidental values ({"user_id": 401}) say nothing.
    return meta("error", "tool_return", isJsonObject(content) ? UNKNOWN : classifyErrorText(content))
  }
  if (content.startsWith("Error:")) return meta("error", "tool_return", classifyErrorText(content.slice(6)))
  const error = jsonError(content)
  if (error !== undefined) return meta("error", "tool_return", classifyErrorText(error))
  const page = errorPageCategory(message.name, content)
  if (page !== undefined) return meta("error", "content_analysis", page)
  if (PARTIAL_MARKERS.test(content)) return meta("partial_success", "content_analysis")
  return meta("success", "content_analysis")
}

/** Adds `deerflow_tool_meta` when absent; returns the same message when it is already there. */
export const normalize = (message: ToolMessage): ToolMessage => {
  if (message.additional_kwargs?.[TOOL_META_KEY] !== undefined) return message
  return M.withKwargs(message, { [TOOL_META_KEY]: classifyResult(message) })
}

/**
 * Cuts an error detail to `MAX_DETAIL_CHARS` (497 characters and "..."), counted in code points as DeerFlow's
 * Python counts them, never leaving half an emoji.
 */
export const truncateDetail = (detail: string): string => {
  if (detail.length <= MAX_DETAIL_CHARS) return detail
  const chars = charsOf(detail)
  return chars.length > MAX_DETAIL_CHARS ? `${joinChars(chars, 0, MAX_DETAIL_CHARS - 3)}...` : detail
}

/** The class name and detail of a failure or defect. */
export const describeFailure = (error: unknown): { readonly type: string; readonly detail: string } => {
  const e = error as {
    readonly _tag?: unknown
    readonly errorType?: unknown
    readonly message?: unknown
  }
  const type = e?._tag === "ToolError" && typeof e.errorType === "string" && e.errorType !== ""
    ? e.errorType
    : typeof e?._tag === "string"
    ? e._tag
    : error instanceof Error
    ? error.name || "Error"
    : "Error"
  const raw = typeof e?.message === "string" ? e.message : typeof error === "string" ? error : String(error)
  return { type, detail: raw.trim() || type }
}

/**
 * The error result for a call whose tool failed (SPEC §5.13). `hide` masks the detail before its cut (the process's
 * and the run's secrets: `ProcessSecrets.ofRun`), which would keep the beginning of one where no later mask finds it.
 */
export const failureResult = (call: ToolCall, error: unknown, hide?: Redactor): ToolResult => {
  const name = call.name || "unknown_tool"
  const id = call.id || "missing_tool_call_id"
  const { detail, type } = describeFailure(error)
  const full = hide === undefined ? detail : hide.text(detail)
  const structured = `${type}: ${truncateDetail(full)}`
  let content = `Error: Tool '${name}' failed with ${structured}. ${RECOVERY_HINT}`
  let kwargs: Record<string, unknown> = {}
  if (name === "task") {
    // the subagent contract's failure text and metadata, as for a subagent that failed inside the tool
    const outcome = { status: "failed", error: structured } as const
    const text = SubagentStatus.resultText(outcome)
    content = `${text}${/[.!?]$/.test(text) ? "" : "."} ${RECOVERY_HINT}`
    kwargs = { ...SubagentStatus.metadata(outcome) }
  }
  kwargs[TOOL_META_KEY] = meta("error", "exception", classifyErrorText(structured))
  return { message: M.tool(content, id, { name, status: "error", additional_kwargs: kwargs }) }
}

// ---------------------------------------------------------------------------------------------------------
// Skill reads

/** The file path argument of a call (`path`, `file_path` or `filepath`). */
export const callPath = (call: ToolCall): string | undefined => {
  for (const key of ["path", "file_path", "filepath"]) {
    const value = call.args[key]
    if (typeof value === "string" && value.trim() !== "") return value.trim()
  }
  return undefined
}

/** The normalised path when `path` is a `SKILL.md` under the skills root, else `undefined`. */
export const skillFilePath = (path: string, skillsRoot: string): string | undefined => {
  // (normalising cannot make a SKILL.md basename out of a path that does not name one: the usual read is
  // settled without normalising anything)
  if (!path.includes("SKILL.md")) return undefined
  const root = Path.posix.normalize(skillsRoot).replace(/\/+$/, "")
  const normalized = Path.posix.normalize(path)
  if (!normalized.startsWith(`${root}/`) || Path.posix.basename(normalized) !== "SKILL.md") return undefined
  return normalized
}

/** The YAML front matter of a Markdown file such as SKILL.md; undefined when it has none or it does not parse. */
export const frontMatter = (content: string): Record<string, unknown> | undefined => {
  const match = FRONT_MATTER.exec(content)
  if (match === null) return undefined
  try {
    const data: unknown = OnDemand.yaml().parse(match[1]!)
    const isMapping = typeof data === "object" && data !== null && !Array.isArray(data)
    return isMapping ? data as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/**
 * The `description` of a SKILL.md front matter, whitespace-collapsed and cut to its first 500 characters (code
 * points), as DeerFlow's `_parse_description` and the `skill_context` reducer keep it.
 */
export const skillDescription = (content: string): string => {
  const description = frontMatter(content)?.description
  if (typeof description !== "string") return ""
  return headChars(description.replace(/\s+/g, " ").trim(), MAX_SKILL_DESCRIPTION)
}

/** Stamps `skill_context_entry` on a successful string read of a skill file; otherwise the same message. */
export const stampSkillRead = (
  message: ToolMessage,
  call: ToolCall,
  readTools: ReadonlySet<string>,
  skillsRoot: string
): ToolMessage => {
  if (!readTools.has(call.name) || message.status === "error" || typeof message.content !== "string") return message
  if (message.content.startsWith("Error:")) return message
  const path = callPath(call)
  if (path === undefined) return message
  const skillPath = skillFilePath(path, skillsRoot)
  if (skillPath === undefined) return message
  return {
    ...message,
    additional_kwargs: {
      ...message.additional_kwargs,
      [SKILL_CONTEXT_ENTRY_KEY]: { path: skillPath, description: skillDescription(message.content) }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The middleware

/**
 * Options: which tools read files (`summarization.skill_file_read_tool_names`) and where skills are mounted
 * (`skills.container_path`).
 */
export interface Options {
  readonly skillReadToolNames?: ReadonlyArray<string> | undefined
  readonly skillsRoot?: string | undefined
  /** The process's secrets a failure's detail is masked with before its cut (default: `ProcessSecrets` in context). */
  readonly redact?: Redactor | undefined
}

/** The wrapper, as a plain function (usable without a layer). */
export const wrap = (options: Options = {}) => {
  const readTools = new Set(options.skillReadToolNames ?? ["read_file", "read", "view", "cat"])
  const skillsRoot = options.skillsRoot ?? "/mnt/skills"
  const stamp = (call: ToolCall, result: ToolResult): ToolResult => {
    const stamped = normalize(stampSkillRead(result.message, call, readTools, skillsRoot))
    return stamped === result.message ? result : { ...result, message: stamped }
  }
  const onFailure = <R>(
    call: ToolCall,
    cause: Cause.Cause<ToolError | Interrupt>
  ): Effect.Effect<ToolResult, ToolError | Interrupt, R> => {
    // Interruption of the fiber (the run was cancelled) is not a tool failure.
    if (Cause.isInterrupted(cause)) return Effect.failCause(cause)
    const failures = Cause.failures(cause)
    for (const failure of failures) {
      if (failure._tag === "Interrupt") return Effect.fail(failure)
    }
    const first = Cause.failureOption(cause)
    const error = Option.isSome(first) ? first.value : Cause.squash(cause)
    return Effect.zipRight(
      Effect.logWarning(`tool '${call.name}' failed`).pipe(Effect.annotateLogs("cause", Cause.pretty(cause))),
      Effect.map(ProcessSecrets.ofRun(options.redact), (hide) => failureResult(call, error, hide))
    )
  }
  // One handler for both ends of the call (a map then a catch cost a step more on every call); a defect while
  // stamping the result is taken as a failure of the call, as it was when the stamping was a map inside the catch.
  return <R>(
    call: ToolCall,
    next: (call: ToolCall) => Effect.Effect<ToolResult, ToolError | Interrupt, R>
  ): Effect.Effect<ToolResult, ToolError | Interrupt, R> =>
    Effect.matchCauseEffect(next(call), {
      onFailure: (cause) => onFailure<R>(call, cause),
      onSuccess: (result) => {
        try {
          return Effect.succeed(stamp(call, result))
        } catch (defect) {
          return onFailure<R>(call, Cause.die(defect))
        }
      }
    })
}

/** The middleware with explicit options (the process's secrets: `ProcessSecrets` where it is built, if none given). */
export const layer = (options: Options = {}) =>
  Layer.unwrapEffect(Effect.map(ProcessSecrets.current, (redact) =>
    Middleware.make({ tool: wrap({ ...options, redact: options.redact ?? redact }) })))

/**
 * The middleware configured from `config.yaml` (`summarization.skill_file_read_tool_names`,
 * `skills.container_path`). Requires `AppConfigService`.
 */
export const layerFromConfig = () =>
  Layer.unwrapEffect(Effect.map(AppConfigService, ({ config }) =>
    layer({
      skillReadToolNames: config.summarization.skill_file_read_tool_names,
      skillsRoot: config.skills.container_path
    })))

/** Its chain entry: turns tool failures into results; inner short-circuits still get metadata. */
export const entry = (options: Options = {}) => Chain.entry("ToolErrorHandling", () => layer(options))
