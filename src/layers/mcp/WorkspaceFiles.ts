/**
 * The thread's files a stdio MCP server's result names, given to the model as `/mnt/user-data/...` (DeerFlow's
 * `deerflow/mcp/tools.py`): the host paths of the thread's files (`Workspace.rewrite`, in texts and links), paths
 * relative to the server's working directory that name a file of the thread (`temp/page.yml`), and bare file
 * names (`Saved as page.yml`) of the one file of that name the call created or changed, found by a snapshot of
 * the thread's workspace taken before the call and one after it (only for a result with text).
 *
 * Only files inside the thread's folder are ever named: a relative path must lead to a regular file there (its
 * real path, symlinks followed, checked), and a snapshot lists regular files only, following no symlink. A
 * snapshot is bounded (`LIMITS`: 10,000 entries, 12 levels deep, breadth first): a file past the bound is not
 * found by its bare name. The matching itself is `FileNames`'s (pure).
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { McpContent, McpResult } from "../../services/Mcp.js"
import * as FileNames from "./FileNames.js"

/** A thread's files, for a pinned session (`McpClient.Workspace.files`). */
export interface Place {
  /** The thread's files on the host (its `user-data` folder). */
  readonly root: string
  /** What the model calls `root`: `/mnt/user-data`. */
  readonly virtual: string
  /** The folder under `root` snapshotted around each call (the thread's workspace). */
  readonly workspace: string
}

/** How far a snapshot goes: the entries it looks at (files, folders and others) and how many levels deep. */
export interface Limits {
  readonly entries: number
  readonly depth: number
}

/** A snapshot's bounds: 10,000 entries, 12 levels deep. */
export const LIMITS: Limits = { entries: 10_000, depth: 12 }

/** A call that created or changed more files than this has its bare file names left as they are. */
export const MAX_CHANGED = 1_000

/** The relative paths of one result looked up, at most (the rest are left as they are). */
export const MAX_PATHS = 100

const byName = (a: Fs.Dirent, b: Fs.Dirent) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0

/** The files under `dir`, within `limits`, breadth first (`FileNames.walkOrder`). What cannot be read is skipped. */
const walk = async (dir: string, limits: Limits): Promise<FileNames.Snapshot> => {
  const files = new Map<string, string>()
  let seen = 0
  let last = ""
  let cut: string | undefined
  let level: Array<string> = [""]
  for (let depth = 1; depth <= limits.depth && level.length > 0 && cut === undefined; depth++) {
    const next: Array<string> = []
    for (const folder of level) {
      let entries: Array<Fs.Dirent>
      try {
        entries = await Fs.promises.readdir(folder === "" ? dir : Path.join(dir, folder), { withFileTypes: true })
      } catch {
        continue
      }
      const regular: Array<string> = []
      for (const entry of entries.sort(byName)) {
        if (seen >= limits.entries) {
          cut = last
          break
        }
        seen++
        last = folder === "" ? entry.name : `${folder}/${entry.name}`
        // (a symlink is neither: it is not followed, so nothing outside the folder is listed)
        if (entry.isDirectory()) next.push(last)
        else if (entry.isFile()) regular.push(last)
      }
      const signatures = await Promise.all(regular.map((file) =>
        Fs.promises.lstat(Path.join(dir, file), { bigint: true }).then(
          (stat) => stat.isFile() ? `${stat.mtimeNs}:${stat.size}` : undefined,
          () => undefined
        )
      ))
      regular.forEach((file, i) => {
        const signature = signatures[i]
        if (signature !== undefined) files.set(file, signature)
      })
      if (cut !== undefined) break
    }
    level = next
  }
  return cut === undefined ? { files } : { files, cut }
}

/** A snapshot of the regular files under `dir` (DeerFlow's `_snapshot_workspace_files`), within `limits`. */
export const snapshot = (dir: string, limits: Limits = LIMITS): Effect.Effect<FileNames.Snapshot> =>
  Effect.promise(() => walk(dir, limits))

/** The model's path of a relative `token` from `cwd`: a regular file inside `place.root`, else undefined. */
const lookUp = async (token: string, cwd: string, realRoot: string, place: Place) => {
  if (token.length > 4096) return undefined
  try {
    const real = await Fs.promises.realpath(Path.resolve(cwd, token))
    if (!(await Fs.promises.stat(real)).isFile()) return undefined
    const inside = Path.relative(realRoot, real)
    if (inside === "" || inside === ".." || inside.startsWith(`..${Path.sep}`) || Path.isAbsolute(inside)) {
      return undefined
    }
    return `${place.virtual}/${inside.split(Path.sep).join("/")}`
  } catch {
    return undefined
  }
}

/**
 * The local path a link's URI names (DeerFlow's `_local_path_from_uri`): a `file://` URI's path, percent-decoded,
 * or the URI itself when it has no scheme (possibly relative); none for a remote URI (`http:`, `data:`...).
 */
export const localPathOf = (uri: string): string | undefined => {
  if (uri === "" || uri.length > 4096) return undefined
  if (uri.startsWith("file://")) {
    const rest = uri.slice("file://".length)
    // (`file://host/path`: only the local host's)
    const path = rest.startsWith("/") ? rest : rest.startsWith("localhost/") ? rest.slice("localhost".length) : ""
    try {
      return path === "" ? undefined : decodeURIComponent(path.replace(/[?#].*$/s, ""))
    } catch {
      return undefined
    }
  }
  return /^[A-Za-z][A-Za-z0-9+.-]*:/.test(uri) ? undefined : uri
}

/** The result's texts (text blocks, embedded resources' texts), each through `f`. */
const mapTexts = (result: McpResult, f: (text: string) => string): McpResult => ({
  ...result,
  content: result.content.map((block): McpContent => {
    if (block.type === "text") return { ...block, text: f(block.text) }
    if (block.type === "resource" && block.resource.text !== undefined) {
      return { ...block, resource: { ...block.resource, text: f(block.resource.text) } }
    }
    return block
  })
})

/** The result's link URIs (resource links, embedded resources) through `f`. */
const mapLinks = (result: McpResult, f: (uri: string) => string): McpResult => ({
  ...result,
  content: result.content.map((block): McpContent =>
    block.type === "resource_link"
      ? { ...block, uri: f(block.uri) }
      : block.type === "resource"
      ? { ...block, resource: { ...block.resource, uri: f(block.resource.uri) } }
      : block
  )
})

const textsOf = (result: McpResult): ReadonlyArray<string> =>
  result.content.flatMap((block) =>
    block.type === "text" ? [block.text] : block.type === "resource" && block.resource.text !== undefined
      ? [block.resource.text]
      : []
  )

/** What `rewrite` is given about the call. */
export interface Call {
  /** The host paths of the thread's files as the model's (`Workspace.rewrite`). */
  readonly hostPaths: (text: string) => string
  /** The thread's files; without it, only `hostPaths` is applied. */
  readonly place?: Place | undefined
  /** The server process's working directory, that relative paths are from. */
  readonly cwd?: string | undefined
  /** The snapshot of `place.workspace` taken before the call (for bare file names). */
  readonly before?: FileNames.Snapshot | undefined
  readonly limits?: Limits | undefined
}

/**
 * The result with the thread's files it names given as the model's paths: host paths (in texts and in links),
 * then relative paths, then bare file names (DeerFlow's `_convert_call_tool_result` over `_rewrite_local_paths_in_
 * text`). The after-call snapshot is taken only when the result has text.
 */
export const rewrite = (result: McpResult, call: Call): Effect.Effect<McpResult> =>
  Effect.gen(function*() {
    const place = call.place
    const realRoot = place === undefined
      ? undefined
      : yield* Effect.promise(() => Fs.promises.realpath(place.root).catch(() => undefined))
    const cwd = call.cwd
    // a resource link naming a file of the thread (a `file://` URI, a path, one relative to the server's cwd) is
    // its path as the model knows it, as DeerFlow gives it; any other keeps its URI, host paths hidden
    const links = new Map<string, string>()
    if (place !== undefined && realRoot !== undefined) {
      const uris = [...new Set(result.content.flatMap((b) => (b.type === "resource_link" ? [b.uri] : [])))]
      yield* Effect.promise(() =>
        Promise.all(uris.slice(0, MAX_PATHS).map(async (uri) => {
          const local = localPathOf(uri)
          const to = local === undefined ? undefined : await lookUp(local, cwd ?? place.workspace, realRoot, place)
          if (to !== undefined) links.set(uri, to)
        }))
      )
    }
    const shown = mapLinks(mapTexts(result, call.hostPaths), (uri) => links.get(uri) ?? call.hostPaths(uri))
    const texts = textsOf(shown)
    if (place === undefined || realRoot === undefined || texts.length === 0) return shown
    let out = shown
    if (cwd !== undefined) {
      const tokens = [...new Set(texts.flatMap(FileNames.pathTokens))].slice(0, MAX_PATHS)
      const found = new Map<string, string>()
      yield* Effect.promise(() =>
        Promise.all(tokens.map(async (token) => {
          const to = await lookUp(token, cwd, realRoot, place)
          if (to !== undefined) found.set(token, to)
        }))
      )
      out = mapTexts(out, (text) => FileNames.replacePaths(text, found))
    }
    const before = call.before
    const under = Path.relative(place.root, place.workspace)
    if (before === undefined || under.startsWith("..") || Path.isAbsolute(under)) return out
    const after = yield* snapshot(place.workspace, call.limits ?? LIMITS)
    const changed = FileNames.changed(before, after)
    if (changed.length === 0 || changed.length > MAX_CHANGED) return out
    const prefix = under === "" ? place.virtual : `${place.virtual}/${under.split(Path.sep).join("/")}`
    const files = changed.map((file) => `${prefix}/${file}`)
    return mapTexts(out, (text) => FileNames.replaceBareNames(text, files))
  })
