/** The scheduled task store in the thread store's SQLite file, on a connection of its own (`sqlite/SideStore`). */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SideStore from "../../../layers/sqlite/SideStore.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as TaskStore from "./TaskStore.js"

/** The store in the SQLite file `filename` (created when missing); closed with the scope. */
export const make = (filename: string) =>
  Effect.flatMap(
    SideStore.open(filename, "the scheduled tasks", "scheduled_tasks"),
    (query) => TaskStore.make({ query })
  )

/** The store layer over a SQLite file. */
export const layer = (filename: string): Layer.Layer<TaskStore.TaskStore, StoreError> =>
  Layer.scoped(TaskStore.TaskStore, make(filename))
