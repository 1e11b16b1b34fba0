// Which program bin/antler.js runs, decided by the build's stamp, never by file times (npm's unpacking leaves
// them in any order): the bundle (dist/cli/main.cjs) when its build finished, which scripts/bundle-cli.mjs
// records last, in dist/cli/build.json, with the id it wrote into the bundle's first line; else the compiled
// program (dist/programs/main.js); else nothing. `ANTLER_CLI=compiled` asks for the compiled program (after
// rebuilding dist/programs/ with tsc alone: `npm run build` rebuilds both).
import { existsSync, readFileSync } from "node:fs"

/** The stamp of the bundle in `cliDir` (a URL), or undefined when its build did not finish. */
export const buildStamp = (cliDir) => {
  try {
    const stamp = JSON.parse(readFileSync(new URL("build.json", cliDir), "utf8"))
    return typeof stamp?.id === "string" && stamp.id !== "" ? stamp : undefined
  } catch {
    return undefined
  }
}

/** `{ kind: "bundle" | "compiled", url }`, or undefined when neither is built. `root`: the package's URL. */
export const choose = (root, env = process.env) => {
  const cliDir = new URL("dist/cli/", root)
  const bundled = new URL("main.cjs", cliDir)
  const compiled = new URL("dist/programs/main.js", root)
  const hasCompiled = existsSync(compiled)
  if (env.ANTLER_CLI !== "compiled" || !hasCompiled) {
    if (existsSync(bundled) && buildStamp(cliDir) !== undefined) return { kind: "bundle", url: bundled }
  }
  return hasCompiled ? { kind: "compiled", url: compiled } : undefined
}
