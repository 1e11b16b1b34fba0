/**
 * Uploads in tests: a form of one file of a given size, a form of text files, and the bytes the files under a
 * folder hold.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** A form of one file `name` holding `size` bytes. */
export const formOf = (name: string, size: number): FormData => {
  const form = new FormData()
  form.append("files", new Blob(["x".repeat(size)]), name)
  return form
}

/** A form of text files (`text/plain`), each `[name, text]` in order (a name may come twice). */
export const textForm = (files: ReadonlyArray<readonly [string, string]>): FormData => {
  const form = new FormData()
  for (const [name, text] of files) form.append("files", new Blob([text], { type: "text/plain" }), name)
  return form
}

/** The bytes of the regular files under `dir` (0 when it does not exist). */
export const bytesUnder = (dir: string): number =>
  Fs.existsSync(dir)
    ? (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
      .filter((entry) => entry.isFile())
      .reduce((sum, entry) => sum + Fs.statSync(Path.join(entry.parentPath, entry.name)).size, 0)
    : 0
