/**
 * The thread's `background_tasks` (DeerFlow's worker's `_project_background_tasks`): at a run's start, the
 * thread's MCP tasks of the run's user, newest first, at most `MAX_BACKGROUND_TASKS`, each as the model's state
 * shows one. A task's name comes from a server's configuration, so the prompt's tags in it are neutralised.
 */
import * as Effect from "effect/Effect"
import { neutralizeUntrustedTags } from "../middleware/InputSanitization.js"
import type { Service as McpTasksService, TaskRecord } from "../services/McpTasks.js"
import type { BackgroundTask } from "../state/ThreadState.js"
import { MAX_BACKGROUND_TASKS } from "../state/ThreadState.js"

/** A task record as a background task of the state. */
export const of = (record: TaskRecord): BackgroundTask => ({
  task_id: record.id,
  task_name: neutralizeUntrustedTags(record.task_name),
  status: record.status,
  updated_at: new Date(record.updated_at).toISOString()
})

/**
 * The thread's background tasks for a run of `userId`; none (the state keeps what it had) when the records cannot
 * be read, which is logged: a run does not fail for them (as DeerFlow's worker).
 */
export const project = (
  tasks: McpTasksService,
  threadId: string,
  userId: string
): Effect.Effect<ReadonlyArray<BackgroundTask> | undefined> =>
  tasks.list(threadId, userId, { limit: MAX_BACKGROUND_TASKS, activeOnly: false }).pipe(
    Effect.map((records) => records.map(of)),
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning(`the background tasks of thread ${threadId} were not read: ${error.message}`),
        undefined
      )
    )
  )
