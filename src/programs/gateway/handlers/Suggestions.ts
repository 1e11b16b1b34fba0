/**
 * The composer's helpers (declared in `api/Suggestions.ts`), as DeerFlow's gateway makes them: follow-up
 * questions from the last messages the app sends (for a thread of the user's; its prompt asks for a JSON array of
 * short questions in the user's language; whatever the model answers is read as such an array or as none, and a
 * failed call is none), and a draft rewritten as a clearer instruction (a failed or empty answer is a 503). Both
 * are one internal model call (`OneShot.ts`): no run, nothing written to a thread, nothing streamed. The answer is
 * masked for the gateway's secrets before it is read and cut (a cut inside a key would keep its beginning).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import type { ModelConfig } from "../../../services/AppConfig.js"
import type * as Authz from "../../../services/Authorization.js"
import type { Snapshot } from "../../../services/LiveConfig.js"
import type { ModelService } from "../../../services/ModelService.js"
import * as Chars from "../../../state/Chars.js"
import * as LlmText from "../../../state/LlmText.js"
import * as Markup from "../../../state/Markup.js"
import * as Redact from "../../../state/Redact.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, problem } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as SuggestionsApi from "../api/Suggestions.js"
import * as Admission from "../Admission.js"
import * as Body from "../Body.js"
import * as OneShot from "../OneShot.js"
import * as Access from "./Access.js"
import * as Catalog from "./Catalog.js"
import * as Live from "./Live.js"
import { json } from "./Http.js"

/** The questions asked for when a request does not say (DeerFlow's `n` default), within the setting. */
const DEFAULT_SUGGESTIONS = 3

/** The longest question kept, and the longest rewritten draft. */
const MAX_QUESTION_CHARS = 300
const MAX_REWRITE_CHARS = 100_000

/** The questions of a model's answer: the strings of its JSON array (none when it has none), one line each. */
export const parseQuestions = (answer: string, n: number): ReadonlyArray<string> => {
  // (a `<think>` left open is a model cut off mid-thought: what follows it is not read)
  const text = LlmText.withoutCodeFence(LlmText.withoutThinkBlocks(answer))
  const start = text.indexOf("[")
  const end = text.lastIndexOf("]")
  if (start < 0 || end <= start) return []
  let parsed: unknown
  try {
    parsed = JSON.parse(text.slice(start, end + 1))
  } catch {
    return []
  }
  if (!Array.isArray(parsed)) return []
  return parsed
    .filter((item): item is string => typeof item === "string")
    .map((item) => item.replace(/[\u0000-\u001f\u007f]+/g, " ").trim().slice(0, MAX_QUESTION_CHARS))
    .filter((item) => item !== "")
    .slice(0, n)
}

const conversation = (messages: typeof SuggestionsApi.SuggestionsRequest.Type["messages"]) =>
  messages.map((m) => {
    const role = m.role.trim().toLowerCase()
    const who = role === "user" || role === "human"
      ? "User"
      : role === "assistant" || role === "ai"
      ? "Assistant"
      : m.role
    return `${who}: ${m.content.trim()}`
  }).join("\n").trim()

const suggestionsPrompt = (n: number) =>
  "You are generating follow-up questions to help the user continue the conversation.\n" +
  `Based on the conversation below, produce EXACTLY ${n} short questions the user might ask next.\n` +
  "Requirements:\n" +
  "- Questions must be relevant to the preceding conversation.\n" +
  "- Questions must be written in the same language as the user.\n" +
  "- Keep each question concise (ideally <= 20 words / <= 40 Chinese characters).\n" +
  "- Do NOT include numbering, markdown, or any extra text.\n" +
  "- Output MUST be a JSON array of strings only.\n"

const POLISH_PROMPT = "You are a pre-send prompt optimizer.\n" +
  "Rewrite the user's rough draft into a clearer instruction for an AI agent before it is sent.\n" +
  "Do not answer the task.\n" +
  "Preserve the user's language, intent, entities, file paths, URLs, code blocks, and any leading slash command " +
  "prefix exactly.\n" +
  "Make the goal, scope, constraints and desired output explicit when the draft implies them.\n" +
  "Turn vague quality words ('better', 'polished') into concrete but generic quality criteria.\n" +
  "Do not invent facts, context, tools, file names, dates, metrics or preferences the draft does not imply.\n" +
  "Prefer one concise paragraph or a short bullet list, under 180 words unless the draft is longer.\n" +
  "Output only the rewritten draft, with no markdown wrapper, explanation or alternatives."

/**
 * The suggestions endpoints of `api` (DeerFlow's, under `/api`), their model calls made with `model` among `models`
 * (those of `config.yaml` as it is now, when the gateway takes its edits).
 */
export const layer = (
  api: DeerFlowApi,
  model: ModelService["Type"],
  models: ReadonlyArray<ModelConfig>,
  userCalls: (userId: string) => Admission.Places = Admission.userCalls(undefined),
  authz?: Authz.Authorization,
  redact: Redact.Redactor = Redact.none
) =>
  HttpApiBuilder.group(api, "suggestions", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const now = yield* Live.snapshot({ model, models })
      const known = (snap: Snapshot, name: string | null | undefined, field: string) =>
        name == null || snap.models.some((m) => m.name === name)
          ? Effect.succeed(name ?? undefined)
          // (a made-up name of a megabyte is repeated as a line, not whole: `Chars.echoed`)
          : Effect.fail(
            fail("unprocessable", `${field}: no model named ${JSON.stringify(Chars.echoed(name))} is configured.`)
          )

      return handlers
        .handleRaw("suggestionsConfig", () =>
          Effect.map(now, (snap) =>
            json(SuggestionsApi.SuggestionsConfig, {
              enabled: snap.app.config.suggestions.enabled,
              max_suggestions: snap.app.config.suggestions.max_suggestions
            })))
        .handleRaw("suggest", ({ path }) =>
          Effect.gen(function*() {
            const identity = yield* CurrentIdentity
            const request = yield* Body.json(SuggestionsApi.SuggestionsRequest)
            yield* access.threadRef(identity.user, path.thread_id)
            const snap = yield* now
            const { suggestions } = snap.app.config
            const model = Admission.lined(snap.model, userCalls)
            const named = yield* known(snap, request.model_name, "model_name")
            // (none named: the default, or the first model the role may use; never one it may not)
            const modelName = yield* Catalog.modelFor(authz, identity, snap.models, named, "model_name")
            const none = json(SuggestionsApi.Suggestions, { suggestions: [] })
            const context = conversation(request.messages)
            if (!suggestions.enabled || context === "") return none
            const n = Math.min(request.n ?? DEFAULT_SUGGESTIONS, suggestions.max_suggestions)
            const answer = yield* OneShot.text(model, {
              purpose: "suggestions",
              system: suggestionsPrompt(n),
              user: `Conversation Context:\n${context}\n\nGenerate ${n} follow-up questions`,
              modelName,
              userId: identity.user
            }).pipe(Effect.either)
            if (answer._tag === "Left") {
              yield* Effect.logWarning(
                `Follow-up questions not made for thread ${path.thread_id}: ${answer.left.message}`
              )
              return none
            }
            return json(SuggestionsApi.Suggestions, { suggestions: parseQuestions(redact.text(answer.right), n) })
          }))
        .handleRaw("polishInput", () =>
          Effect.gen(function*() {
            const identity = yield* CurrentIdentity
            const snap = yield* now
            const { input_polish: polish } = snap.app.config
            const model = Admission.lined(snap.model, userCalls)
            if (!polish.enabled) return yield* fail("not_found", "Input polishing is disabled (input_polish.enabled).")
            const request = yield* Body.json(SuggestionsApi.InputPolishRequest)
            const text = request.text.trim()
            if (text === "") return yield* fail("bad_request", "Input text is required")
            // (counted in characters as DeerFlow counts them, code points: an emoji is one)
            if (Chars.charLength(text) > polish.max_chars) {
              return yield* fail("bad_request", `Input text exceeds ${polish.max_chars} characters`)
            }
            // (`input_polish.model_name`, else the default: when the role may not use it, one it may)
            const modelName = yield* Catalog.modelFor(
              authz,
              identity,
              snap.models,
              undefined,
              "input_polish.model_name",
              polish.model_name ?? undefined
            )
            const locale = request.locale?.trim() || "same language as the draft"
            const answer = yield* OneShot.text(model, {
              purpose: "input_polish",
              system: POLISH_PROMPT,
              // the draft cannot close its block (escaped as every harness block is)
              user: `Locale hint: ${Markup.escapeText(locale)}\n\nRewrite this draft while preserving its intent:\n` +
                Markup.block("draft", text),
              modelName,
              userId: identity.user
            }).pipe(Effect.either)
            if (answer._tag === "Left") yield* Effect.logWarning(`Input not polished: ${answer.left.message}`)
            const rewritten = answer._tag === "Right"
              // (a draft may mention `<think>`: a tag left open is kept)
              ? LlmText.withoutCodeFence(LlmText.withoutThinkBlocks(redact.text(answer.right), false))
                .slice(0, MAX_REWRITE_CHARS)
              : ""
            if (rewritten === "") return problem(503, "Failed to polish input")
            return json(SuggestionsApi.InputPolished, { rewritten_text: rewritten, changed: rewritten !== text })
          }))
    }))
