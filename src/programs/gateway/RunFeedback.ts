/**
 * The feedback on a run (DeerFlow's feedback table), kept in the run's record: the user's one rating of the run's
 * answer (DeerFlow's upsert, `PUT .../feedback`, which the app sends and its messages page shows on the run's last
 * answer) under `RATING`, and the ratings given one by one (DeerFlow's create, `POST .../feedback`, possibly on one
 * message) under `MORE`, at most `MAX_MORE`. A run's records are its user's only, so all of it is its user's.
 */
import type { RunRecord } from "../../services/ThreadStore.js"

/** One rating, in DeerFlow's `FeedbackResponse` shape. */
export interface Feedback {
  readonly feedback_id: string
  readonly run_id: string
  readonly thread_id: string
  readonly user_id: string | null
  readonly message_id: string | null
  readonly rating: 1 | -1
  readonly comment: string | null
  readonly created_at: string
}

// (both keys are `ThreadStore.RUN_KEPT_KEYS`: a run's start or end written by `saveRun` keeps them as stored)

/** The run record's metadata key of the user's rating of the run's answer. */
export const RATING = "feedback"
/** The run record's metadata key of the ratings given one by one. */
export const MORE = "feedback_more"
/** The most ratings given one by one that a run keeps (DeerFlow lists at most 100 of a run's). */
export const MAX_MORE = 100

type Metadata = NonNullable<RunRecord["metadata"]>

const isFeedback = (value: unknown): value is Feedback =>
  typeof value === "object" && value !== null && typeof (value as Feedback).feedback_id === "string"

/** The user's rating of the run's answer, if any. */
export const rating = (record: RunRecord | undefined): Feedback | undefined => {
  const value = record?.metadata?.[RATING]
  return isFeedback(value) ? value : undefined
}

/** The ratings given one by one, oldest first. */
export const more = (record: RunRecord): ReadonlyArray<Feedback> => {
  const value = record.metadata?.[MORE]
  return Array.isArray(value) ? value.filter(isFeedback) : []
}

/** Every rating of the run, oldest first (DeerFlow's `list_by_run`). */
export const all = (record: RunRecord): ReadonlyArray<Feedback> => {
  const one = rating(record)
  return [...(one === undefined ? [] : [one]), ...more(record)]
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))
}

/** How many ratings the run has, up and down (DeerFlow's `FeedbackStatsResponse`). */
export const stats = (record: RunRecord) => {
  const ratings = all(record)
  return {
    run_id: record.run_id,
    total: ratings.length,
    positive: ratings.filter((f) => f.rating === 1).length,
    negative: ratings.filter((f) => f.rating === -1).length
  }
}

/** The metadata with `feedback` as the user's rating of the run's answer. */
export const rated = (metadata: Metadata, feedback: Feedback): Metadata => ({ ...metadata, [RATING]: feedback })

/** The metadata with `feedback` added to the ratings given one by one. */
export const added = (record: RunRecord, feedback: Feedback): Metadata => ({
  ...record.metadata,
  [MORE]: [...more(record), feedback]
})

/** The metadata without the rating `feedbackId` (either kind); none when the run has no such rating. */
export const without = (record: RunRecord, feedbackId: string): Metadata | undefined => {
  const { [RATING]: one, [MORE]: _more, ...rest } = record.metadata ?? {}
  const list = more(record)
  const kept = list.filter((f) => f.feedback_id !== feedbackId)
  const ratingGoes = isFeedback(one) && one.feedback_id === feedbackId
  if (!ratingGoes && kept.length === list.length) return undefined
  return {
    ...rest,
    ...(one !== undefined && !ratingGoes ? { [RATING]: one } : {}),
    ...(kept.length > 0 ? { [MORE]: kept } : {})
  }
}
