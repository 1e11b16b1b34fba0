/**
 * Where a secret was kept: every file under a directory (a gateway's or the CLI's home, its database included) whose
 * bytes hold one of the texts.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** Every file under `dir` whose bytes hold `texts` (one text, or any of several). */
export const filesHolding = (dir: string, texts: string | ReadonlyArray<string>): Array<string> => {
  const wanted = (typeof texts === "string" ? [texts] : texts).map((text) => Buffer.from(text))
  return Fs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => Path.join(entry.parentPath, entry.name))
    .filter((file) => {
      const bytes = Fs.readFileSync(file)
      return wanted.some((text) => bytes.includes(text))
    })
}
