/**
 * Request mapping (pure): a `ModelRequest` and the model's profile as a streaming Chat Completions request —
 * the messages (images as parts, or a note for a model without vision; calls kept only in the raw provider
 * payload sent as calls), the tools, the run's settings over the model's defaults, and the provider fields
 * its thinking settings add (DeerFlow's `when_thinking_enabled` / `when_thinking_disabled`).
 */
import type OpenAI from "openai"
import type { ModelRequest, ToolDefinition } from "../../services/ModelService.js"
import type { AIMessage, Content, Message } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import { THOUGHT_SIGNATURES } from "./ChunkAccumulator.js"
import * as MiniMax from "./MiniMax.js"
import * as MindIe from "./MindIe.js"
import { parseArguments } from "./ToolArguments.js"

/** What a request is built with: the model id and its defaults and capabilities. */
export interface ModelProfile {
  readonly model: string
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  /** When `false`, images in human messages are replaced by a short text note. Default: images pass. */
  readonly supportsVision?: boolean | undefined
  /** When `true`, `settings.reasoningEffort` is sent as `reasoning_effort`. */
  readonly supportsReasoningEffort?: boolean | undefined
  /**
   * Kept for callers that pick models by capability. Chat Completions has no standard switch for thinking,
   * so it changes nothing on the wire; reasoning the server streams is always kept.
   */
  readonly supportsThinking?: boolean | undefined
  /** Fields merged into every request body (`extra_body`). */
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
  /** Settings applied when the request has thinking on (`when_thinking_enabled`, with `thinking` merged in). */
  readonly whenThinkingEnabled?: Readonly<Record<string, unknown>> | undefined
  /** Settings applied when the request has thinking off (`when_thinking_disabled`). */
  readonly whenThinkingDisabled?: Readonly<Record<string, unknown>> | undefined
  /**
   * Whether earlier answers are sent with their reasoning (`reasoning_content`: DeepSeek's, MiMo's servers;
   * `ModelUse.replaysReasoning`).
   */
  readonly replayReasoning?: boolean | undefined
  /** The field that reasoning goes back in (vLLM reads `reasoning`). Default `reasoning_content`. */
  readonly replayReasoningAs?: "reasoning_content" | "reasoning" | undefined
  /** When `true`, every request asks for the reasoning apart from the text (MiniMax's `reasoning_split`). */
  readonly reasoningSplit?: boolean | undefined
  /** When `true`, `chat_template_kwargs.thinking` is sent as `enable_thinking` (vLLM's Qwen parser's flag). */
  readonly enableThinkingKwarg?: boolean | undefined
  /**
   * When `true`, the server speaks MindIE's dialect: messages as text, tool calls as XML in the text, no stream
   * when tools are offered (see `MindIe.ts`).
   */
  readonly mindIe?: boolean | undefined
  /** Fields sent with every request (`top_p`, `seed`, `stop`, ...), under the run's and the protocol's own. */
  readonly requestFields?: Readonly<Record<string, unknown>> | undefined
  /** Fields added to every request body (`model_kwargs`), under `extraBody`. */
  readonly modelKwargs?: Readonly<Record<string, unknown>> | undefined
  /** The model's `reasoning_effort` (with `supportsReasoningEffort`; thinking settings and the run's win). */
  readonly reasoningEffort?: string | undefined
  /** When `false`, the stream is not asked for its token usage (`stream_options.include_usage`). Default true. */
  readonly streamUsage?: boolean | undefined
}

/** Whether a value is a JSON object (not null, not an array). */
export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Merges `override` into `base` recursively (objects merge, anything else replaces); inputs are not changed. */
export const deepMerge = (
  base: Readonly<Record<string, unknown>> | undefined,
  override: Readonly<Record<string, unknown>>
): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...base }
  for (const [key, value] of Object.entries(override)) {
    const existing = out[key]
    out[key] = isPlainObject(value) && isPlainObject(existing) ? deepMerge(existing, value) : value
  }
  return out
}

/**
 * The request fields a model's thinking settings add for one call (DeerFlow's `create_chat_model`): with
 * thinking on, `when_thinking_enabled` (only for a model that supports thinking); with it off,
 * `when_thinking_disabled`, else the switch-off DeerFlow derives from the enabled settings (an
 * `extra_body.thinking.type` becomes `disabled` with `reasoning_effort: minimal`; vLLM's
 * `chat_template_kwargs` thinking flags become false). `extra_body` entries are merged into the body, other
 * keys (`reasoning_effort`, `temperature`, a provider's own field) become body fields. A model without
 * `supports_reasoning_effort` is never sent a `reasoning_effort`, from these settings either (as in DeerFlow).
 */
export const thinkingFields = (
  profile: ModelProfile,
  thinkingEnabled: boolean | undefined
): Record<string, unknown> => {
  const fields = thinkingSettings(profile, thinkingEnabled)
  if (profile.supportsReasoningEffort === true || !("reasoning_effort" in fields)) return fields
  const { reasoning_effort: _dropped, ...rest } = fields
  return rest
}

const thinkingSettings = (
  profile: ModelProfile,
  thinkingEnabled: boolean | undefined
): Record<string, unknown> => {
  const enabled = profile.whenThinkingEnabled
  if (thinkingEnabled === true) {
    return enabled !== undefined && profile.supportsThinking === true ? { ...enabled } : {}
  }
  if (thinkingEnabled === undefined) return {}
  if (profile.whenThinkingDisabled !== undefined) return { ...profile.whenThinkingDisabled }
  if (enabled === undefined) return {}
  const extra = isPlainObject(enabled.extra_body) ? enabled.extra_body : {}
  const thinking = isPlainObject(extra.thinking) ? extra.thinking : undefined
  if (thinking?.type !== undefined) {
    return { extra_body: { thinking: { type: "disabled" } }, reasoning_effort: "minimal" }
  }
  const template = isPlainObject(extra.chat_template_kwargs) ? extra.chat_template_kwargs : {}
  const off: Record<string, boolean> = {}
  if ("thinking" in template) off.thinking = false
  if ("enable_thinking" in template) off.enable_thinking = false
  return Object.keys(off).length > 0 ? { extra_body: { chat_template_kwargs: off } } : {}
}

const NO_VISION_NOTE = "[An image was attached here, but this model does not accept images.]"

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam
type ChatPart = OpenAI.Chat.Completions.ChatCompletionContentPart

const userContent = (content: Content, vision: boolean): string | Array<ChatPart> => {
  if (typeof content === "string") return content
  const parts: Array<ChatPart> = []
  for (const block of content) {
    const b = block as { readonly type: string; readonly text?: unknown; readonly image_url?: unknown }
    if (b.type === "image_url") {
      const image = b.image_url as { url?: unknown; detail?: unknown } | undefined
      if (typeof image?.url !== "string") continue
      if (!vision) parts.push({ type: "text", text: NO_VISION_NOTE })
      else {
        parts.push({
          type: "image_url",
          image_url: typeof image.detail === "string"
            ? { url: image.url, detail: image.detail as "auto" | "low" | "high" }
            : { url: image.url }
        })
      }
    } else if (typeof b.text === "string") parts.push({ type: "text", text: b.text })
    // Other provider blocks (reasoning, thinking...) have no Chat Completions form: dropped.
  }
  return parts.length === 0 ? "" : parts
}

/**
 * The arguments of an invalid call as a JSON object string: the raw text when it is one, else `"{}"`, so the
 * call can still be sent back (every tool message needs its call).
 */
export const normaliseArguments = (raw: string | null): string => {
  if (raw === null) return "{}"
  const parsed = parseArguments(raw)
  return "args" in parsed ? JSON.stringify(parsed.args) : "{}"
}

const assistantMessage = (original: AIMessage, replayAs: ReplayField | undefined): ChatMessage => {
  // Calls kept only in the raw provider payload are sent as calls (the parse DanglingToolCall counts with), so
  // their results never reach the provider without them.
  const message = M.parseRawToolCalls(original)
  const text = M.contentText(message.content)
  const calls: Array<OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall> = []
  // each call's thought signature, as the server gave it (DeerFlow's PatchedChatOpenAI sends it back)
  const kept = original.additional_kwargs?.[THOUGHT_SIGNATURES]
  const signatures = typeof kept === "object" && kept !== null && !Array.isArray(kept)
    ? kept as Readonly<Record<string, unknown>>
    : {}
  for (const call of message.tool_calls ?? []) {
    const signature = Object.hasOwn(signatures, call.id) ? signatures[call.id] : undefined
    calls.push({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: JSON.stringify(call.args) },
      ...(typeof signature === "string" ? { thought_signature: signature } : {})
    })
  }
  // Same fallbacks as the run's result for an invalid call, so the call and its tool message match.
  message.invalid_tool_calls?.forEach((call, i) => {
    calls.push({
      id: M.invalidCallId(message, call, i),
      type: "function",
      function: { name: call.name || "unknown_tool", arguments: normaliseArguments(call.args) }
    })
  })
  // the answer's reasoning, when the server asks for it back (DeerFlow's restore_reasoning_content: any string kept)
  const reasoning = replayAs !== undefined ? original.additional_kwargs?.reasoning_content : undefined
  const thought = typeof reasoning === "string" && replayAs !== undefined ? { [replayAs]: reasoning } : {}
  if (calls.length === 0) return { role: "assistant", content: text, ...thought }
  return { role: "assistant", content: text === "" ? null : text, tool_calls: calls, ...thought }
}

/** The field an answer's reasoning goes back in, when it goes back. */
type ReplayField = "reasoning_content" | "reasoning"

/**
 * One state message as a Chat Completions message (an answer with its reasoning when `replayReasoning`, in the
 * field `replayAs`).
 */
export const toChatMessage = (
  message: Message,
  vision = true,
  replayReasoning = false,
  replayAs: ReplayField = "reasoning_content"
): ChatMessage => {
  switch (message.type) {
    case "human":
      return { role: "user", content: userContent(message.content, vision) as string, ...nameOf(message) }
    case "ai":
      return { ...assistantMessage(message, replayReasoning ? replayAs : undefined), ...nameOf(message) }
    case "tool":
      return { role: "tool", tool_call_id: message.tool_call_id, content: M.contentText(message.content) }
    case "system":
      return { role: "system", content: M.contentText(message.content), ...nameOf(message) }
  }
}

/**
 * A message's name, sent with it as LangChain's ChatOpenAI sends it for DeerFlow (`message.name or
 * additional_kwargs["name"]`; `loop_warning`, `todo_reminder`, `summary`...); a tool message's never (its
 * Chat Completions form keeps only its role, content and call id).
 */
const nameOf = (message: Message): { readonly name?: string } => {
  const kept = message.additional_kwargs?.name
  const name = message.name !== undefined && message.name !== "" ? message.name : kept
  return typeof name === "string" ? { name } : {}
}

/** The Chat Completions messages of a request: the system prompt first, then the messages in order. */
export const toChatMessages = (
  request: ModelRequest,
  vision = true,
  replayReasoning = false,
  replayAs: ReplayField = "reasoning_content"
): Array<ChatMessage> => {
  const out: Array<ChatMessage> = []
  if (request.systemPrompt !== undefined && request.systemPrompt !== "") {
    out.push({ role: "system", content: request.systemPrompt })
  }
  for (const message of request.messages) out.push(toChatMessage(message, vision, replayReasoning, replayAs))
  return out
}

/** Tool definitions as Chat Completions function tools. */
export const toChatTools = (tools: ReadonlyArray<ToolDefinition>): Array<OpenAI.Chat.Completions.ChatCompletionTool> =>
  tools.map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.parameters }
  }))

/**
 * Body fields with `chat_template_kwargs.thinking` renamed `enable_thinking` (an `enable_thinking` already there
 * wins), as DeerFlow's `VllmChatModel` sends them.
 */
export const withEnableThinking = (
  body: Readonly<Record<string, unknown>> | undefined
): Readonly<Record<string, unknown>> | undefined => {
  const kwargs = body?.chat_template_kwargs
  if (!isPlainObject(kwargs) || !("thinking" in kwargs)) return body
  const { thinking, ...rest } = kwargs
  return { ...body, chat_template_kwargs: { enable_thinking: thinking, ...rest } }
}

/** The streaming request body for a model call. */
export const toChatRequest = (
  request: ModelRequest,
  profile: ModelProfile
): OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming => {
  const settings = request.settings
  const { extra_body: thinkingBody, ...thinking } = thinkingFields(profile, settings.thinkingEnabled)
  const merged = isPlainObject(thinkingBody) ? deepMerge(profile.extraBody, thinkingBody) : profile.extraBody
  const extraBody = profile.enableThinkingKwarg === true ? withEnableThinking(merged) : merged
  const maxTokens = settings.maxTokens ?? profile.maxTokens
  const temperature = settings.temperature ?? profile.temperature
  const effort = profile.supportsReasoningEffort === true ? settings.reasoningEffort : undefined
  const modelEffort = profile.supportsReasoningEffort === true && profile.reasoningEffort !== undefined
    ? { reasoning_effort: profile.reasoningEffort }
    : {}
  const messages = toChatMessages(
    request,
    profile.supportsVision !== false,
    profile.replayReasoning === true,
    profile.replayReasoningAs
  )
  // MindIE drops the choices of a stream when tools are offered: such an answer comes whole
  const whole = profile.mindIe === true && request.tools.length > 0
  // Provider fields first, then the model's own, then its thinking settings, so what the run asks for (and the
  // protocol's own fields) always win.
  return {
    ...profile.modelKwargs,
    ...extraBody,
    ...profile.requestFields,
    ...modelEffort,
    ...thinking,
    model: profile.model,
    ...(profile.reasoningSplit === true ? { reasoning_split: true } : {}),
    messages: profile.mindIe === true
      ? MindIe.messages(messages)
      : profile.reasoningSplit === true
      ? MiniMax.messages(messages)
      : messages,
    ...(whole ? { stream: false } : { stream: true }),
    ...(profile.streamUsage === false || whole ? {} : { stream_options: { include_usage: true } }),
    ...(request.tools.length > 0 ? { tools: toChatTools(request.tools) } : {}),
    ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(effort !== undefined ? { reasoning_effort: effort as OpenAI.ReasoningEffort } : {})
  } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming
}
