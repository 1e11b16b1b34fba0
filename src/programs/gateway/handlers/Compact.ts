/**
 * The thread's manual compaction (declared in `api/Compact.ts`), as DeerFlow's gateway answers it: the user's
 * thread (another user's is 404), refused with 409 while a run holds it or when `summarization.enabled` is false
 * ("Context compaction is disabled."), `compacted: false` with a reason when there is nothing to compact (or,
 * with `force: false`, no trigger fires), 500 when no summary could be made. The compaction itself is
 * `Compaction.compactThread` (the Summarization middleware's, written as a checkpoint of its own), its summary
 * asked of the gateway's model service, with memory's flush as its before-summarisation hook.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as MemoryMW from "../../../middleware/Memory.js"
import type { ModelConfig } from "../../../services/AppConfig.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as Authz from "../../../services/Authorization.js"
import type { Snapshot } from "../../../services/LiveConfig.js"
import { Memory } from "../../../services/Memory.js"
import type { ModelService } from "../../../services/ModelService.js"
import * as Compaction from "../../Compaction.js"
import * as CustomAgents from "../../CustomAgents.js"
import * as CompactApi from "../api/Compact.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Admission from "../Admission.js"
import * as Body from "../Body.js"
import * as Access from "./Access.js"
import * as Catalog from "./Catalog.js"
import * as Live from "./Live.js"
import { json } from "./Http.js"

const BUSY = "Thread has a run in flight. Compact after the run finishes."

/**
 * The compaction endpoint of `api` (DeerFlow's, under `/api`), its summaries asked of `model` among `models` (those
 * of `config.yaml` as it is now, with its `summarization`, when the gateway takes its edits).
 */
export const layer = (
  api: DeerFlowApi,
  model: ModelService["Type"],
  models: ReadonlyArray<ModelConfig>,
  userCalls: (userId: string) => Admission.Places = Admission.userCalls(undefined),
  authz?: Authz.Authorization
) =>
  HttpApiBuilder.group(api, "compact", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const memory = Option.getOrUndefined(yield* Effect.serviceOption(Memory))
      const home = (yield* AppConfigService).home
      const fs = yield* FileSystem.FileSystem
      const now = yield* Live.snapshot({ model, models })
      const configured = (snap: Snapshot, name: string | null | undefined) =>
        name != null && snap.models.some((m) => m.name === name) ? name : undefined
      /** The custom agent's model, as a run of it would use (none when it cannot be read: the default). */
      const agentModel = (snap: Snapshot, user: string, agentName: string) =>
        CustomAgents.load(home, user, agentName).pipe(
          Effect.map((agent) => configured(snap, agent.config.model)),
          Effect.provideService(FileSystem.FileSystem, fs),
          Effect.orElseSucceed(() => undefined)
        )
      return handlers.handleRaw("compact", ({ path }) =>
        Effect.gen(function*() {
          const who = yield* CurrentIdentity
          const { user } = who
          const thread = yield* access.threadRef(user, path.thread_id)
          const request = yield* Body.json(CompactApi.CompactRequest)
          const snap = yield* now
          const modelName = request.model_name ?? undefined
          if (modelName !== undefined && !snap.models.some((m) => m.name === modelName)) {
            const named = JSON.stringify(modelName)
            return yield* fail("unprocessable", `model_name: no model named ${named} is configured.`)
          }
          if (access.runs.activeOf(thread.stored) !== undefined) return yield* fail("conflict", BUSY)
          const agentName = request.agent_name ?? undefined
          // as DeerFlow resolves it: the request's model, else the custom agent's, else the default
          const threadModel = modelName ??
            (agentName === undefined ? undefined : yield* agentModel(snap, user, agentName))
          const field = modelName !== undefined ? "model_name" : "agent_name"
          // (none named: the default, or the first model the role may use; never one it may not)
          const summaryModel = yield* Catalog.modelFor(authz, who, snap.models, threadModel, field)
          const principal = authz === undefined
            ? undefined
            : Authz.principalOf({ userId: who.user, role: who.role }, authz.defaultRole)
          const allows = principal === undefined
            ? undefined
            : (name: string) => Authz.allows(authz!, principal, "model", "use", name)
          // `summarization.model_name` the role may not use: the summary is asked of the thread's model only
          const configured = snap.app.config.summarization.model_name
          const ownSummary = configured == null || allows === undefined || (yield* allows(configured))
          if (!ownSummary) {
            yield* Effect.logInfo(
              `Manual compaction: summarization.model_name ${configured} is not available for role ` +
                `${principal?.role}; the summary uses ${summaryModel}`
            )
          }
          // memory's flush, as in the lead chain (DeerFlow's `memory_flush_hook`)
          // (under `config.yaml`'s `memory` as it is now)
          const under = memory?.under(snap.app.config.memory)
          const hooks = under === undefined || !under.enabled
            ? []
            : [MemoryMW.beforeCompaction({ memory: under, agentName, allows })]
          const result = yield* Compaction.compactThread(thread.stored, {
            model: Admission.lined(snap.model, userCalls),
            force: request.force,
            raise: true,
            keep: request.keep ?? undefined,
            modelName: summaryModel,
            ...(ownSummary ? {} : { summaryModel: null }),
            agentName,
            userId: user,
            hooks
          }).pipe(
            Effect.map((done) => ({ ...done, thread_id: thread.threadId })),
            Effect.catchTags({
              CompactionError: (error) => {
                switch (error.reason) {
                  case "disabled":
                    return Effect.fail(fail("conflict", "Context compaction is disabled."))
                  case "summary_failed":
                    return Effect.zipRight(
                      Effect.logWarning("Manual compaction: no summary could be made").pipe(
                        Effect.annotateLogs({ thread: thread.stored, errors: error.errors.join("; ") })
                      ),
                      Effect.fail(fail("internal", "Failed to compact thread context: no summary could be made."))
                    )
                  default:
                    return Effect.succeed({
                      thread_id: thread.threadId,
                      compacted: false,
                      reason: error.reason,
                      removed_message_count: 0,
                      preserved_message_count: 0,
                      summary_updated: false,
                      checkpoint_id: null,
                      total_tokens: 0,
                      summary: null
                    })
                }
              },
              CompactionThreadBusy: () => Effect.fail(fail("conflict", BUSY)),
              CompactionThreadNotFound: () => Effect.fail(fail("not_found", `Thread ${path.thread_id} not found.`)),
              SummarizationConfigError: (error) => Effect.fail(fail("internal", error.message)),
              StoreError: (error) => Effect.fail(access.writeFailed(path.thread_id, "its compaction")(error))
            }),
            Effect.provideService(AppConfigService, snap.app)
          )
          const { summary: _summary, ...answer } = result
          return json(CompactApi.CompactResponse, answer)
        }))
    }))
