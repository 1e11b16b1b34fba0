/**
 * The sandbox tools (SPEC §7.2–7.9): `bash`, `ls`, `read_file`, `write_file`, `str_replace`, `glob`, `grep`,
 * `present_files` and, for vision models, `view_image`. Arguments are Schema-typed (every field described,
 * so the JSON Schema the model sees explains itself). Each call acquires the run's thread sandbox lazily
 * (idempotent), and every failure comes back as a readable `Error: ...` result naming virtual paths only.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type { RE2JS } from "re2js"
import * as OnDemand from "../internal/OnDemand.js"
import type { SandboxConfig } from "../services/AppConfig.js"
import { AppConfigService, withDefault } from "../services/AppConfig.js"
import { RunContext } from "../services/RunContext.js"
import { RunEvents } from "../services/RunEvents.js"
import type { Sandbox } from "../services/Sandbox.js"
import { absoluteVirtual, OUTPUTS, SandboxError, SandboxProvider, SKILLS, UPLOADS, WORKSPACE } from "../services/Sandbox.js"
import * as Tool from "../services/Tool.js"
import type { HandlerOutput } from "../services/Tool.js"
import { ToolService } from "../services/ToolService.js"
import type { ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as ReadMark from "../state/ReadMark.js"
import { displayPath } from "./LocalSandbox.js"
import * as Toolkit from "./Toolkit.js"

// ---------------------------------------------------------------------------------------------------------
// Pure helpers

/** Head-truncates to `max` chars (0 = unlimited) with SPEC's marker; the result never exceeds `max`. */
export const headTruncate = (text: string, max: number, hint: string): string => {
  if (max <= 0 || text.length <= max) return text
  const marker = (kept: number) => `\n... [truncated: showing first ${kept} of ${text.length} chars. ${hint}] ...`
  const kept = Math.max(0, max - marker(text.length).length)
  if (kept === 0) return text.slice(0, max)
  return text.slice(0, kept) + marker(kept)
}

/** Names left out of listings and searches (version control, dependencies, caches, build output, logs). */
export const JUNK_NAMES: ReadonlySet<string> = new Set([
  ".git",
  ".svn",
  ".hg",
  ".bzr",
  "node_modules",
  "bower_components",
  "__pycache__",
  ".venv",
  "venv",
  ".tox",
  ".nox",
  ".eggs",
  ".mypy_cache",
  ".pytest_cache",
  ".ruff_cache",
  ".ipynb_checkpoints",
  ".cache",
  ".next",
  ".nuxt",
  ".turbo",
  ".parcel-cache",
  "dist",
  "build",
  "coverage",
  ".nyc_output",
  "htmlcov",
  ".idea",
  ".vscode",
  ".DS_Store",
  "Thumbs.db",
  "desktop.ini"
])

const JUNK_PATTERNS = [/\.log$/, /\.py[co]$/, /\.sw[po]$/, /~$/, /\.egg-info$/, /^\.upload-.*\.part$/, /\.tmp$/]

/** Whether a file or directory name is junk to leave out (`.git`, `node_modules`, `*.log`, ...). */
export const isJunk = (name: string): boolean => JUNK_NAMES.has(name) || JUNK_PATTERNS.some((re) => re.test(name))

/**
 * A glob as the source of an RE2 regular expression over `/`-separated relative paths: `*` and `?` stay
 * within one segment, `**` spans segments, `[...]` and `{a,b}` work as in shells. A pattern without `/`
 * matches a name at any depth (like `**\/NAME`). The result uses no look-arounds, so RE2 compiles it.
 */
export const globSource = (pattern: string): string => {
  const source = pattern.includes("/") ? pattern.replace(/^\.\//, "") : `**/${pattern}`
  let out = ""
  let braces = 0
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!
    if (c === "*") {
      if (source[i + 1] === "*") {
        const slash = source[i + 2] === "/"
        out += slash ? "(?:.*/)?" : ".*"
        i += slash ? 2 : 1
      } else {
        out += "[^/]*"
      }
    } else if (c === "?") {
      out += "[^/]"
    } else if (c === "[") {
      const end = source.indexOf("]", i + 2)
      if (end === -1) {
        out += "\\["
      } else {
        let body = source.slice(i + 1, end)
        if (body.startsWith("!")) body = `^${body.slice(1)}`
        out += `[${body.replace(/\\/g, "\\\\")}]`
        i = end
      }
    } else if (c === "{") {
      braces++
      out += "(?:"
    } else if (c === "}" && braces > 0) {
      braces--
      out += ")"
    } else if (c === "," && braces > 0) {
      out += "|"
    } else {
      out += c.replace(/[.+^${}()|[\]\\]/g, "\\$&")
    }
  }
  return `^${out}${")".repeat(braces)}$`
}

/** A compiled pattern, or why it cannot be used (a sentence the model can act on). */
export type Compiled = { readonly regex: RE2JS } | { readonly error: string }

const syntaxMessage = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).replace(/^error parsing regexp: /, "")

/** A glob compiled for matching relative paths (RE2: linear time in the path's length, whatever the glob). */
export const compileGlob = (pattern: string): Compiled => {
  const { RE2JS } = OnDemand.re2js()
  try {
    return { regex: RE2JS.compile(globSource(pattern)) }
  } catch (error) {
    return { error: syntaxMessage(error) }
  }
}

// `\1`..`\9` or `\k<name>` outside a character class: a backreference (RE2 has none; its translation of
// JavaScript syntax would quietly read `\k<name>` as the text `k<name>`).
const hasBackreference = (pattern: string): boolean => {
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "\\") {
      const next = pattern[i + 1]
      const numbered = next !== undefined && next >= "1" && next <= "9"
      if (!inClass && (numbered || (next === "k" && pattern[i + 2] === "<"))) return true
      i++
    } else if (c === "[") inClass = true
    else if (c === "]") inClass = false
  }
  return false
}

const LINEAR_ONLY = "the search runs in linear time (RE2 syntax: JavaScript's, without look-aheads and backreferences)"

/**
 * The regular expression `grep` runs, compiled with RE2 so that matching is linear in the line's length
 * whatever the pattern (a pattern like `^(a+)+$` cannot hang the process). JavaScript syntax is translated
 * (named groups, `\u{...}`, look-behinds work); look-aheads and backreferences are refused with a reason.
 */
export const compileSearch = (
  pattern: string,
  options: { readonly literal: boolean; readonly caseSensitive: boolean }
): Compiled => {
  const { RE2JS } = OnDemand.re2js()
  const flags = options.caseSensitive ? 0 : RE2JS.CASE_INSENSITIVE
  if (options.literal) return { regex: RE2JS.compile(RE2JS.quote(pattern), flags) }
  if (hasBackreference(pattern)) {
    return {
      error: `backreferences (\\1, \\k<name>) are not supported: ${LINEAR_ONLY}. Match the repeated text ` +
        "explicitly, or search more broadly and read the matching lines."
    }
  }
  const compile = (flags: number) => RE2JS.compile(RE2JS.translateRegExp(pattern), flags | RE2JS.LOOKBEHINDS)
  try {
    return { regex: compile(flags) }
  } catch (error) {
    // Case folding is a `(?i)` prefix that would show in the message: report the error of the pattern as given.
    const plain = Either.try(() => compile(0))
    const message = syntaxMessage(Either.isLeft(plain) ? plain.left : error)
    if (/`\(\?[=!]/.test(message)) {
      return {
        error: `look-aheads ((?=...), (?!...)) are not supported: ${LINEAR_ONLY}. Search without the ` +
          "look-ahead and read the matching lines, or use literal=true for plain text."
      }
    }
    return { error: message }
  }
}

/** The effective result cap: the requested one (≤0 or absent → default), clamped to [1, upper]. */
export const clampMax = (requested: number | undefined, fallback: number, upper: number): number => {
  const value = requested === undefined || requested <= 0 ? fallback : Math.floor(requested)
  return Math.min(Math.max(value, 1), upper)
}

/** Lines `start..end` (1-based, inclusive) of a text, or why that range is wrong. */
export const selectLines = (
  content: string,
  start: number | undefined,
  end: number | undefined
): { readonly text: string } | { readonly error: string } => {
  if (start !== undefined && start < 1) return { error: `start_line must be >= 1 (got ${start})` }
  if (end !== undefined && end < 1) return { error: `end_line must be >= 1 (got ${end})` }
  if (start !== undefined && end !== undefined && start > end) {
    return { error: `start_line (${start}) is after end_line (${end}); no lines in that range` }
  }
  const lines = content.split(/\r?\n/)
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  const first = start ?? 1
  if (first > lines.length) {
    return lines.length === 0 && first === 1
      ? { text: "" }
      : { error: `start_line ${first} is past the end of the file (${lines.length} lines)` }
  }
  return { text: lines.slice(first - 1, Math.min(end ?? lines.length, lines.length)).join("\n") }
}

/** How many times `needle` occurs in `text` (non-overlapping). */
export const countOccurrences = (text: string, needle: string): number => {
  if (needle === "") return 0
  let count = 0
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++
  return count
}

/** Replaces literally (no `$` patterns): the first occurrence, or all of them. */
export const replaceLiteral = (text: string, needle: string, replacement: string, all: boolean): string => {
  if (all) return text.split(needle).join(replacement)
  const at = text.indexOf(needle)
  return at === -1 ? text : text.slice(0, at) + replacement + text.slice(at + needle.length)
}

/** Image types view_image accepts, by extension. */
export const IMAGE_TYPES: Readonly<Record<string, string>> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".webp": "image/webp",
  ".gif": "image/gif"
}

/** The largest image view_image accepts. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024

/** The image type the bytes really are (magic bytes), if any of IMAGE_TYPES. */
export const sniffImage = (bytes: Uint8Array): string | undefined => {
  const starts = (...sig: Array<number>) => sig.every((b, i) => bytes[i] === b)
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png"
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg"
  const at = (offset: number, text: string) => [...text].every((c, i) => bytes[offset + i] === c.charCodeAt(0))
  if (at(0, "GIF87a") || at(0, "GIF89a")) return "image/gif"
  if (at(0, "RIFF") && at(8, "WEBP")) return "image/webp"
  return undefined
}

/** A virtual path with duplicate slashes and `.` segments removed (call after the sandbox has accepted it). */
export const normalizeVirtual = (path: string): string =>
  `/${path.split("/").filter((segment) => segment !== "" && segment !== ".").join("/")}`

const extensionOf = (path: string): string => {
  const name = path.slice(path.lastIndexOf("/") + 1)
  const dot = name.lastIndexOf(".")
  return dot <= 0 ? "" : name.slice(dot).toLowerCase()
}

const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`)

// ---------------------------------------------------------------------------------------------------------
// Tools

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

const Description = Schema.String.annotations({
  description: "One short sentence on why you are running this (shown to the user). Always give this argument first."
})

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { nullable: true })

const VirtualPath = (what: string) =>
  Schema.String.annotations({
    description: `${what} A path under ${WORKSPACE}, ${UPLOADS}, ${OUTPUTS} or ${SKILLS} ` +
      `(a relative path is taken from ${WORKSPACE}).`
  })

// Argument schemas are built once: building them per run costs more than the rest of a run's setup.

/** The arguments of `bash`. */
export const BashArgs = Schema.Struct({
  description: Description,
  command: Schema.String.annotations({
    description: "The bash command to run. Use absolute virtual paths (/mnt/user-data/...) for files."
  })
})

/** The arguments of `ls`. */
export const LsArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The directory to list.")
})

/** The arguments of `read_file`. */
export const ReadFileArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to read."),
  start_line: optional(Schema.Int.annotations({ description: "First line to read (1-based). Default: 1." })),
  end_line: optional(
    Schema.Int.annotations({
      description: "Last line to read (1-based, inclusive). Default: the end of the file."
    })
  )
})

/** The arguments of `write_file`. */
export const WriteFileArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to write (skills are read-only)."),
  content: Schema.String.annotations({ description: "The text to write." }),
  append: withDefault(
    Schema.Boolean.annotations({
      description: "Add to the end of the file instead of replacing it. Default: false."
    }),
    () => false
  )
})

/** The arguments of `str_replace`. */
export const StrReplaceArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to edit."),
  old_str: Schema.String.annotations({
    description: "The exact text to replace (whitespace and newlines included)."
  }),
  new_str: Schema.String.annotations({ description: "The text to put in its place." }),
  replace_all: withDefault(
    Schema.Boolean.annotations({
      description: "Replace every occurrence instead of exactly one. Default: false."
    }),
    () => false
  )
})

/** The arguments of `glob`. */
export const GlobArgs = Schema.Struct({
  description: Description,
  pattern: Schema.String.annotations({
    description: "The glob, relative to path (e.g. `**/*.ts`, `src/*.md`, `*.csv`)."
  }),
  path: VirtualPath("The directory to search."),
  include_dirs: withDefault(
    Schema.Boolean.annotations({ description: "Also list matching directories. Default: false." }),
    () => false
  ),
  max_results: withDefault(
    Schema.Int.annotations({ description: "At most this many paths (1-1000). Default: 200." }),
    () => 200
  )
})

/** The arguments of `grep`. */
export const GrepArgs = Schema.Struct({
  description: Description,
  pattern: Schema.String.annotations({
    description: "The regular expression (or plain text with literal=true)."
  }),
  path: VirtualPath("The directory (searched recursively) or file to search."),
  glob: optional(
    Schema.String.annotations({ description: "Only search files whose path matches this glob (e.g. `*.py`)." })
  ),
  literal: withDefault(
    Schema.Boolean.annotations({
      description: "Treat pattern as plain text, not a regular expression. Default: false."
    }),
    () => false
  ),
  case_sensitive: withDefault(
    Schema.Boolean.annotations({ description: "Match case exactly. Default: false." }),
    () => false
  ),
  max_results: withDefault(
    Schema.Int.annotations({ description: "At most this many matching lines (1-500). Default: 100." }),
    () => 100
  )
})

/** The arguments of `present_files`. */
export const PresentFilesArgs = Schema.Struct({
  filepaths: Schema.Array(Schema.String.annotations({ description: `A file under ${OUTPUTS}.` })).annotations({
    description: `The files to present, as absolute paths under ${OUTPUTS}.`
  })
})

/** The arguments of `view_image`. */
export const ViewImageArgs = Schema.Struct({
  image_path: Schema.String.annotations({
    description: `The image, as an absolute path under ${WORKSPACE}, ${UPLOADS} or ${OUTPUTS}.`
  })
})

const GREP_MAX_FILE_BYTES = 4 * 1024 * 1024
const GREP_MAX_LINE_CHARS = 300
const GREP_COUNT_LIMIT = 10_000
const WALK_MAX_ENTRIES = 50_000

/** How long one `glob` or `grep` may search; it then answers with what it found so far, saying so. */
export const SEARCH_TIME_LIMIT = Duration.seconds(20)

// A search hands the thread back to the event loop after about this much matching work (characters of
// lines, or paths), so other runs of the process (and Ctrl-C) are served while a long search goes on.
const SEARCH_SLICE_CHARS = 256 * 1024

/**
 * Runs a search that yields between slices of work for at most SEARCH_TIME_LIMIT; `true` when it ran to
 * the end, `false` when the limit stopped it (what it collected so far stays valid).
 */
const searchWithin = <E>(search: Effect.Effect<void, E>): Effect.Effect<boolean, E> =>
  Effect.timeoutTo(search, { duration: SEARCH_TIME_LIMIT, onSuccess: () => true, onTimeout: () => false })

/** Counts matching work; `true` when a slice is complete and the search should yield to the scheduler. */
const slicer = () => {
  let work = 0
  return (chars: number): boolean => {
    work += chars
    if (work < SEARCH_SLICE_CHARS) return false
    work = 0
    return true
  }
}

// Yields to the event loop, not only to other fibers: `Effect.yieldNow` resumes through a microtask, so a
// search yielding only that way would still hold back I/O callbacks (a model's streamed answer), timers and
// signals until it ended.
const breathe: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const stoppedNote = (what: string) =>
  `\n(The search stopped after ${Duration.toSeconds(SEARCH_TIME_LIMIT)} s, so ${what}; narrow the path, the ` +
  "pattern or the glob.)"
const WRITE_ERROR_MAX_CHARS = 2000

const errorText = (error: SandboxError) => `Error: ${error.message}`

/** The resource limits of bash commands, as the bash tool's description states them (empty when none). */
export const limitsText = (settings: SandboxConfig): string => {
  const parts = [
    settings.max_memory_mb > 0 ? `${settings.max_memory_mb} MB of memory per process` : "",
    settings.max_processes > 0 ? `${settings.max_processes} processes and threads at once` : "",
    settings.tmp_size_mb > 0 ? `${settings.tmp_size_mb} MB in /tmp` : "",
    settings.max_file_size_mb > 0 ? `${settings.max_file_size_mb} MB per file` : "",
    settings.disk_quota_mb > 0 ? `${settings.disk_quota_mb} MB for all of the thread's files` : ""
  ].filter((part) => part !== "")
  return parts.length === 0 ? "" : ` Limits: ${parts.join(", ")}; a command that exceeds one fails or is stopped.`
}

type Body = (sandbox: Sandbox, call: ToolCall) => Effect.Effect<HandlerOutput, SandboxError, RunEvents>

/**
 * The custom event that shows a running command's output as it comes (`bash`): `{ type: "tool_output",
 * tool_call_id, tool_name, text }`, a line or a few at a time, before the call's result (which is unchanged:
 * the model sees only the result). DeerFlow has no such event; the name is Antler's.
 */
export const TOOL_OUTPUT_EVENT = "tool_output"

/** The most output of one call sent as `tool_output` events; past it, one last event says `truncated: true`. */
export const TOOL_OUTPUT_MAX_CHARS = 64 * 1024

/**
 * Runs `body` with an output callback whose pieces go out as `tool_output` events of `call`, in order, from a
 * fiber of their own (the callback is called from a process's stream handlers, outside any fiber); the last
 * pieces are sent before `body`'s result is returned.
 */
export const publishingOutput = <A, E, R>(
  call: ToolCall,
  body: (onOutput: (text: string) => void) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | RunEvents> =>
  Effect.gen(function*() {
    const events = yield* RunEvents
    const queue = yield* Queue.unbounded<string>()
    let sent = 0
    let truncated = false
    const event = (data: Record<string, unknown>) =>
      events.emit({
        type: "custom",
        name: TOOL_OUTPUT_EVENT,
        data: { type: TOOL_OUTPUT_EVENT, tool_call_id: call.id, tool_name: call.name, ...data }
      })
    const publish = (pieces: Iterable<string>) =>
      Effect.suspend(() => {
        if (truncated) return Effect.void
        let text = [...pieces].join("")
        if (text === "") return Effect.void
        if (sent + text.length <= TOOL_OUTPUT_MAX_CHARS) {
          sent += text.length
          return event({ text })
        }
        text = text.slice(0, TOOL_OUTPUT_MAX_CHARS - sent)
        truncated = true
        return Effect.zipRight(text === "" ? Effect.void : event({ text }), event({ text: "", truncated: true }))
      })
    const pump = yield* Effect.fork(Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, Infinity), publish)))
    const rest = Fiber.interrupt(pump).pipe(Effect.zipRight(Queue.takeAll(queue)), Effect.flatMap(publish))
    return yield* body((text) => void Queue.unsafeOffer(queue, text)).pipe(Effect.ensuring(rest))
  })

// `stat` for a path that should be a file: a missing one is reported as a missing file.
const statFile = (sandbox: Sandbox, path: string) =>
  Effect.catchIf(
    sandbox.stat(path),
    (e) => e.reason === "not_found",
    (e) => Effect.fail(new SandboxError({ ...e, message: `File not found: ${e.path ?? normalizeVirtual(path)}` }))
  )

/**
 * The tools over the sandbox of the run they are called in. Build them once (per agent): each call acquires
 * the sandbox of the run's thread (`RunContext.threadId`/`userId`) from the provider, which is idempotent.
 */
export const tools = (options: Options) =>
  Effect.gen(function*() {
    const provider = yield* SandboxProvider
    const app = yield* AppConfigService
    const settings = app.config.sandbox
    const markReads = app.config.read_before_write.enabled

    // Runs a handler on the sandbox; sandbox errors and anything unexpected become `Error:` text with host
    // paths masked. Interruption passes through untouched.
    const withSandbox = (name: string, body: Body) =>
    (call: ToolCall): Effect.Effect<HandlerOutput, never, RunContext | RunEvents> =>
      Effect.flatMap(RunContext, (run) => provider.acquire(run.threadId, run.userId)).pipe(
        Effect.flatMap((sandbox) => recover(name, body(sandbox, call), sandbox.mask)),
        (effect) => recover(name, effect, (text) => text)
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

    const bash = Tool.make({
      name: "bash",
      description: `Run a bash command in the thread's sandbox. The working directory is ${WORKSPACE}; uploads ` +
        `are in ${UPLOADS}; put files for the user in ${OUTPUTS}; skills are read-only in ${SKILLS}. There is ` +
        "no network access, /tmp is private to the command, and anything the command starts is stopped when it " +
        `ends. Commands time out after ${settings.bash_command_timeout} s. Long output keeps its start and end.` +
        limitsText(settings),
      parameters: BashArgs,
      handler: (args, call) =>
        withSandbox("bash", (sandbox) =>
          Effect.map(publishingOutput(call, (onOutput) => sandbox.exec(args.command, { onOutput })), (result) => {
            const before = result.output === "" ? "" : `\nOutput before it was stopped:\n${result.output}`
            if (result.timedOut) {
              const seconds = Math.round(result.timeoutMs / 100) / 10
              return `Error: The command did not finish within ${seconds} s and was stopped, together with every ` +
                `process it started.${before}`
            }
            if (result.stopped !== undefined) {
              return `Error: The command was stopped, together with every process it started: ${result.stopped}` +
                before
            }
            const body = result.output === "" ? "(no output)" : result.output
            const notes = (result.notes ?? []).map((note) => `\n[limit: ${note}]`).join("")
            if (result.exitCode === 0) return body + notes
            return `${body}${body.endsWith("\n") ? "" : "\n"}[exit code: ${result.exitCode}]${notes}`
          }))(call)
    })

    const ls = Tool.make({
      name: "ls",
      readOnly: true,
      description: "List a directory two levels deep (its entries and their entries), as absolute paths with `/` " +
        "after directories. Version-control, dependency, cache and build directories and log files are left out.",
      parameters: LsArgs,
      handler: (args, call) =>
        withSandbox("ls", (sandbox) =>
          sandbox.walk(args.path, { maxDepth: 2, maxEntries: WALK_MAX_ENTRIES, skip: isJunk }).pipe(
            Effect.map(({ entries }) => {
              if (entries.length === 0) return "(empty)"
              const lines = entries.map((e) => (e.kind === "directory" ? `${e.path}/` : e.path)).sort()
              return headTruncate(
                lines.join("\n"),
                settings.ls_output_max_chars,
                "Use a more specific path to see fewer results"
              )
            }),
            Effect.catchIf(
              (e) => e.reason === "not_found",
              () => Effect.succeed(`Error: Directory not found: ${sandbox.mask(normalizeVirtual(args.path))}`)
            )
          ))(call)
    })

    const readFile = Tool.make({
      name: "read_file",
      readOnly: true,
      // its results carry the read mark of the bytes it read (ReadBeforeWrite needs no lock for them)
      marksReads: true,
      description: "Read a text file. Give start_line and/or end_line (1-based, inclusive) to read only those " +
        "lines." + (settings.read_file_output_max_chars > 0
          ? ` Output over ${settings.read_file_output_max_chars} characters is cut, with a note saying so.`
          : ""),
      parameters: ReadFileArgs,
      handler: (args, call) =>
        withSandbox("read_file", (sandbox) =>
          sandbox.readText(args.path).pipe(
            Effect.map((content): HandlerOutput => {
              let text = content
              if (args.start_line !== undefined || args.end_line !== undefined) {
                const selected = selectLines(content, args.start_line, args.end_line)
                if ("error" in selected) return `Error: ${selected.error}.`
                text = selected.text
              }
              const output = text === "" ? "(empty)" : headTruncate(
                text,
                settings.read_file_output_max_chars,
                "Use start_line/end_line to read a specific range"
              )
              if (!markReads) return output
              // the read mark (ReadBeforeWrite) is of the whole content read here, also for a range
              const result = Tool.toResult(call, output)
              return {
                ...result,
                message: ReadMark.withMark(result.message, {
                  path: absoluteVirtual(args.path),
                  hash: ReadMark.contentHash(content)
                })
              }
            }),
            Effect.catchIf(
              (e) => e.reason === "binary",
              (e) =>
                Effect.succeed(
                  `Error: ${e.message} Use bash with a suitable tool (file, xxd, python) to inspect it, ` +
                    "or view_image for images."
                )
            )
          ))(call)
    })

    const writeFile = Tool.make({
      name: "write_file",
      description: "Write a text file, creating parent directories; with append=true, add to its end instead. " +
        (settings.write_file_max_bytes > 0
          ? `One call writes at most ${settings.write_file_max_bytes} bytes: write a large file as a first ` +
            "section, then add the rest in further calls with append=true, or edit with str_replace."
          : "") +
        (settings.max_file_size_mb > 0 ? ` A file may grow to at most ${settings.max_file_size_mb} MB.` : ""),
      parameters: WriteFileArgs,
      handler: (args, call) =>
        withSandbox("write_file", (sandbox) => {
          const max = settings.write_file_max_bytes
          const bytes = Buffer.byteLength(args.content, "utf8")
          if (max > 0 && bytes > max) {
            return Effect.succeed(
              args.append
                ? `Error: The content is ${bytes} bytes, over the ${max}-byte limit for one write (appends ` +
                  `included). Add it in several calls with append=true, each under ${max} bytes.`
                : `Error: The content is ${bytes} bytes, over the ${max}-byte limit for one write. Write the first ` +
                  `section (under ${max} bytes) with write_file, then add the rest in chunks with append=true, ` +
                  "or make targeted edits with str_replace."
            )
          }
          return sandbox.withFileLock(args.path, sandbox.writeText(args.path, args.content, args.append)).pipe(
            Effect.as("OK"),
            Effect.catchAll((e) => Effect.succeed(errorText(e).slice(0, WRITE_ERROR_MAX_CHARS)))
          )
        })(call)
    })

    const strReplace = Tool.make({
      name: "str_replace",
      description: "Replace text in a file. old_str must occur exactly once (include enough surrounding lines to " +
        "make it unique), unless replace_all=true, which replaces every occurrence.",
      parameters: StrReplaceArgs,
      handler: (args, call) =>
        withSandbox("str_replace", (sandbox) => {
          const path = sandbox.mask(normalizeVirtual(args.path))
          if (args.old_str === "") return Effect.succeed("Error: old_str is empty; give the exact text to replace.")
          return sandbox.withFileLock(
            args.path,
            Effect.gen(function*() {
              const content = yield* sandbox.readText(args.path)
              const count = countOccurrences(content, args.old_str)
              if (count === 0) return `Error: String to replace not found in file: ${path}`
              if (count > 1 && !args.replace_all) {
                return `Error: old_str occurs ${count} times in ${path}, so the edit is ambiguous. Include more ` +
                  `surrounding text so it matches exactly once, or set replace_all=true to replace all ${count}.`
              }
              yield* sandbox.writeText(args.path, replaceLiteral(content, args.old_str, args.new_str, args.replace_all))
              return count === 1 ? "OK" : `OK (replaced ${count} occurrences)`
            })
          )
        })(call)
    })

    const glob = Tool.make({
      name: "glob",
      readOnly: true,
      description: "Find files whose path matches a glob pattern under a directory: `*` and `?` match within a " +
        "name, `**` across directories, `{a,b}` either. A pattern without `/` matches names at any depth " +
        "(`*.py` finds every Python file). Junk directories (.git, node_modules, ...) are skipped.",
      parameters: GlobArgs,
      handler: (args, call) =>
        withSandbox("glob", (sandbox) =>
          Effect.gen(function*() {
            const root = sandbox.mask(normalizeVirtual(args.path))
            if (args.pattern.startsWith("/")) {
              return "Error: The pattern must be relative to path (e.g. `**/*.py`), not absolute: " +
                displayPath(sandbox.mask(args.pattern))
            }
            const max = clampMax(args.max_results, 200, 1000)
            const compiled = compileGlob(args.pattern)
            if ("error" in compiled) return `Error: Invalid glob pattern: ${compiled.error}`
            const walked = yield* sandbox.walk(args.path, { maxEntries: WALK_MAX_ENTRIES, skip: isJunk })
            const matches: Array<(typeof walked.entries)[number]> = []
            const slice = slicer()
            const finished = yield* searchWithin(Effect.gen(function*() {
              for (const entry of walked.entries) {
                if (slice(entry.relative.length + 64)) yield* breathe
                if ((entry.kind === "file" || args.include_dirs) && compiled.regex.test(entry.relative)) {
                  matches.push(entry)
                }
              }
            }))
            const stopped = (walked.truncated
              ? `\n(The search stopped after ${WALK_MAX_ENTRIES} entries; narrow the path.)`
              : "") + (finished ? "" : stoppedNote("not every path was checked"))
            if (matches.length === 0) return `No files matched under ${root}${stopped}`
            const shown = matches.slice(0, max)
            const lines = shown.map((e, i) => `${i + 1}. ${e.kind === "directory" ? `${e.path}/` : e.path}`)
            const more = matches.length > max
            return [
              `Found ${matches.length} paths under ${root}${more ? ` (showing first ${max})` : ""}`,
              ...lines,
              ...(more ? ["Results truncated. Narrow the path or pattern to see the rest."] : [])
            ].join("\n") + stopped
          }))(call)
    })

    const grep = Tool.make({
      name: "grep",
      readOnly: true,
      description: "Search file contents for a regular expression under a directory or in one file. Prints " +
        "`path:line: text` for each matching line. Case-insensitive unless case_sensitive=true. The syntax is " +
        "JavaScript's without look-aheads and backreferences (RE2, which runs in linear time). Binary files, large " +
        "files and junk directories are skipped.",
      parameters: GrepArgs,
      handler: (args, call) =>
        withSandbox("grep", (sandbox) =>
          Effect.gen(function*() {
            const root = sandbox.mask(normalizeVirtual(args.path))
            const max = clampMax(args.max_results, 100, 500)
            const compiled = compileSearch(args.pattern, { literal: args.literal, caseSensitive: args.case_sensitive })
            if ("error" in compiled) return `Error: Invalid regex pattern: ${compiled.error}`
            const regex = compiled.regex
            const filter = args.glob === undefined ? undefined : compileGlob(args.glob)
            if (filter !== undefined && "error" in filter) return `Error: Invalid glob pattern: ${filter.error}`
            const info = yield* sandbox.stat(args.path)
            const files = info.kind === "file"
              ? [{ path: normalizeVirtual(args.path), relative: normalizeVirtual(args.path).split("/").pop()! }]
              : (yield* sandbox.walk(args.path, { maxEntries: WALK_MAX_ENTRIES, skip: isJunk })).entries
                .filter((e) => e.kind === "file")
            const decoder = new TextDecoder("utf-8", { fatal: true })
            const lines: Array<string> = []
            let count = 0
            const slice = slicer()
            const finished = yield* searchWithin(Effect.gen(function*() {
              for (const file of files) {
                if (count >= GREP_COUNT_LIMIT) break
                if (filter !== undefined && !filter.regex.test(file.relative)) continue
                const bytes = yield* Effect.option(sandbox.readBytes(file.path, GREP_MAX_FILE_BYTES))
                if (bytes._tag === "None" || bytes.value.includes(0)) continue
                let text: string
                try {
                  text = decoder.decode(bytes.value)
                } catch {
                  continue
                }
                const fileLines = text.split(/\r?\n/)
                for (let i = 0; i < fileLines.length && count < GREP_COUNT_LIMIT; i++) {
                  const line = fileLines[i]!
                  if (slice(line.length + 1)) yield* breathe
                  if (!regex.test(line)) continue
                  count++
                  if (lines.length < max) {
                    const shown = line.length > GREP_MAX_LINE_CHARS ? `${line.slice(0, GREP_MAX_LINE_CHARS)}...` : line
                    lines.push(`${file.path}:${i + 1}: ${sandbox.mask(shown)}`)
                  }
                }
              }
            }))
            const stopped = finished ? "" : stoppedNote("not every file was searched")
            if (count === 0) return `No matches found under ${root}${stopped}`
            const total = count >= GREP_COUNT_LIMIT ? `${GREP_COUNT_LIMIT}+` : `${count}`
            const more = count > max
            return [
              `Found ${total} matches under ${root}${more ? ` (showing first ${max})` : ""}`,
              ...lines,
              ...(more ? ["Results truncated. Narrow the path, pattern or glob to see the rest."] : [])
            ].join("\n") + stopped
          }))(call)
    })

    const presentFiles = Tool.make({
      name: "present_files",
      readOnly: true,
      description: `Show finished files to the user as downloadable results. Only files in ${OUTPUTS} can be ` +
        "presented: write or copy them there first. Call it once with every file to present.",
      parameters: PresentFilesArgs,
      handler: (args, call) =>
        withSandbox("present_files", (sandbox) =>
          Effect.gen(function*() {
            if (args.filepaths.length === 0) return "Error: filepaths is empty; give at least one file under " + OUTPUTS
            const artifacts: Array<string> = []
            for (const given of args.filepaths) {
              // A host path inside the thread's outputs is accepted and normalised to its virtual path.
              const masked = sandbox.mask(given)
              const refused = `Error: Only files in ${OUTPUTS} can be presented: ${displayPath(masked)}`
              if (given.includes("\0") || !masked.startsWith("/")) return refused
              const virtual = normalizeVirtual(masked)
              if (!under(virtual, OUTPUTS) || virtual === OUTPUTS) return refused
              const real = yield* Effect.either(sandbox.resolve(virtual, "read"))
              if (real._tag === "Left") {
                return real.left.reason === "not_found" ? `Error: File not found: ${virtual}` : refused
              }
              // The real location must be in outputs too (no symlink out of it).
              if (!under(sandbox.mask(real.right), OUTPUTS)) return refused
              const info = yield* statFile(sandbox, virtual)
              if (info.kind !== "file") return `Error: Not a file: ${virtual}. Present files one by one.`
              if (!artifacts.includes(virtual)) artifacts.push(virtual)
            }
            return {
              message: M.tool(
                `Presented ${artifacts.length} file(s) to the user: ${artifacts.join(", ")}`,
                call.id,
                { name: call.name, status: "success" }
              ),
              update: { artifacts }
            }
          }))(call)
    })

    const viewImage = Tool.make({
      name: "view_image",
      readOnly: true,
      description: "Look at an image file (jpg, jpeg, png, webp or gif, at most 20 MB) in the workspace, uploads " +
        "or outputs. The image is shown to you with your next turn.",
      parameters: ViewImageArgs,
      handler: (args, call) =>
        withSandbox("view_image", (sandbox) =>
          Effect.gen(function*() {
            const masked = sandbox.mask(args.image_path)
            const virtual = normalizeVirtual(masked)
            const allowed = [WORKSPACE, UPLOADS, OUTPUTS].some((root) => under(virtual, root) && virtual !== root)
            if (!masked.startsWith("/") || !allowed) {
              return `Error: Images can only be viewed from ${WORKSPACE}, ${UPLOADS} or ${OUTPUTS}: ` +
                displayPath(masked)
            }
            const extension = extensionOf(virtual)
            const expected = IMAGE_TYPES[extension]
            if (expected === undefined) {
              return `Error: Unsupported image type '${extension || "(none)"}' for ${virtual}; view_image accepts ` +
                `${Object.keys(IMAGE_TYPES).join(", ")}.`
            }
            const info = yield* statFile(sandbox, args.image_path)
            if (info.kind !== "file") return `Error: Not a file: ${virtual}`
            if (info.size > MAX_IMAGE_BYTES) {
              return `Error: Image too large: ${virtual} is ${info.size} bytes; ` +
                `view_image accepts at most ${MAX_IMAGE_BYTES}.`
            }
            const bytes = yield* sandbox.readBytes(args.image_path, MAX_IMAGE_BYTES)
            const actual = sniffImage(bytes)
            if (actual !== expected) {
              return `Error: ${virtual} is not a valid ${extension.slice(1).toUpperCase()} image` +
                (actual === undefined
                  ? " (its content is not a recognised image format)."
                  : ` (its content is ${actual}).`)
            }
            const real = yield* sandbox.resolve(args.image_path, "read")
            return {
              message: M.tool(
                `Loaded image ${virtual} (${actual}, ${bytes.length} bytes); it is shown to you with your next turn.`,
                call.id,
                { name: call.name, status: "success" }
              ),
              update: { viewed_images: { [virtual]: { mime_type: actual, size: bytes.length, actual_path: real } } }
            }
          }))(call)
    })

    const all: Array<Tool.Tool> = []
    if (options.bash !== false) all.push(bash)
    all.push(ls, readFile, writeFile, strReplace, glob, grep, presentFiles)
    if (options.vision) all.push(viewImage)
    return all as ReadonlyArray<Tool.Tool>
  })

/** The base ToolService over the sandbox tools. Unknown tools are answered as Toolkit does. */
export const layer = (
  options: Options
): Layer.Layer<ToolService, never, SandboxProvider | AppConfigService> =>
  Layer.effect(ToolService, Effect.map(tools(options), Toolkit.make))
