/**
 * The arguments of the sandbox tools as Schemas: every field described, so the JSON Schema the model sees explains
 * itself.
 */
import * as Schema from "effect/Schema"
import { withDefault } from "../../../services/AppConfig.js"
import { OUTPUTS, UPLOADS, WORKSPACE } from "../../../services/Sandbox.js"

const Description = Schema.String.annotations({
  description: "One short sentence on why you are running this (shown to the user). Always give this argument first."
})

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { nullable: true })

const VirtualPath = (what: string) =>
  Schema.String.annotations({
    description: `${what} A path under ${WORKSPACE}, ${UPLOADS}, ${OUTPUTS}, the skills directory or another ` +
      `directory the system prompt lists as mounted (a relative path is taken from ${WORKSPACE}).`
  })

// Argument schemas are built once: building them per run costs more than the rest of a run's setup.

/** The arguments of `bash`. */
export const BashArgs = Schema.Struct({
  description: Description,
  command: Schema.String.annotations({
    description: "The bash command to run. Use absolute virtual paths (/mnt/user-data/...) for files."
  })
})

/** The arguments of `ls`. */
export const LsArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The directory to list.")
})

/** The arguments of `read_file`. */
export const ReadFileArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to read."),
  start_line: optional(Schema.Int.annotations({ description: "First line to read (1-based). Default: 1." })),
  end_line: optional(
    Schema.Int.annotations({
      description: "Last line to read (1-based, inclusive). Default: the end of the file."
    })
  )
})

/** The arguments of `write_file`. */
export const WriteFileArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to write (skills are read-only)."),
  content: Schema.String.annotations({ description: "The text to write." }),
  append: withDefault(
    Schema.Boolean.annotations({
      description: "Add to the end of the file instead of replacing it. Default: false."
    }),
    () => false
  )
})

/** The arguments of `str_replace`. */
export const StrReplaceArgs = Schema.Struct({
  description: Description,
  path: VirtualPath("The file to edit."),
  old_str: Schema.String.annotations({
    description: "The exact text to replace (whitespace and newlines included)."
  }),
  new_str: Schema.String.annotations({ description: "The text to put in its place." }),
  replace_all: withDefault(
    Schema.Boolean.annotations({
      description: "Replace every occurrence instead of exactly one. Default: false."
    }),
    () => false
  )
})

/** The arguments of `glob`. */
export const GlobArgs = Schema.Struct({
  description: Description,
  pattern: Schema.String.annotations({
    description: "The glob, relative to path (e.g. `**/*.ts`, `src/*.md`, `*.csv`)."
  }),
  path: VirtualPath("The directory to search."),
  include_dirs: withDefault(
    Schema.Boolean.annotations({ description: "Also list matching directories. Default: false." }),
    () => false
  ),
  max_results: withDefault(
    Schema.Int.annotations({ description: "At most this many paths (1-1000). Default: 200." }),
    () => 200
  )
})

/** The arguments of `grep`. */
export const GrepArgs = Schema.Struct({
  description: Description,
  pattern: Schema.String.annotations({
    description: "The regular expression (or plain text with literal=true)."
  }),
  path: VirtualPath("The directory (searched recursively) or file to search."),
  glob: optional(
    Schema.String.annotations({ description: "Only search files whose path matches this glob (e.g. `*.py`)." })
  ),
  literal: withDefault(
    Schema.Boolean.annotations({
      description: "Treat pattern as plain text, not a regular expression. Default: false."
    }),
    () => false
  ),
  case_sensitive: withDefault(
    Schema.Boolean.annotations({ description: "Match case exactly. Default: false." }),
    () => false
  ),
  max_results: withDefault(
    Schema.Int.annotations({ description: "At most this many matching lines (1-500). Default: 100." }),
    () => 100
  )
})

/** The arguments of `present_files`. */
export const PresentFilesArgs = Schema.Struct({
  filepaths: Schema.Array(Schema.String.annotations({ description: `A file under ${OUTPUTS}.` })).annotations({
    description: `The files to present, as absolute paths under ${OUTPUTS}.`
  })
})

/** The arguments of `view_image`. */
export const ViewImageArgs = Schema.Struct({
  image_path: Schema.String.annotations({
    description: `The image, as an absolute path under ${WORKSPACE}, ${UPLOADS} or ${OUTPUTS}.`
  })
})
