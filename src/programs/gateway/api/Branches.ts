/**
 * DeerFlow's endpoints that start a thread's turn over, declared (DeerFlow's paths and shapes, under `/api`):
 * regenerate an answer and edit-and-regenerate a question (each prepares what the app then sends as a run from a
 * checkpoint: the input, the checkpoint before the turn, metadata), and a branch (a new thread holding the
 * conversation up to an answer). Implemented in `handlers/Branches.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord } from "./Threads.js"

const MessageId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))

/** `POST .../runs/regenerate/prepare` */
export const RegenerateRequest = Schema.Struct({ message_id: MessageId })

/** `POST .../runs/edit-regenerate/prepare` */
export const EditRequest = Schema.Struct({
  human_message_id: MessageId,
  replacement_text: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000))
})

/** A checkpoint reference. */
export const CheckpointRef = Schema.Struct({
  thread_id: Schema.String,
  checkpoint_ns: Schema.String,
  checkpoint_id: Schema.String,
  checkpoint_map: Schema.Null
})

/** What the app sends as the run that regenerates. */
export const Prepared = Schema.Struct({
  input: JsonRecord,
  checkpoint: CheckpointRef,
  metadata: JsonRecord,
  target_run_id: Schema.String
}).annotations({ identifier: "RegeneratePrepared" })

/** What the app sends as the run of the edited question. */
export const EditPrepared = Schema.Struct({
  ...Prepared.fields,
  replacement_human_message_id: Schema.String,
  source_message_ids: Schema.Array(Schema.String)
}).annotations({ identifier: "EditRegeneratePrepared" })

/** `POST /api/threads/{id}/branches` */
export const BranchRequest = Schema.Struct({
  message_id: MessageId,
  message_ids: Schema.optional(Schema.Array(MessageId).pipe(Schema.maxItems(100))),
  title: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(256))))
})

/** The branch made. */
export const Branch = Schema.Struct({
  thread_id: Schema.String,
  parent_thread_id: Schema.String,
  parent_checkpoint_id: Schema.String,
  branched_from_message_id: Schema.String,
  workspace_clone_mode: Schema.String,
  history_seed_mode: Schema.String
}).annotations({ identifier: "ThreadBranch" })

const Refusals = Schema.Union(
  refusal(404, "No such thread (of this user), or no such message in it"),
  refusal(409, "A turn that cannot be started over (not the latest, not finished, a goal active, a run in progress)")
)

/** The branches group (served under `/api`). */
export const group = HttpApiGroup.make("branches")
  .add(
    HttpApiEndpoint.post("prepareRegenerate", "/threads/:thread_id/runs/regenerate/prepare")
      .setPath(ThreadPath)
      .setPayload(RegenerateRequest)
      .addSuccess(Prepared)
      .addError(Refusals)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Prepare the run that regenerates the latest answer")
  )
  .add(
    HttpApiEndpoint.post("prepareEditRegenerate", "/threads/:thread_id/runs/edit-regenerate/prepare")
      .setPath(ThreadPath)
      .setPayload(EditRequest)
      .addSuccess(EditPrepared)
      .addError(Refusals)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Prepare the run of the latest question, edited")
  )
  .add(
    HttpApiEndpoint.post("createBranch", "/threads/:thread_id/branches")
      .setPath(ThreadPath)
      .setPayload(BranchRequest)
      .addSuccess(Branch)
      .addError(Refusals)
      .addError(QuotaRefusal)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "A new thread holding the conversation up to an answer")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Regenerate, edit and regenerate, branch (DeerFlow's)")
