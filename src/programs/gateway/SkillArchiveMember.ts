/**
 * A file inside a `.skill` archive of a thread, as the artifacts endpoint serves `.../x.skill/SKILL.md` (DeerFlow's
 * app previews a `.skill` artifact by its `SKILL.md`). The archive is untrusted (a model wrote it): it is read only
 * when at most `SkillArchive.MAX_ARCHIVE_BYTES` of at most `SkillArchive.MAX_ENTRIES` entries, and a member is
 * unpacked no further than `MAX_MEMBER_BYTES` whatever its header declares (DeerFlow's cap on a previewed member).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as ZipDirectory from "../../state/ZipDirectory.js"
import * as SkillArchive from "../SkillArchive.js"
import * as ThreadFile from "../ThreadFile.js"

/** The most of one member that is unpacked to be served (DeerFlow's `MAX_SKILL_ARCHIVE_MEMBER_BYTES`). */
export const MAX_MEMBER_BYTES = 16 * 1024 * 1024

/** Why a member is not served: the archive or the member is not there, not a file, or too large. */
export class MemberError extends Data.TaggedError("MemberError")<{
  readonly reason: "not_found" | "not_a_file" | "too_large"
  readonly message: string
}> {}

/** Where `.skill/` splits a virtual path into the archive and the member it names (undefined: no archive named). */
export const splitPath = (virtual: string): { readonly archive: string; readonly member: string } | undefined => {
  const at = virtual.indexOf(".skill/")
  return at < 0 ? undefined : { archive: virtual.slice(0, at + ".skill".length), member: virtual.slice(at + 7) }
}

/**
 * The bytes of `member` in the archive at `host` (its virtual path `archive`, for messages): the entry of that
 * name, else the first whose name ends in `/member` (an archive holding the skill's folder), as DeerFlow looks.
 */
export const read = (host: string, archive: string, member: string): Effect.Effect<Uint8Array, MemberError> =>
  Effect.gen(function*() {
    // (opened at the path resolved: a link swapped in since is not followed, see `ThreadFile`)
    const bytes = yield* ThreadFile.readBounded(host, SkillArchive.MAX_ARCHIVE_BYTES).pipe(
      Effect.mapError((error) =>
        error.reason === "not_a_file"
          ? new MemberError({ reason: "not_a_file", message: `Path is not a file: ${archive}` })
          : new MemberError({ reason: "not_found", message: `Skill file not found: ${archive}` })
      )
    )
    if (bytes === "too_large") {
      return yield* new MemberError({ reason: "too_large", message: "Skill archive is too large to preview" })
    }
    const missing = new MemberError({ reason: "not_found", message: `File '${member}' not found in skill archive` })
    // (an archive of more entries than a skill may hold is not opened: each is an object jszip builds first)
    const directory = ZipDirectory.read(bytes, SkillArchive.MAX_ENTRIES)
    if (directory !== undefined && directory.entries > SkillArchive.MAX_ENTRIES) {
      return yield* new MemberError({ reason: "too_large", message: "Skill archive is too large to preview" })
    }
    const entries = yield* Effect.orElseFail(SkillArchive.entriesOf(bytes), () => missing)
    const files = entries.filter((entry) => !entry.dir)
    const entry = files.find((e) => e.name === member) ?? files.find((e) => e.name.endsWith(`/${member}`))
    if (entry === undefined || member === "") return yield* missing
    const tooLarge = new MemberError({ reason: "too_large", message: "Skill archive member is too large to preview" })
    if (entry.declared > MAX_MEMBER_BYTES) return yield* tooLarge
    const bounded = yield* Effect.tryPromise({ try: () => entry.readBounded(MAX_MEMBER_BYTES), catch: () => missing })
    return bounded.exceeded ? yield* tooLarge : bounded.data
  })
