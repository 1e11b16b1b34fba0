/**
 * Run before each test file, in the worker that runs it: puts back @effect/vitest's own `it.effect`, `it.scoped`
 * and the rest, which a previous file's `layer(...)` replaced on the shared `it` (see effectVitestMethods.ts).
 */
import { it } from "@effect/vitest"
import { methods } from "./effectVitestMethods.js"

Object.assign(it, methods)
