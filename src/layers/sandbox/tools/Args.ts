/**
 * The arguments of the sandbox tools as Schemas: every field described in DeerFlow's words (`Texts.ARGUMENTS`), so
 * the JSON Schema the model sees reads as DeerFlow's.
 */
import * as Schema from "effect/Schema"
import { withDefault } from "../../../services/AppConfig.js"
import { ARGUMENTS } from "./Texts.js"

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { nullable: true })

/** A string argument, described in DeerFlow's words. */
const text = (description: string) => Schema.String.annotations({ description })

// Argument schemas are built once: building them per run costs more than the rest of a run's setup.

/** The arguments of `bash`. */
export const BashArgs = Schema.Struct({
  description: text(ARGUMENTS.bash.description),
  command: text(ARGUMENTS.bash.command)
})

/** The arguments of `ls`. */
export const LsArgs = Schema.Struct({
  description: text(ARGUMENTS.ls.description),
  path: text(ARGUMENTS.ls.path)
})

/** The arguments of `read_file`. */
export const ReadFileArgs = Schema.Struct({
  description: text(ARGUMENTS.read_file.description),
  path: text(ARGUMENTS.read_file.path),
  start_line: optional(Schema.Int.annotations({ description: ARGUMENTS.read_file.start_line })),
  end_line: optional(Schema.Int.annotations({ description: ARGUMENTS.read_file.end_line }))
})

/** The arguments of `write_file`. */
export const WriteFileArgs = Schema.Struct({
  description: text(ARGUMENTS.write_file.description),
  path: text(ARGUMENTS.write_file.path),
  content: text(ARGUMENTS.write_file.content),
  append: withDefault(Schema.Boolean.annotations({ description: ARGUMENTS.write_file.append }), () => false)
})

/** The arguments of `str_replace`. */
export const StrReplaceArgs = Schema.Struct({
  description: text(ARGUMENTS.str_replace.description),
  path: text(ARGUMENTS.str_replace.path),
  old_str: text(ARGUMENTS.str_replace.old_str),
  new_str: text(ARGUMENTS.str_replace.new_str),
  replace_all: withDefault(
    Schema.Boolean.annotations({ description: ARGUMENTS.str_replace.replace_all }),
    () => false
  )
})

/** The arguments of `glob`. */
export const GlobArgs = Schema.Struct({
  description: text(ARGUMENTS.glob.description),
  pattern: text(ARGUMENTS.glob.pattern),
  path: text(ARGUMENTS.glob.path),
  include_dirs: withDefault(Schema.Boolean.annotations({ description: ARGUMENTS.glob.include_dirs }), () => false),
  max_results: withDefault(Schema.Int.annotations({ description: ARGUMENTS.glob.max_results }), () => 200)
})

/** The arguments of `grep`. */
export const GrepArgs = Schema.Struct({
  description: text(ARGUMENTS.grep.description),
  pattern: text(ARGUMENTS.grep.pattern),
  path: text(ARGUMENTS.grep.path),
  glob: optional(text(ARGUMENTS.grep.glob)),
  literal: withDefault(Schema.Boolean.annotations({ description: ARGUMENTS.grep.literal }), () => false),
  case_sensitive: withDefault(
    Schema.Boolean.annotations({ description: ARGUMENTS.grep.case_sensitive }),
    () => false
  ),
  max_results: withDefault(Schema.Int.annotations({ description: ARGUMENTS.grep.max_results }), () => 100)
})

/** The arguments of `present_files`. */
export const PresentFilesArgs = Schema.Struct({
  filepaths: Schema.Array(Schema.String).annotations({ description: ARGUMENTS.present_files.filepaths })
})

/** The arguments of `view_image`. */
export const ViewImageArgs = Schema.Struct({
  image_path: text(ARGUMENTS.view_image.image_path)
})
