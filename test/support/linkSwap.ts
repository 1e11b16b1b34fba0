/**
 * The attacks that swap a thread's file for a link while the gateway reads it (Attack28ArtifactSwap,
 * Attack28CopySwap): a user's thread with an outputs folder on the host, and the swap of one of its files for a
 * relative link to another user's file.
 */
import { assert } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Answer } from "./requests.js"

/** Requests as one user (`Requests.as`). */
type User = (method: string, path: string, body?: unknown) => Promise<Answer>

/**
 * The outputs folder on the host of `thread`, made by `user` (named `name`, on a gateway at `home`) uploading a
 * `notes.txt` to it: the user's only thread.
 */
export const uploadedOutputs = async (user: User, home: string, name: string, thread: string): Promise<string> => {
  const form = new FormData()
  form.append("files", new Blob(["notes"]), "notes.txt")
  const uploaded = await user("POST", `/api/threads/${thread}/uploads`, form)
  assert.strictEqual(uploaded.status, 200, uploaded.text)
  const threads = Path.join(home, "users", name, "threads")
  const outputs = Path.join(threads, Fs.readdirSync(threads)[0]!, "user-data", "outputs")
  Fs.mkdirSync(outputs, { recursive: true })
  return outputs
}

/** The swap of the file at `path` for a relative link to `target`, made when `swap` is called. */
export interface LinkSwap {
  readonly path: string
  readonly swap: () => void
  /** Whether the swap was made. */
  readonly swapped: () => boolean
}

/** A swap of the file at `path` for a relative link to `target`. */
export const swapForLink = (path: string, target: string): LinkSwap => {
  let swapped = false
  return {
    path,
    swap: () => {
      Fs.rmSync(path)
      Fs.symlinkSync(Path.relative(Path.dirname(path), target), path)
      swapped = true
    },
    swapped: () => swapped
  }
}
