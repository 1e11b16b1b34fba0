/**
 * No process-global mutable state in src/: what several runs share (limiters, caches, locks) is a service or
 * lives in a layer built once per app or agent, never in a module. Checked on the syntax of every source file:
 * no module-level `let`/`var`, no module-level `WeakMap`/`WeakSet`, no `Map`/`Set` that is not typed read-only
 * (constant lookup tables are fine), and no `unsafeMake*` (FiberRef, Ref, semaphore...) evaluated when a
 * module loads.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const SRC = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../src")

const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(Path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [Path.join(dir, entry.name)]
      : []
  )

/** Expressions evaluated when the module loads (not inside a function body). */
const eagerCalls = (node: ts.Node, found: Array<ts.Node>) => {
  if (ts.isFunctionLike(node) || ts.isClassDeclaration(node)) return
  if (ts.isCallExpression(node) || ts.isNewExpression(node)) found.push(node)
  ts.forEachChild(node, (child) => eagerCalls(child, found))
}

/** Problems with the module-level statements of one file. */
export const problems = (file: string, text: string): Array<string> => {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
  const out: Array<string> = []
  const where = (node: ts.Node) => `${Path.relative(SRC, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue
    const flags = statement.declarationList.flags
    if ((flags & ts.NodeFlags.Let) !== 0 || (flags & (ts.NodeFlags.Const | ts.NodeFlags.Using)) === 0) {
      out.push(`${where(statement)}: a module-level ${flags & ts.NodeFlags.Let ? "let" : "var"}`)
      continue
    }
    for (const declaration of statement.declarationList.declarations) {
      const calls: Array<ts.Node> = []
      if (declaration.initializer !== undefined) eagerCalls(declaration.initializer, calls)
      const typed = declaration.type?.getText(source) ?? ""
      for (const call of calls) {
        const callee = (ts.isNewExpression(call) || ts.isCallExpression(call) ? call.expression : call).getText(source)
        if (ts.isNewExpression(call) && /^Weak(Map|Set)$/.test(callee)) {
          out.push(`${where(call)}: a module-level ${callee} (a cache shared by every run of the process)`)
        } else if (ts.isNewExpression(call) && /^(Map|Set)$/.test(callee) && !/Readonly(Set|Map)</.test(typed)) {
          out.push(`${where(call)}: a module-level ${callee} not typed Readonly${callee} (shared by every run)`)
        } else if (/\bunsafeMake/.test(callee)) {
          out.push(`${where(call)}: ${callee} evaluated when the module loads`)
        }
      }
    }
  }
  return out
}

describe("no process-global mutable state in src/", () => {
  it("the checker sees each kind of global it forbids", () => {
    const bad = [
      "let counter = 0",
      "var legacy = 1",
      "const cache = new WeakMap<object, number>()",
      "const registry = new Map()",
      "const names = new Set([\"a\"])",
      "export const sink = FiberRef.unsafeMake(undefined)",
      "const lock = Effect.unsafeMakeSemaphore(1)"
    ]
    for (const line of bad) assert.lengthOf(problems(Path.join(SRC, "x.ts"), line), 1, line)
    const fine = [
      "const NAMES: ReadonlySet<string> = new Set([\"a\"])",
      "const CODES: ReadonlyMap<string, number> = new Map([[\"a\", 1]])",
      "export const make = () => { let n = 0; const cache = new Map(); return () => cache.get(n++) }",
      "const limit = 5",
      "export class Tag extends Context.Tag(\"x\")<Tag, number>() { static readonly make = () => new Map() }"
    ]
    for (const line of fine) assert.deepStrictEqual(problems(Path.join(SRC, "x.ts"), line), [], line)
  })

  it("src/ has none", () => {
    const found = sources(SRC).flatMap((file) => problems(file, Fs.readFileSync(file, "utf8")))
    assert.deepStrictEqual(found, [])
  })
})
