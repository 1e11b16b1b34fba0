/**
 * Reading a text file that Antler takes as configuration or state (`config.yaml`, `extensions_config.json`,
 * `SKILL.md`, an agent's `config.yaml` and `SOUL.md`, `memory.json`): it must be a regular file no larger than a
 * limit. A device (`/dev/zero`, `/dev/urandom`), a FIFO or a socket would never end or never answer, and a huge
 * file would be held in memory and sent on; each is refused with a `TextFileError` naming the file and the
 * limit. The check is made on the opened descriptor (`fstat`), so the file cannot be swapped between check and
 * read; it is opened without blocking (a FIFO without a writer does not hang the open), and at most `limit + 1`
 * bytes are read, so a file that grows meanwhile is refused too.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"

/** A file that cannot be read as a bounded text file. */
export class TextFileError extends Schema.TaggedError<TextFileError>()("TextFileError", {
  reason: Schema.Literal("missing", "not_a_file", "too_large", "unreadable"),
  file: Schema.String,
  /** The size limit in bytes. */
  limit: Schema.Number,
  /** What is wrong, without the file's name (`not a regular file (a FIFO)`). */
  problem: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message() {
    return `${this.file}: ${this.problem}`
  }
}

/** A size for people: `1 MiB`, `1.5 MiB`, `64 KiB`, `146.5 KiB`, `300 bytes`. */
export const formatBytes = (bytes: number): string => {
  const unit = (size: number, name: string) =>
    `${Number.isInteger(size) ? size : size.toFixed(1)} ${name}`
  return bytes >= 1024 * 1024
    ? unit(bytes / 1024 / 1024, "MiB")
    : bytes >= 1024
    ? unit(bytes / 1024, "KiB")
    : `${bytes} bytes`
}

const kindOf = (stat: Fs.Stats): string =>
  stat.isDirectory()
    ? "a directory"
    : stat.isCharacterDevice()
    ? "a character device"
    : stat.isBlockDevice()
    ? "a block device"
    : stat.isFIFO()
    ? "a FIFO"
    : stat.isSocket()
    ? "a socket"
    : "not a file"

const CHUNK = 64 * 1024

/**
 * The text (UTF-8) of `file`, a regular file of at most `limit` bytes; else why not. A missing file is reason
 * `missing` (callers decide whether that is fine).
 */
export const read = (file: string, limit: number): Either.Either<string, TextFileError> => {
  const error = (reason: TextFileError["reason"], problem: string, cause?: unknown) =>
    Either.left(new TextFileError({ reason, file, limit, problem, ...(cause !== undefined ? { cause } : {}) }))
  const tooLarge = (size: string) => error("too_large", `too large: ${size}, over the limit of ${formatBytes(limit)}`)
  let fd: number
  try {
    fd = Fs.openSync(file, Fs.constants.O_RDONLY | Fs.constants.O_NONBLOCK | Fs.constants.O_NOCTTY)
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code
    if (code === "ENOENT" || code === "ENOTDIR") return error("missing", "the file does not exist", cause)
    if (code === "ENXIO") return error("not_a_file", "not a regular file (a socket)", cause)
    return error("unreadable", `cannot be read (${(cause as Error).message ?? String(cause)})`, cause)
  }
  try {
    const stat = Fs.fstatSync(fd)
    if (!stat.isFile()) return error("not_a_file", `not a regular file (${kindOf(stat)})`)
    if (stat.size > limit) return tooLarge(formatBytes(stat.size))
    const chunks: Array<Buffer> = []
    let total = 0
    for (;;) {
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK, limit + 1 - total))
      const n = Fs.readSync(fd, buffer, 0, buffer.length, null)
      if (n === 0) break
      chunks.push(buffer.subarray(0, n))
      total += n
      if (total > limit) return tooLarge("it grew while it was read")
    }
    return Either.right(Buffer.concat(chunks, total).toString("utf8"))
  } catch (cause) {
    return error("unreadable", `cannot be read (${(cause as Error).message ?? String(cause)})`, cause)
  } finally {
    Fs.closeSync(fd)
  }
}
