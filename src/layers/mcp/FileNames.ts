/**
 * The file names a stdio MCP server's results name, as DeerFlow gives them to the model (`deerflow/mcp/tools.py`,
 * pure parts): a path relative to the server's working directory (`temp/page.yml`, `./shot.png`) found in free
 * text (`pathTokens`, `replacePaths`), and a bare file name (`Saved as page.yml`) taken for the one file of that
 * name the call created or changed (`changed`, between two snapshots of the thread's workspace, then
 * `replaceBareNames`). Which file a token names is for the caller to find (it reads the disk); nothing here does.
 */

/**
 * The regular files under a folder, as one bounded walk saw them: each file's path relative to the folder
 * (`/`-separated) and its signature (modification time and size), in walk order (`walkOrder`).
 */
export interface Snapshot {
  readonly files: ReadonlyMap<string, string>
  /**
   * Set when the walk stopped at its bound: the last entry it saw. Every entry before it in walk order was seen;
   * none after it was.
   */
  readonly cut?: string | undefined
}

/**
 * The order a walk sees a folder's entries in: breadth first (fewer segments first), then segment by segment by
 * code unit (a folder's entries sorted, folders taken in the order they were seen).
 */
export const walkOrder = (a: string, b: string): number => {
  const as = a.split("/")
  const bs = b.split("/")
  if (as.length !== bs.length) return as.length - bs.length
  for (let i = 0; i < as.length; i++) {
    if (as[i] !== bs[i]) return as[i]! < bs[i]! ? -1 : 1
  }
  return 0
}

/**
 * The files created or changed between two snapshots (DeerFlow's `_changed_workspace_files`: a new path, or a
 * new signature), in the later one's order. A file missing from a cut `before` counts only if the walk would have
 * seen it there (it comes before the cut): past the cut, a file may have been there unseen.
 */
export const changed = (before: Snapshot, after: Snapshot): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const [path, signature] of after.files) {
    const was = before.files.get(path)
    if (was === signature) continue
    if (was === undefined && before.cut !== undefined && walkOrder(path, before.cut) > 0) continue
    out.push(path)
  }
  return out
}

// Python's `\w` (DeerFlow's patterns): letters, digits (of any script) and `_`
const WORD = "\\p{L}\\p{N}_"

/**
 * DeerFlow's `_LOCAL_PATH_IN_TEXT_RE`: an absolute path or `file://` URI, or a path with a `/` in it relative to
 * the server's cwd (`./a`, `../a`, `dir/a`). Made per use: a `g` regex keeps state.
 */
const pathPattern = () =>
  new RegExp(`(?:file://)?/[^\\s'"<>|*?]+|(?:\\.{0,2}/|[${WORD}.-]+/)[^\\s'"<>|*?]+`, "gu")

/** What ends a sentence or markup rather than a path (`saved as temp/a.png.`, `(temp/a.png)`). */
const TRAILING = ".,;:!?)]}>\"'`"

const stripTrailing = (token: string): string => {
  let end = token.length
  while (end > 0 && TRAILING.includes(token[end - 1]!)) end--
  return token.slice(0, end)
}

const isRelative = (path: string) => path !== "" && !path.startsWith("/") && !path.startsWith("file:")

/**
 * The relative paths a text names (DeerFlow's free-text candidates, trailing punctuation left off), each once, in
 * order. Absolute paths and `file://` URIs are not among them (the caller rewrites the thread's host paths).
 */
export const pathTokens = (text: string): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const match of text.matchAll(pathPattern())) {
    const token = stripTrailing(match[0])
    if (isRelative(token)) out.add(token)
  }
  return [...out]
}

/** The text with each relative path of `found` (a `pathTokens` token) replaced by what it maps to. */
export const replacePaths = (text: string, found: ReadonlyMap<string, string>): string =>
  found.size === 0 ? text : text.replace(pathPattern(), (token) => {
    const path = stripTrailing(token)
    const to = isRelative(path) ? found.get(path) : undefined
    return to === undefined ? token : to + token.slice(path.length)
  })

// (a `u` regex escapes syntax characters and `/` only)
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")

/**
 * The text with each bare file name that names exactly one of `files` (paths, here the ones the call created or
 * changed) replaced by that path (DeerFlow's `_rewrite_unique_bare_filenames`). A name is matched whole and by
 * case: not inside a longer name or path (`page.yml.bak`, `old-page.yml`, `page.yml/x`, `/page.yml`); a sentence's
 * final period may follow it. Two files of one name leave that name as it is. Longer names are matched first.
 */
export const replaceBareNames = (text: string, files: ReadonlyArray<string>): string => {
  const byName = new Map<string, string | null>()
  for (const file of files) {
    const name = file.slice(file.lastIndexOf("/") + 1)
    if (name === "") continue
    const seen = byName.get(name)
    byName.set(name, seen === undefined || seen === file ? file : null)
  }
  const names = [...byName].filter(([name, file]) => file !== null && text.includes(name)).map(([name]) => name)
  if (names.length === 0) return text
  names.sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0))
  const pattern = new RegExp(
    `(?<![${WORD}./-])(?:${names.map(escape).join("|")})(?![${WORD}/-]|\\.[${WORD}])`,
    "gu"
  )
  return text.replace(pattern, (name) => byName.get(name) ?? name)
}
