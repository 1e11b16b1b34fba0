/**
 * @effect/vitest's `it` is vitest's own `it` object with `effect`, `scoped`, `layer` and the rest assigned onto
 * it, and `layer(...)` assigns its own `effect` and `scoped` (bound to that layer's runtime) onto the same object.
 * Test files share one module cache per worker (vitest.config.ts: `isolate: false`), so after a file that calls
 * `layer(...)`, the next file's `it.effect` would run in the previous file's runtime, its TestClock included.
 * Imported once per worker, before any test file: the methods as @effect/vitest first made them.
 */
import { it } from "@effect/vitest"

export const methods = {
  effect: it.effect,
  scoped: it.scoped,
  live: it.live,
  scopedLive: it.scopedLive,
  flakyTest: it.flakyTest,
  layer: it.layer,
  prop: it.prop
}
