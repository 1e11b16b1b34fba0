/**
 * DeerFlow's regenerate, edit-and-regenerate and branch endpoints (declared in `api/Branches.ts`). Regenerate and
 * edit prepare a run the app then starts from the checkpoint before the turn (a fork, see `Fork`): the input (the
 * question again, or the edited one under a new id), that checkpoint, and metadata naming what is replaced. A
 * branch is a new thread of the user's holding the conversation up to an answer (and, from the latest answer, a
 * copy of the thread's files).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { USER_SUFFIX } from "../../../middleware/DynamicContext.js"
import { ORIGINAL_USER_CONTENT, originalUserContent } from "../../../middleware/InputSanitization.js"
import { isStagingFile } from "../../../middleware/Uploads.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import type { CheckpointRecord } from "../../../services/ThreadStore.js"
import { isRecord } from "../../../state/Json.js"
import * as M from "../../../state/Message.js"
import * as App from "../../App.js"
import * as Run from "../../Run.js"
import * as BranchesApi from "../api/Branches.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as BranchSeed from "../BranchSeed.js"
import * as Fork from "../Fork.js"
import type { Folded } from "../MessageHistory.js"
import * as MessageHistory from "../MessageHistory.js"
import * as MessagesPage from "../MessagesPage.js"
import * as ThreadIds from "../ThreadIds.js"
import type { ThreadRef } from "./Access.js"
import * as Access from "./Access.js"
import { json } from "./Http.js"
import * as Turns from "./Turns.js"

/** The metadata key DeerFlow's app marks a side conversation's thread with. */
const SIDECAR = "deerflow_sidecar"

/** What holds the lease and storage quota reservation of a branch being seeded: this and the branch's id. */
const BRANCH_WRITER = "branch-"

const visible = (message: M.Message, type: "human" | "ai") => message.type === type && !Turns.hidden(message)

const ref = (threadId: string, seq: number) => ({
  thread_id: threadId,
  checkpoint_ns: "",
  checkpoint_id: String(seq),
  checkpoint_map: null
})

/** The text a human message's content holds. */
const textOf = (message: M.Message) => M.text(message).trim()

/** What the user wrote of a question: its `original_user_content` when a middleware put context before it. */
const userText = (message: M.Message) => originalUserContent(message) ?? textOf(message)

/**
 * The id the client sent a question under: the date reminder takes over the first question's id and puts the
 * question back as `<id>__user`, which a replayed turn must not carry (it would be told no date).
 */
const sentId = (id: string) => id.endsWith(USER_SUFFIX) && id.length > USER_SUFFIX.length
  ? id.slice(0, -USER_SUFFIX.length)
  : id

/** A question's `name`, when it has one. */
const nameOf = (message: M.Message) => {
  const name = (message as { readonly name?: unknown }).name
  return typeof name === "string" && name !== "" ? { name } : {}
}

/**
 * A branch's default name: its source's title trimmed; a branch of a branch drops the `Branch:` prefixes its title
 * has (the names DeerFlow's earlier branches were given), as DeerFlow's `_default_branch_display_name`; blank is
 * none (null).
 */
export const displayName = (title: string | null | undefined, sourceIsBranch: boolean): string | null => {
  let name = title?.trim() ?? ""
  if (sourceIsBranch) {
    while (name.toLowerCase().startsWith("branch:")) name = name.slice("branch:".length).trim()
  }
  return name === "" ? null : name
}

/** The branches endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "branches", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const { store, runs, storeFailed } = access
      const app = yield* AppConfigService

      const folded = (thread: ThreadRef) =>
        Effect.gen(function*() {
          if (runs.activeOf(thread.stored) !== undefined) {
            return yield* fail("conflict", `Thread ${thread.threadId} has a run in progress; wait for its end.`)
          }
          const records = yield* Effect.mapError(store.checkpoints(thread.stored), storeFailed)
          if (records.length === 0) return yield* notFound(`A checkpoint of thread ${thread.threadId}`)
          const result = MessageHistory.fold(records)
          if (Either.isLeft(result)) return yield* fail("internal", result.left.message)
          return { records, ...result.right }
        })

      /** The checkpoint before the one that first wrote message `id` (`0`: before the thread's first). */
      const baseBefore = (records: ReadonlyArray<CheckpointRecord>, folded: Pick<Folded, "origin">, id: string) => {
        const at = folded.origin.get(id)?.index ?? 0
        return at > 0 ? records[at - 1]!.seq : Fork.BEFORE_FIRST
      }

      return handlers
        .handleRaw("prepareRegenerate", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.threadRef(user, path.thread_id)
            const request = yield* Body.json(BranchesApi.RegenerateRequest)
            const { records, state, origin } = yield* folded(thread)
            const messages = state.messages
            const target = messages.findIndex((m) => m.id === request.message_id)
            if (target < 0) return yield* notFound(`Message ${request.message_id}`)
            if (!visible(messages[target]!, "ai")) {
              return yield* fail("conflict", "Only visible assistant messages can be regenerated.")
            }
            const latest = messages.findLast((m) => visible(m, "ai"))
            if (latest?.id !== request.message_id) {
              return yield* fail("conflict", "Only the latest assistant message can be regenerated.")
            }
            const human = messages.slice(0, target).findLast((m) => visible(m, "human"))
            if (human === undefined) {
              return yield* fail("conflict", "Could not find the user message for this assistant response.")
            }
            const runId = origin.get(request.message_id)?.run_id
            if (runId === undefined) return yield* fail("conflict", "Could not find the run of this assistant message.")
            const base = baseBefore(records, { origin }, human.id)
            // (the server's keys left out: the run puts them back)
            const { hide_from_ui: _hidden, [ORIGINAL_USER_CONTENT]: _original, ...kwargs } =
              (human.additional_kwargs ?? {}) as Record<string, unknown>
            return json(BranchesApi.Prepared, {
              input: {
                messages: [{
                  type: "human",
                  id: sentId(human.id),
                  ...nameOf(human),
                  content: [{ type: "text", text: userText(human) }],
                  additional_kwargs: kwargs
                }],
                ...(state.title !== null && state.title !== "" ? { title: state.title } : {})
              },
              checkpoint: ref(thread.threadId, base),
              metadata: {
                regenerate_from_message_id: request.message_id,
                regenerate_from_run_id: runId,
                regenerate_checkpoint_id: String(base)
              },
              target_run_id: runId
            })
          }))
        .handleRaw("prepareEditRegenerate", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.threadRef(user, path.thread_id)
            const request = yield* Body.json(BranchesApi.EditRequest)
            const text = request.replacement_text.trim()
            if (text === "") return yield* fail("conflict", "Edited message cannot be empty.")
            const { records, state, origin } = yield* folded(thread)
            if (state.goal !== null) return yield* fail("conflict", "Cannot edit while a goal is active.")
            const messages = state.messages
            const humanAt = messages.findLastIndex((m) => visible(m, "human"))
            if (humanAt < 0 || messages[humanAt]!.id !== request.human_message_id) {
              return yield* fail("conflict", "Only the latest completed user turn can be edited.")
            }
            const human = messages[humanAt]!
            const answerAt = messages.findLastIndex((m, i) => i > humanAt && visible(m, "ai"))
            const answer = messages[answerAt]
            const finished = answer !== undefined && answer.type === "ai" && (answer.tool_calls ?? []).length === 0 &&
              M.text(answer).trim() !== ""
            if (answer === undefined || !finished) {
              return yield* fail("conflict", "Only completed assistant text turns can be edited.")
            }
            if (text === userText(human).trim()) return yield* fail("conflict", "Edited message is unchanged.")
            const runId = origin.get(answer.id)?.run_id
            if (runId === undefined) return yield* fail("conflict", "Could not find the run of this assistant message.")
            // (a stopped or failed turn is regenerated, not edited: its answer may be a part)
            const [ran] = yield* Effect.mapError(store.runs({ runId }), storeFailed)
            if (ran?.status !== "success") {
              return yield* fail("conflict", "Only successful assistant runs can be edited and rerun.")
            }
            const base = baseBefore(records, { origin }, human.id)
            const replacement = M.newId()
            // an edit of an edited question keeps its first question's group, as DeerFlow reads it from the source
            // run's metadata (the prepared metadata the app ran it with)
            const asked = ran.metadata?.["metadata"]
            const group = isRecord(asked) && typeof asked["edit_version_group_id"] === "string" &&
                asked["edit_version_group_id"] !== ""
              ? asked["edit_version_group_id"]
              : human.id
            const source = (human.additional_kwargs ?? {}) as Record<string, unknown>
            const kwargs = Object.fromEntries(
              ["files", "referenced_message_contexts"].filter((key) => key in source).map((key) => [key, source[key]])
            )
            // a title the thread had at the base is kept as it is now (a rename since is not rolled back); an
            // untitled base is left to be titled from the edited question
            const baseState = base === Fork.BEFORE_FIRST ? undefined : Fork.stateAfter(records, base)
            const titled = baseState !== undefined && Either.isRight(baseState) && baseState.right.title !== null &&
              baseState.right.title !== "" && state.title !== null && state.title !== ""
            return json(BranchesApi.EditPrepared, {
              input: {
                messages: [{
                  type: "human",
                  id: replacement,
                  ...nameOf(human),
                  content: [{ type: "text", text }],
                  additional_kwargs: kwargs
                }],
                ...(titled ? { title: state.title } : {})
              },
              checkpoint: ref(thread.threadId, base),
              metadata: {
                replay_kind: "edit",
                regenerate_from_message_id: answer.id,
                regenerate_from_run_id: runId,
                regenerate_checkpoint_id: String(base),
                edit_from_message_id: human.id,
                edit_message_id: replacement,
                edit_version_group_id: group
              },
              target_run_id: runId,
              replacement_human_message_id: replacement,
              source_message_ids: messages.slice(humanAt, answerAt + 1).map((m) => m.id)
            })
          }))
        .handleRaw("createBranch", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const owned = yield* access.ownedThread(user, path.thread_id)
            const thread: ThreadRef = { stored: owned.thread_id, threadId: path.thread_id }
            const request = yield* Body.json(BranchesApi.BranchRequest)
            // a side conversation (the app's sidecar, `metadata.deerflow_sidecar`) is not branched, as DeerFlow's
            if (owned.metadata?.[SIDECAR] === true) {
              return yield* fail("conflict", "Branching is only available in the main conversation.")
            }
            const { records, state, origin, history, dropped } = yield* folded(thread)
            const wanted = [request.message_id, ...(request.message_ids ?? [])]
            // (an answer of the messages page: one a compaction summarised away too, and one a regenerate that has
            // not succeeded took back; not one a regenerate replaced)
            const ran = yield* Effect.mapError(store.runs({ threadId: thread.stored }), storeFailed)
            const from = MessagesPage.rows({ history, dropped }, new Map(ran.map((r) => [r.run_id, r])))
              .findLast(({ message }) => message.id === request.message_id)
            if (from === undefined) return yield* notFound(`Message ${request.message_id}`)
            // the turn's end: the last checkpoint of the run that wrote the answer
            const endAt = records.findLastIndex((r) => r.run_id === from.run_id)
            const snapshot = Fork.stateAfter(records, records[endAt]!.seq)
            if (Either.isLeft(snapshot)) return yield* fail("internal", snapshot.left.message)
            // a branch is taken from answers (as DeerFlow's): a question, or a tool's result, names no turn's end
            const types = new Map(snapshot.right.messages.map((m) => [m.id, m.type]))
            if (!wanted.every((id) => types.get(id) === "ai")) {
              return yield* fail("conflict", "This turn can no longer be branched from.")
            }
            const latest = state.messages.findLast((m) => visible(m, "ai"))?.id === request.message_id
            const branchId = M.newId()
            const at = new Date(yield* Clock.currentTimeMillis).toISOString()
            // within the user's quotas: one more thread, the bytes of the files it copies, and about what the
            // parent keeps in the database (the branch is seeded with its state)
            const adding = latest ? yield* access.quotas.threadBytes(user, thread.stored) : 0
            const kept = yield* Effect.mapError(store.bytesOf(thread.stored), storeFailed)
            const seeding = access.withBytes(user, adding, Effect.gen(function*() {
              const made = yield* access.newThread(user, branchId, {
                deerflow_branch: true,
                branch_parent_thread_id: thread.threadId,
                branch_parent_checkpoint_id: String(records[endAt]!.seq),
                branch_parent_message_id: request.message_id,
                branch_created_at: at
              })
              if (!latest) return { made, clone: "skipped_historical_turn" }
              const copied = yield* App.copyThreadFiles(app.home, user, thread.stored, made.thread_id, isStagingFile)
              return { made, clone: copied === "copied" ? "current_thread_best_effort" : copied }
            }))
            // named as the chat is now (a title given since the turn included), as DeerFlow names a branch after
            // its source's display name; a title the request gives (not blank) is the branch's
            const title = request.title?.trim()
              ? request.title
              : displayName(state.title, owned.metadata?.deerflow_branch === true)
            // the parent's state before the last turn: the branch's checkpoint before it (see BranchSeed)
            const opening = snapshot.right.messages.findLast(BranchSeed.opensTurn)
            const baseSeq = opening === undefined
              ? Fork.BEFORE_FIRST
              : baseBefore(records, { origin }, opening.id)
            const base = baseSeq === Fork.BEFORE_FIRST ? undefined : Fork.stateAfter(records, baseSeq)
            if (base !== undefined && Either.isLeft(base)) return yield* fail("internal", base.left.message)
            // a branch of the latest answer has the thread's goal and todos as they are now (set, or judged by the
            // goal's evaluator, after the run), as DeerFlow's branch copies its newest checkpoint holding the answer
            const now = latest ? { goal: state.goal, todos: state.todos } : {}
            const seeds = BranchSeed.seeds(
              branchId,
              base === undefined ? undefined : { ...base.right, title },
              { ...snapshot.right, ...now, title }
            )
            // the branch holds its thread as a copy does, by its lease, taken before the thread is made (under the
            // id it will be stored under) and kept until it is seeded: a run of the branch, or its delete, meanwhile
            // is refused (409), and a seed of a branch that stalled past the lease's life, whose thread another run
            // took, is not written after that run's steps (fenced: 409)
            const leased = ThreadIds.storedIds(user, branchId)[0]!
            const writer = `${BRANCH_WRITER}${branchId}`
            // (about what the parent keeps, reserved until the branch is seeded, freed by each seed: `filling`)
            const { clone } = yield* access.filling(
              user,
              leased,
              writer,
              kept?.bytes ?? 0,
              (seeded) => Effect.gen(function*() {
                const holder = yield* Effect.mapError(Run.takeLease(store, leased, writer), storeFailed)
                if (holder !== undefined) return yield* fail("internal", `Thread ${branchId} is held by another.`)
                const done = yield* seeding
                if (done.made.thread_id !== leased) {
                  return yield* fail("internal", `Thread ${branchId} was not made under the id it holds.`)
                }
                for (const [i, seed] of seeds.entries()) {
                  const updates = latest && i === seeds.length - 1
                    ? [...seed.updates, { artifacts: snapshot.right.artifacts }]
                    : seed.updates
                  yield* Effect.mapError(
                    store.append(done.made.thread_id, seed.runId, updates, { leased: writer }),
                    access.writeFailed(branchId, "its branch's history")
                  )
                  yield* seeded(updates)
                }
                return done
              }).pipe(Effect.ensuring(Effect.ignore(store.releaseLease(leased, writer))))
            )
            return json(BranchesApi.Branch, {
              thread_id: branchId,
              parent_thread_id: thread.threadId,
              parent_checkpoint_id: String(records[endAt]!.seq),
              branched_from_message_id: request.message_id,
              workspace_clone_mode: clone,
              history_seed_mode: "seeded"
            })
          }))
    }))
