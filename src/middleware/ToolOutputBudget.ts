/**
 * ToolOutputBudget (SPEC §5.2): no single tool result may flood the model's context.
 *
 * - Tool wrap (the last transformation of every result): a text result longer than its threshold
 *   (`externalize_min_chars`, or the tool's override) is saved in full to
 *   `{outputs}/.tool-results/{tool}-{12 hex}.{log|txt}` and replaced by a typed synopsis that names the
 *   file, so the model can `read_file` any part of it. When it cannot be saved, a result longer than
 *   `fallback_max_chars` is cut to its head and tail (within `fallback_max_chars`, the head ending and the tail
 *   starting on a line) with a marker saying how much was left out and that storage was unavailable.
 * - Model wrap (request-only): tool results already in the history that are longer than
 *   `fallback_max_chars` are cut the same way (never saved from there).
 *
 * Sizes are characters (code points), as DeerFlow's Python `len` counts them: an emoji counts once and a cut never
 * splits one. `read_file` is exempt, so a saved output read back is not saved again. The synopsis is
 * `internal/Synopsis` (re-exported here).
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ToolOutputConfig } from "../services/AppConfig.js"
import { AppConfigService, ToolOutputConfig as ToolOutputConfigSchema } from "../services/AppConfig.js"
import type { ModelRequest } from "../services/ModelService.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { Sandbox } from "../services/Sandbox.js"
import { OUTPUTS, SandboxProvider } from "../services/Sandbox.js"
import type { ToolResult } from "../services/ToolService.js"
import type { Content, Message, ToolMessage } from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import * as Middleware from "./Middleware.js"
import type { Chars } from "../state/Chars.js"
import { charLength, charsOf, joinChars } from "../state/Chars.js"
import { renderPreview } from "./internal/Synopsis.js"
import { resolveThreadPaths } from "./ThreadData.js"
import * as Chain from "./Chain.js"

export type { Chars } from "../state/Chars.js"
export { charLength, charsOf } from "../state/Chars.js"
export type { PreviewKind, PreviewOptions, Synopsis } from "./internal/Synopsis.js"
export { MAX_PARSE_CHARS, rawSample, renderPreview, synopsisOf } from "./internal/Synopsis.js"

// ---------------------------------------------------------------------------------------------------------
// Text of a result

/**
 * The text of a tool result: a string, or its text blocks joined by newlines (a result that also holds images,
 * as an MCP server may send, is budgeted by its text: its images stay); `undefined` when it has no text block.
 */
export const resultText = (content: Content): string | undefined => {
  if (typeof content === "string") return content
  let out: string | undefined
  for (const block of content) {
    if (block.type !== "text" || typeof block.text !== "string") continue
    out = out === undefined ? block.text : `${out}\n${block.text}`
  }
  return out
}

/**
 * The length in UTF-16 code units `resultText` would have, without building it; -1 when the content has no text
 * block. An upper bound of its length in characters (`charLength`): at most this many, fewer when it has emoji.
 */
export const resultTextLength = (content: Content): number => {
  if (typeof content === "string") return content.length
  let length = -1
  for (const block of content) {
    if (block.type !== "text" || typeof block.text !== "string") continue
    length += block.text.length + 1
  }
  return length
}

/** The content with its text replaced by `text`: a string, or one text block before its other blocks (images). */
export const withResultText = (content: Content, text: string): Content => {
  if (typeof content === "string") return text
  const others = content.filter((block) => block.type !== "text" || typeof block.text !== "string")
  return others.length === 0 ? text : [{ type: "text", text }, ...others]
}

// ---------------------------------------------------------------------------------------------------------
// Head + tail truncation (when the full text cannot be saved)

/** An end offset moved back to just after a newline, if one lies in the second half of `text[0:pos]`. */
export const snapEnd = (text: Chars, pos: number): number => {
  if (pos <= 0 || pos >= text.length) return pos
  const newline = text.lastIndexOf("\n", pos - 1)
  return newline >= Math.floor(pos / 2) ? newline + 1 : pos
}

/** A start offset moved forward to just after a newline, if one lies in the first half of `text[pos:]`. */
export const snapStart = (text: Chars, pos: number): number => {
  if (pos <= 0 || pos >= text.length) return pos
  const newline = text.indexOf("\n", pos)
  return newline >= 0 && newline < pos + Math.floor((text.length - pos) / 2) ? newline + 1 : pos
}

// DeerFlow's words: the model learns that nothing was saved, so there is no file to look for
const omittedMarker = (omitted: number, tool: string) =>
  `\n\n[... ${omitted} chars omitted from ${tool} output. Persistent storage unavailable. Consider narrowing ` +
  `the query or using more specific parameters.]\n\n`

/**
 * The head and tail of `text` around a marker saying how many characters were left out, never longer than
 * `maxChars` characters. The head ends and the tail starts on a line boundary when one is near. Counted in
 * characters (code points), as DeerFlow counts them, so an emoji is never cut in half.
 */
export const truncateHeadTail = (
  text: string,
  tool: string,
  maxChars: number,
  headChars: number,
  tailChars: number
): string => {
  const chars = charsOf(text)
  const total = chars.length
  if (maxChars <= 0 || total <= maxChars) return text
  const overhead = charLength(omittedMarker(total, tool))
  if (overhead >= maxChars) return joinChars(chars, 0, maxChars)
  const budget = maxChars - overhead
  const head = Math.min(headChars, budget)
  const tail = Math.min(tailChars, Math.max(0, budget - head))
  const headEnd = snapEnd(chars, Math.min(head, total))
  const tailStart = snapStart(chars, Math.max(headEnd, total - tail))
  return joinChars(chars, 0, headEnd) + omittedMarker(tailStart - headEnd, tool) + joinChars(chars, tailStart)
}

// ---------------------------------------------------------------------------------------------------------
// Saving the full text

/** A tool name made safe as part of a file name. */
export const safeToolName = (name: string): string => {
  const safe = name.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^\.+/, "").replace(/\.{2,}/g, "_").slice(0, 64)
  return safe === "" ? "unknown" : safe
}

const LOG_TOOLS: ReadonlySet<string> = new Set(["bash", "bash_tool", "web_fetch"])

/**
 * `{tool}-{12 hex}.{log|txt}`: the hash covers the call id and the content, so two calls never share a file
 * while the same result saved twice lands in the same one.
 */
export const externalizedFileName = (tool: string, toolCallId: string, text: string): string => {
  const id = Buffer.from(toolCallId, "utf8")
  const length = Buffer.alloc(8)
  length.writeBigUInt64BE(BigInt(id.length))
  const hex = createHash("sha256").update(length).update(id).update(text, "utf8").digest("hex").slice(0, 12)
  return `${safeToolName(tool)}-${hex}.${LOG_TOOLS.has(tool) ? "log" : "txt"}`
}

/** Writes the file atomically (temporary sibling, then rename). */
const writeHostFile = (dir: string, file: string, text: string): Effect.Effect<void, unknown> =>
  Effect.tryPromise(async () => {
    await fs.mkdir(dir, { recursive: true })
    const target = path.join(dir, file)
    if (path.dirname(target) !== path.resolve(dir)) throw new Error(`unsafe file name ${file}`)
    const temporary = path.join(dir, `.tool-output-${randomBytes(8).toString("hex")}.tmp`)
    try {
      await fs.writeFile(temporary, text, { flag: "wx" })
      await fs.rename(temporary, target)
    } catch (error) {
      await fs.rm(temporary, { force: true })
      throw error
    }
  })

/** Writes into a sandbox that is not the host's thread directories, and checks the whole file arrived. */
const writeSandboxFile = (sandbox: Sandbox, virtualPath: string, text: string): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    yield* sandbox.writeText(virtualPath, text)
    const info = yield* sandbox.stat(virtualPath)
    const expected = Buffer.byteLength(text, "utf8")
    if (info.kind !== "file" || info.size !== expected) {
      return yield* Effect.fail(new Error(`the saved file has ${info.size} bytes, ${expected} expected`))
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Budgeting

/** ToolOutputBudget's settings: `tool_output` of config.yaml. */
export type Config = ToolOutputConfig

const defaults = Schema.decodeSync(ToolOutputConfigSchema)({})

/** The defaults of `tool_output` (SPEC §13). */
export const defaultConfig = (): Config => defaults

/** The externalisation threshold of a tool (its override, else `externalize_min_chars`; 0 = never). */
export const thresholdOf = (config: Config, tool: string): number =>
  Object.hasOwn(config.tool_overrides, tool) ? config.tool_overrides[tool]! : config.externalize_min_chars

/** The shortest text that could need budgeting for this tool; -1 when nothing ever does. */
export const triggerOf = (config: Config, tool: string): number => {
  const threshold = thresholdOf(config, tool)
  const fallback = config.fallback_max_chars
  if (threshold > 0 && fallback > 0) return Math.min(threshold, fallback)
  return threshold > 0 ? threshold : fallback > 0 ? fallback : -1
}

const toolName = (message: ToolMessage) => message.name ?? "unknown"

/** Where to save a tool's full output, if anywhere: returns the virtual path on success. */
export type Persist = (text: string, tool: string, toolCallId: string) => Effect.Effect<Option.Option<string>>

/**
 * What a text over budget is masked with before it is saved, previewed or cut (the process's secrets and the run's:
 * `ProcessSecrets.ofRun`): a cut inside a secret would keep its beginning, where no later mask of whole values finds
 * it. Default: nothing.
 */
export type Hide = (text: string) => string

const shown: Hide = (text) => text

/**
 * A tool message within budget (by its text; its images stay): unchanged when small enough or without text; saved
 * and replaced by a synopsis when over its threshold and `persist` succeeds; else cut to head + tail when over
 * `fallback_max_chars`. A text over budget is masked with `hide` first (what is saved too).
 */
export const budgetMessage = (
  message: ToolMessage,
  config: Config,
  persist: Persist,
  hide: Hide = shown
): Effect.Effect<ToolMessage> =>
  Effect.suspend(() => {
    const tool = toolName(message)
    if (config.exempt_tools.includes(tool)) return Effect.succeed(message)
    const raw = resultText(message.content)
    if (raw === undefined) return Effect.succeed(message)
    const threshold = thresholdOf(config, tool)
    const rawLength = charLength(raw)
    if (rawLength <= threshold && rawLength <= config.fallback_max_chars) return Effect.succeed(message)
    const text = hide(raw)
    const length = charLength(text)
    const fallback = () =>
      config.fallback_max_chars > 0 && length > config.fallback_max_chars
        ? {
          ...message,
          content: withResultText(
            message.content,
            truncateHeadTail(
              text,
              tool,
              config.fallback_max_chars,
              config.fallback_head_chars,
              config.fallback_tail_chars
            )
          )
        }
        : message
    if (threshold <= 0 || length <= threshold) return Effect.succeed(fallback())
    return Effect.map(persist(text, tool, message.tool_call_id), (saved) =>
      Option.match(saved, {
        onNone: fallback,
        onSome: (virtualPath) => ({
          ...message,
          content: withResultText(
            message.content,
            renderPreview(text, {
              tool,
              virtualPath,
              headChars: config.preview_head_chars,
              tailChars: config.preview_tail_chars
            })
          )
        })
      }))
  })

// over `limit` characters: the code-unit length settles most results without reading the text
const longerThan = (content: Content, limit: number) =>
  resultTextLength(content) > limit && charLength(resultText(content)!) > limit

const overBudget = (message: ToolMessage, config: Config) => {
  const tool = toolName(message)
  const trigger = triggerOf(config, tool)
  return trigger >= 0 && !config.exempt_tools.includes(tool) && longerThan(message.content, trigger)
}

/** Whether a result (its message, or a tool message in its update) could need budgeting. Cheap. */
export const needsBudget = (result: ToolResult, config: Config): boolean => {
  if (overBudget(result.message, config)) return true
  const writes = result.update?.messages
  if (writes === undefined) return false
  for (const write of writes) if (write.type === "tool" && overBudget(write, config)) return true
  return false
}

/** A result within budget: its message and every tool message of its update (`hide`: as `budgetMessage`). */
export const budgetResult = (
  result: ToolResult,
  config: Config,
  persist: Persist,
  hide: Hide = shown
): Effect.Effect<ToolResult> =>
  Effect.gen(function*() {
    const message = yield* budgetMessage(result.message, config, persist, hide)
    const writes = result.update?.messages
    if (writes === undefined || result.update === undefined) {
      return message === result.message ? result : { ...result, message }
    }
    const patched = yield* Effect.forEach(writes, (write) =>
      write.type === "tool" && overBudget(write, config)
        ? budgetMessage(write, config, persist, hide)
        : Effect.succeed(write))
    const changed = patched.some((write, i) => write !== writes[i])
    if (message === result.message && !changed) return result
    return { message, update: changed ? { ...result.update, messages: patched } : result.update }
  })

/** Cut results by message object (kept by the middleware for its agent's life), so a cut is made once. */
export type HistoryCache = WeakMap<ToolMessage, ToolMessage>

/**
 * The history pass: tool results longer than `fallback_max_chars` cut to head + tail (masked with `hide` first);
 * the same array when none is (one pass over the messages, reading lengths only).
 */
export const truncateHistory = (
  messages: ReadonlyArray<Message>,
  config: Config,
  cache: HistoryCache = new WeakMap(),
  memo?: Incremental.Memo<ReadonlyArray<Message>>,
  hide: Hide = shown
): ReadonlyArray<Message> => {
  const max = config.fallback_max_chars
  if (max <= 0) return messages
  return Incremental.mapMessages(messages, (message) => {
    if (message.type !== "tool" || resultTextLength(message.content) <= max) return message
    const tool = toolName(message)
    if (config.exempt_tools.includes(tool) || !longerThan(message.content, max)) return message
    let cut = cache.get(message)
    if (cut === undefined) {
      cut = {
        ...message,
        content: withResultText(
          message.content,
          truncateHeadTail(
            hide(resultText(message.content)!),
            tool,
            max,
            config.fallback_head_chars,
            config.fallback_tail_chars
          )
        )
      }
      cache.set(message, cut)
    }
    return cut
  }, memo)
}

/**
 * The request with its history within budget; the same object when nothing changes. With a memo (kept by the
 * middleware), only the messages new since the last request are looked at (see `Incremental`).
 */
export const budgetRequest = (
  request: ModelRequest,
  config: Config,
  cache?: HistoryCache,
  memo?: Incremental.Memo<ReadonlyArray<Message>>,
  hide: Hide = shown
): ModelRequest => {
  const messages = truncateHistory(request.messages, config, cache, memo, hide)
  return messages === request.messages ? request : { ...request, messages }
}

/**
 * ToolOutputBudget, with `tool_output` settings (defaults for anything left out). Needs `AppConfigService`
 * (the data directory), `RunContext` and `RunState`. Uses the `SandboxProvider` when one is in context: a
 * sandbox that does not use the thread's host directories gets the file inside it.
 *
 * The thread's outputs directory is `thread_data.outputs_path` from state, else the sandbox's, else the one
 * under the data directory.
 */
export const layer = (options: Partial<Config> = {}): Middleware.Middleware<AppConfigService> => {
  const config: Config = { ...defaultConfig(), ...options }
  if (!config.enabled) return Middleware.make({})
  return Layer.unwrapEffect(Effect.sync(() => perRun(config, new WeakMap(), Incremental.makeMemo())))
}

const perRun = (config: Config, cache: HistoryCache, memo: Incremental.Memo<ReadonlyArray<Message>>) =>
  Middleware.make(Effect.gen(function*() {
    const { home } = yield* AppConfigService
    const context = yield* RunContext
    const state = yield* RunState
    const provider = yield* Effect.serviceOption(SandboxProvider)
    const hider = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
    const hide: Hide = (text) => hider.text(text)

    const persistFor = (result: ToolResult): Persist => (text, tool, toolCallId) =>
      Effect.gen(function*() {
        const current = yield* state.get
        const sandboxId = current.sandbox?.sandbox_id ?? result.update?.sandbox?.sandbox_id ?? undefined
        const sandbox = Option.isSome(provider) && sandboxId != null
          ? Option.getOrUndefined(yield* provider.value.get(sandboxId))
          : undefined
        const file = externalizedFileName(tool, toolCallId, text)
        const virtualPath = `${OUTPUTS}/${config.storage_subdir}/${file}`
        if (sandbox !== undefined && !sandbox.usesThreadDataMounts) {
          yield* writeSandboxFile(sandbox, virtualPath, text)
          return virtualPath
        }
        const outputs = current.thread_data?.outputs_path ?? sandbox?.paths.outputs ??
          (yield* resolveThreadPaths(home, context.userId, context.threadId)).outputs
        yield* writeHostFile(path.join(outputs, config.storage_subdir), file, text)
        return virtualPath
      }).pipe(
        Effect.map(Option.some),
        Effect.catchAllCause((cause) =>
          Effect.as(
            Effect.logWarning(`Could not save the full ${tool} output; it is cut to head and tail instead`, cause),
            Option.none()
          )
        )
      )

    return {
      tool: (call, next) =>
        Effect.flatMap(next(call), (result) =>
          needsBudget(result, config)
            ? budgetResult(result, config, persistFor(result), hide)
            : Effect.succeed(result)),
      modelHooks: { before: (request) => budgetRequest(request, config, cache, memo, hide) }
    }
  }))

/** Its chain entry: the outermost tool wrap, so budgeting is the last transformation of every tool result. */
export const entry = (options: Partial<Config> = {}) =>
  Chain.entry("ToolOutputBudget", () => layer(options), [
    { outside: "SandboxAudit", reason: "budgeting is the last transformation of every tool result" },
    { outside: "ToolErrorHandling", reason: "budgeting is the last transformation of every tool result" }
  ])
