/**
 * The sandbox tools as DeerFlow describes them to its model, word for word (bytedance/deer-flow, MIT licence,
 * backend/packages/harness/deerflow/sandbox/tools.py and tools/builtins/present_file_tool.py, view_image_tool.py):
 * each docstring through LangChain's `@tool(parse_docstring=True)`, the paragraphs before `Args:` joined by a space as
 * the description, each `Args:` entry as its argument's description. Generated from
 * test/fixtures/deerflow/prompts/tool_descriptions.json and tool_arguments.json; a line too long for this file goes
 * on with a backslash at its end (nothing of it is in the text).
 */

/** DeerFlow's description of `bash`. */
export const BASH_DESCRIPTION = `Execute a bash command in a Linux environment.\x20
- Use \`python\` to run Python code.
- Prefer a thread-local virtual environment in \`/mnt/user-data/workspace/.venv\`.
- Use \`python -m pip\` (inside the virtual environment) to install Python packages.
- To start a long-lived process such as a web server, ALWAYS run it in the background with its
  output redirected, e.g. \`your-command > /mnt/user-data/workspace/server.log 2>&1 &\`, then check
  the log file or poll the port. A long-lived process run in the foreground blocks the turn until
  it is killed at the command timeout.`

/** DeerFlow's description of `ls`. */
export const LS_DESCRIPTION = `List the contents of a directory up to 2 levels deep in tree format.`

/** DeerFlow's description of `read_file`. */
export const READ_FILE_DESCRIPTION = `Read the contents of a text file. Use this to examine source code, \
configuration files, logs, or any text-based file.`

/** DeerFlow's description of `write_file`. */
export const WRITE_FILE_DESCRIPTION = `Write text content to a file. By default this overwrites the target file; set \
append=True to add content to the end without replacing existing content. READ-BEFORE-WRITE (issue #3857): if the \
target file already exists (including
append=True), you must have read its CURRENT version with read_file first.
Any write invalidates earlier reads, so re-read between consecutive
modifications — a ranged read of the relevant section is enough. Writes
that fail this check are rejected with an error. SIZE POLICY (issue #3189):
A single non-append write_file call must not exceed 80 KB of UTF-8 content.
Oversized single-shot writes correlate with LLM streaming chunk-gap
timeouts because the tool-call JSON payload — which the model must emit as
one continuous stream — grows past the safe window. For larger documents,
use ONE of these strategies (write_file rejects oversized payloads with an
actionable error):   1. INCREMENTAL EDIT (preferred for revisions): after the initial write,
     use \`str_replace\` to surgically update sections. This is the same
     pattern Claude Code's Write+Edit and OpenAI Codex's apply_patch use,
     and keeps each tool call's payload small.
  2. APPEND-IN-CHUNKS (for new long-form content): split the document into
     sections, each well under 80 KB. First call uses append=False to
     create the file; subsequent calls use append=True. The 80 KB cap does
     NOT apply to append=True calls. Operators can override the cap via env var \`DEERFLOW_WRITE_FILE_MAX_BYTES\`
(0 disables the guard entirely). Raising it risks streaming timeouts.`

/** DeerFlow's description of `str_replace`. */
export const STR_REPLACE_DESCRIPTION = `Replace a substring in a file with another substring.
If \`replace_all\` is False (default), the substring to replace must appear **exactly once** in the file. \
READ-BEFORE-WRITE (issue #3857): you must have read the file's CURRENT
version with read_file first; any write invalidates earlier reads.`

/** DeerFlow's description of `glob`. */
export const GLOB_DESCRIPTION = `Find files or directories that match a glob pattern under a root directory.`

/** DeerFlow's description of `grep`. */
export const GREP_DESCRIPTION = `Search for matching lines inside a text file or files under a root directory.`

/** DeerFlow's description of `present_files`. */
export const PRESENT_FILES_DESCRIPTION = `Make files visible to the user for viewing and rendering in the client \
interface. When to use the present_files tool: - Making any file available for the user to view, download, or \
interact with
- Presenting multiple related files at once
- After creating files that should be presented to the user When NOT to use the present_files tool:
- When you only need to read file contents for your own processing
- For temporary or intermediate files not meant for user viewing Notes:
- You should call this tool after creating files and moving them to the \`/mnt/user-data/outputs\` directory.
- This tool can be safely called in parallel with other tools. State updates are handled by a reducer to prevent \
conflicts.`

/** DeerFlow's description of `view_image`. */
export const VIEW_IMAGE_DESCRIPTION = `Read an image file. Use this tool to read an image file and make it available \
for display. When to use the view_image tool:
- When you need to view an image file. When NOT to use the view_image tool:
- For non-image files (use present_files instead)
- For multiple files at once (use present_files instead)`

/** DeerFlow's descriptions of the tools' arguments, by tool. */
export const ARGUMENTS = {
  bash: {
    description: `Explain why you are running this command in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    command: `The bash command to execute. Always use absolute paths for files and directories.`
  },
  ls: {
    description: `Explain why you are listing this directory in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    path: `The **absolute** path to the directory to list.`
  },
  read_file: {
    description: `Explain why you are reading this file in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    path: `The **absolute** path to the file to read.`,
    start_line: `Optional starting line number (1-indexed, inclusive). Omit to start at the first line.`,
    end_line: `Optional ending line number (1-indexed, inclusive). Omit to read through the last line.`
  },
  write_file: {
    description: `Explain why you are writing to this file in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    path: `The **absolute** path to the file to write to. ALWAYS PROVIDE THIS PARAMETER SECOND.`,
    content: `The content to write to the file. ALWAYS PROVIDE THIS PARAMETER THIRD.`,
    append: `Whether to append content to the end of the file instead of overwriting it. Defaults to False.`
  },
  str_replace: {
    description: `Explain why you are replacing the substring in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    path: `The **absolute** path to the file to replace the substring in. ALWAYS PROVIDE THIS PARAMETER SECOND.`,
    old_str: `The substring to replace. ALWAYS PROVIDE THIS PARAMETER THIRD.`,
    new_str: `The new substring. ALWAYS PROVIDE THIS PARAMETER FOURTH.`,
    replace_all: `Whether to replace all occurrences of the substring. If False, only the first occurrence will be \
replaced. Default is False.`
  },
  glob: {
    description: `Explain why you are searching for these paths in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    pattern: `The glob pattern to match relative to the root path, for example \`**/*.py\`.`,
    path: `The **absolute** root directory to search under.`,
    include_dirs: `Whether matching directories should also be returned. Default is False.`,
    max_results: `Maximum number of paths to return. Default is 200.`
  },
  grep: {
    description: `Explain why you are searching file contents in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
    pattern: `The string or regex pattern to search for.`,
    path: `The **absolute** file or root directory to search.`,
    glob: `Optional glob filter for candidate files, for example \`**/*.py\`.`,
    literal: `Whether to treat \`pattern\` as a plain string. Default is False.`,
    case_sensitive: `Whether matching is case-sensitive. Default is False.`,
    max_results: `Maximum number of matching lines to return. Default is 100.`
  },
  present_files: {
    filepaths: `List of absolute file paths to present to the user. **Only** files in \`/mnt/user-data/outputs\` can \
be presented.`
  },
  view_image: {
    image_path: `Absolute /mnt/user-data virtual path to the image file. Common formats supported: jpg, jpeg, png, \
webp, gif.`
  }
} as const
