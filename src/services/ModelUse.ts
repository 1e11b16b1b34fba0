/**
 * DeerFlow's `models[].use` (a LangChain class path) as Antler reads it. Antler speaks OpenAI's Chat Completions
 * API only, so a class is either one whose server speaks it (ChatOpenAI and DeerFlow's patched OpenAI-compatible
 * classes: DeepSeek, MiMo, MiniMax, Kimi, vLLM, ...) or one Antler cannot speak (Anthropic's or Gemini's native
 * APIs, Ollama's `/api/chat`, subscription CLIs). The second kind, and classes Antler does not know, are
 * configuration errors that name the entry and say how to reach the same model through an OpenAI-compatible
 * endpoint: never a request sent silently in the wrong protocol.
 */

/** How Antler treats a `use` value. */
export type ModelUse =
  | {
    readonly _tag: "compatible"
    /** The provider's endpoint when the entry has no `base_url` (undefined: OpenAI's, or `OPENAI_BASE_URL`). */
    readonly defaultBaseUrl?: string | undefined
    /** Whether the entry must name its server (`base_url` / `api_base`): the class has no usable default. */
    readonly needsBaseUrl: boolean
  }
  | { readonly _tag: "native"; readonly api: string; readonly hint: string }
  | { readonly _tag: "unknown" }

const compatible = (needsBaseUrl: boolean, defaultBaseUrl?: string): ModelUse => ({
  _tag: "compatible",
  needsBaseUrl,
  defaultBaseUrl
})

const ANTHROPIC_HINT = "Anthropic serves an OpenAI-compatible endpoint: use: langchain_openai:ChatOpenAI, " +
  "base_url: https://api.anthropic.com/v1/, api_key: $ANTHROPIC_API_KEY (or go through a gateway such as LiteLLM " +
  "or OpenRouter)"
const GEMINI_HINT = "Gemini serves an OpenAI-compatible endpoint: use: langchain_openai:ChatOpenAI, " +
  "base_url: https://generativelanguage.googleapis.com/v1beta/openai/, api_key: $GEMINI_API_KEY"
const OLLAMA_HINT = "Ollama also serves the OpenAI API: use: langchain_openai:ChatOpenAI, " +
  "base_url: http://localhost:11434/v1 (the same host as before, with /v1)"
const CLI_HINT = "reach the model through its provider's OpenAI-compatible API (or a gateway such as LiteLLM) " +
  "with use: langchain_openai:ChatOpenAI and a base_url"

/** The classes Antler knows, by DeerFlow's `module:Class` path. */
export const KNOWN_USES: Readonly<Record<string, ModelUse>> = {
  "langchain_openai:ChatOpenAI": compatible(false),
  "deerflow.models.patched_openai:PatchedChatOpenAI": compatible(false),
  "langchain_deepseek:ChatDeepSeek": compatible(false, "https://api.deepseek.com/v1"),
  "deerflow.models.patched_deepseek:PatchedChatDeepSeek": compatible(false, "https://api.deepseek.com/v1"),
  "deerflow.models.patched_mimo:PatchedChatMiMo": compatible(true),
  "deerflow.models.patched_minimax:PatchedChatMiniMax": compatible(true),
  "deerflow.models.patched_kimi:PatchedChatKimi": compatible(true),
  "deerflow.models.patched_siliconflow:PatchedChatSiliconFlow": compatible(true),
  "deerflow.models.patched_stepfun:PatchedChatStepFun": compatible(true),
  "deerflow.models.patched_360:PatchedChat360": compatible(true),
  "deerflow.models.vllm_provider:VllmChatModel": compatible(true),
  "deerflow.models.rvllm_provider:RvllmChatModel": compatible(true),
  "deerflow.models.mindie_provider:MindIEChatModel": compatible(true),
  "deerflow.models.sambanova_provider:SambaNovaChatModel": compatible(true),
  "langchain_qwq:ChatQwen": compatible(true),
  "langchain_qwq:ChatQwQ": compatible(true),
  "langchain_anthropic:ChatAnthropic": { _tag: "native", api: "Anthropic's native Messages API", hint: ANTHROPIC_HINT },
  "deerflow.models.claude_provider:ClaudeChatModel": {
    _tag: "native",
    api: "Anthropic's native Messages API",
    hint: ANTHROPIC_HINT
  },
  "deerflow.models.anthropic_provider:AnthropicChatModel": {
    _tag: "native",
    api: "Anthropic's native Messages API",
    hint: ANTHROPIC_HINT
  },
  "langchain_google_genai:ChatGoogleGenerativeAI": { _tag: "native", api: "Gemini's native API", hint: GEMINI_HINT },
  "deerflow.models.patched_gemini:PatchedChatGoogleGenerativeAI": {
    _tag: "native",
    api: "Gemini's native API",
    hint: GEMINI_HINT
  },
  "langchain_ollama:ChatOllama": { _tag: "native", api: "Ollama's native /api/chat", hint: OLLAMA_HINT },
  "deerflow.models.openai_codex_provider:CodexChatModel": {
    _tag: "native",
    api: "the ChatGPT Codex subscription endpoint",
    hint: CLI_HINT
  },
  "deerflow.models.claude_cli_provider:ClaudeCliChatModel": {
    _tag: "native",
    api: "the Claude Code CLI",
    hint: CLI_HINT
  }
}

/** What a `use` value means to Antler (no `use`: an OpenAI-compatible model, Antler's own configs). */
export const classify = (use: string | undefined): ModelUse => {
  if (use === undefined || use.trim() === "") return compatible(false)
  return KNOWN_USES[use.trim()] ?? { _tag: "unknown" }
}

/**
 * Why a model entry cannot be used, or undefined: a class Antler cannot speak, a class it does not know, or an
 * OpenAI-compatible class without the server it needs. The message names the entry and the way out.
 */
export const useProblem = (entry: {
  readonly name: string
  readonly use?: string | undefined
  readonly base_url?: string | undefined
  readonly api_base?: string | undefined
}): string | undefined => {
  const use = entry.use?.trim()
  const kind = classify(use)
  switch (kind._tag) {
    case "compatible":
      if (kind.needsBaseUrl && entry.base_url === undefined && entry.api_base === undefined) {
        return `the model "${entry.name}" (use: ${use}) needs its server's address: set base_url (or api_base) to ` +
          "its OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
      }
      return undefined
    case "native":
      return `the model "${entry.name}" uses ${use}, which talks ${kind.api}; Antler speaks only OpenAI's Chat ` +
        `Completions API and will not send this model requests it cannot read. ${kind.hint}.`
    case "unknown":
      return `the model "${entry.name}" uses ${use}, a class Antler does not know. Antler speaks OpenAI's Chat ` +
        "Completions API: if this model's server speaks it too, write use: langchain_openai:ChatOpenAI with its " +
        "base_url; otherwise reach the model through an OpenAI-compatible gateway (LiteLLM, OpenRouter, vLLM)."
  }
}

const VLLM = "deerflow.models.vllm_provider:VllmChatModel"
const MINIMAX = "deerflow.models.patched_minimax:PatchedChatMiniMax"
const MINDIE = "deerflow.models.mindie_provider:MindIEChatModel"

/**
 * DeerFlow's classes that send a model's reasoning (`reasoning_content`) back with its earlier answers, as their
 * servers ask in thinking mode (DeepSeek's, MiMo's and StepFun's: `restore_reasoning_content`), and vLLM's, which
 * wants it back for interleaved thinking (`VllmChatModel`, in the `reasoning` field: `reasoningReplayField`).
 */
const REASONING_REPLAYED: ReadonlySet<string> = new Set([
  VLLM,
  "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
  "deerflow.models.patched_mimo:PatchedChatMiMo",
  "deerflow.models.patched_stepfun:PatchedChatStepFun"
])

/** Whether a model of class `use` gets its answers' reasoning back in later calls (see `REASONING_REPLAYED`). */
export const replaysReasoning = (use: string | undefined): boolean =>
  use !== undefined && REASONING_REPLAYED.has(use.trim())

/**
 * The field an earlier answer's reasoning goes back in: vLLM's reasoning parsers read `reasoning` (DeerFlow's
 * `VllmChatModel`), the others' servers `reasoning_content`.
 */
export const reasoningReplayField = (use: string | undefined): "reasoning_content" | "reasoning" =>
  use?.trim() === VLLM ? "reasoning" : "reasoning_content"

/**
 * Whether every request asks for the reasoning apart from the answer (`reasoning_split: true`): MiniMax otherwise
 * writes its thinking into the answer's text as `<think>` blocks (DeerFlow's `PatchedChatMiniMax`).
 */
export const splitsReasoning = (use: string | undefined): boolean => use?.trim() === MINIMAX

/**
 * Whether `chat_template_kwargs.thinking` is sent as `enable_thinking`, the flag vLLM's Qwen reasoning parser reads
 * (DeerFlow's `VllmChatModel` renames the old spelling it once documented, so those configs keep working).
 */
export const enableThinkingKwarg = (use: string | undefined): boolean => use?.trim() === VLLM

/**
 * Whether the model speaks MindIE's dialect (DeerFlow's `MindIEChatModel`): tool calls and results as XML in the
 * text, no streamed answer when tools are offered (see `layers/openai/MindIe.ts`).
 */
export const speaksMindIe = (use: string | undefined): boolean => use?.trim() === MINDIE

/**
 * Seconds a call of this class may stay silent when its entry sets no timeout: MindIE's answer to a request with
 * tools is not streamed, so nothing comes until it is whole (DeerFlow's `MindIEChatModel` reads for 900 s).
 */
export const defaultTimeoutSeconds = (use: string | undefined): number | undefined =>
  speaksMindIe(use) ? 900 : undefined

/** The endpoint of a class whose provider has a well-known one (DeepSeek), for entries without `base_url`. */
export const defaultBaseUrl = (use: string | undefined): string | undefined => {
  const kind = classify(use)
  return kind._tag === "compatible" ? kind.defaultBaseUrl : undefined
}
