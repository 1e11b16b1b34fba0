/**
 * Read marks (SPEC §5.11): a successful `read_file` result carries `additional_kwargs.deerflow_read_mark =
 * { path, hash }`, the file's virtual path and the sha256 of its whole content as it was read. ReadBeforeWrite
 * lets a write change an existing file only when the thread's latest mark for it has the file's current hash.
 *
 * The tool that read the bytes stamps the mark (the sandbox's `read_file` does, from the content it read, so
 * the hash is of what the model saw and nothing is read twice); ReadBeforeWrite marks a read result that
 * came without one by reading the file through the run's sandbox.
 */
import { hash } from "node:crypto"
import type { Message, ToolMessage } from "./Message.js"
import { withKwargs } from "./Message.js"

/** The `additional_kwargs` key of a read mark. */
export const READ_MARK_KEY = "deerflow_read_mark"

/** A read mark: which file was read (its normalised absolute virtual path), and the hash of its whole content. */
export interface ReadMark {
  readonly path: string
  readonly hash: string
}

/**
 * The sha256 of a file's text (UTF-8), hex. (`crypto.hash`, one call: a `Hash` object per read is twice the
 * time, and its hidden class is dropped, with the code compiled against it, at a full garbage collection between
 * runs.)
 */
export const contentHash = (content: string): string => hash("sha256", content, "hex")

/** The message with a read mark. */
export const withMark = <A extends ToolMessage>(message: A, mark: ReadMark): A =>
  withKwargs(message, { [READ_MARK_KEY]: mark })

/** The read mark on a message, if it has a well-formed one. */
export const markOf = (message: Message): ReadMark | undefined => {
  const mark = message.additional_kwargs?.[READ_MARK_KEY]
  if (typeof mark !== "object" || mark === null) return undefined
  const { hash, path } = mark as { path?: unknown; hash?: unknown }
  return typeof path === "string" && typeof hash === "string" ? { path, hash } : undefined
}
