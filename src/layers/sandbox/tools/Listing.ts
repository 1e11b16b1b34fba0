/** What listings and searches (`ls`, `glob`, `grep`) leave out, and how many entries they walk at most. */

/**
 * Names left out of listings and searches (version control, dependencies, virtual environments, caches, build
 * output, editor and OS files, logs): DeerFlow's `IGNORE_PATTERNS` (`sandbox/search.py`), and a few more caches.
 */
export const JUNK_NAMES: ReadonlySet<string> = new Set([
  ".git",
  ".svn",
  ".hg",
  ".bzr",
  "node_modules",
  "bower_components",
  "__pycache__",
  ".venv",
  "venv",
  ".env",
  "env",
  ".tox",
  ".nox",
  ".eggs",
  "site-packages",
  ".mypy_cache",
  ".pytest_cache",
  ".ruff_cache",
  ".ipynb_checkpoints",
  ".cache",
  ".next",
  ".nuxt",
  ".output",
  ".turbo",
  ".parcel-cache",
  "dist",
  "build",
  "target",
  "out",
  "logs",
  ".coverage",
  "coverage",
  ".nyc_output",
  "htmlcov",
  ".idea",
  ".vscode",
  ".project",
  ".classpath",
  ".settings",
  ".DS_Store",
  "Thumbs.db",
  "desktop.ini"
])

const JUNK_PATTERNS = [
  /\.log$/,
  /\.py[co]$/,
  /\.sw[po]$/,
  /~$/,
  /\.egg-info$/,
  /^\.upload-.*\.part$/,
  /\.tmp$/,
  /\.temp$/,
  /\.bak$/,
  /\.cache$/,
  /\.lnk$/
]

/** Whether a file or directory name is junk to leave out (`.git`, `node_modules`, `*.log`, ...). */
export const isJunk = (name: string): boolean => JUNK_NAMES.has(name) || JUNK_PATTERNS.some((re) => re.test(name))

/** The most entries one listing or search walks. */
export const WALK_MAX_ENTRIES = 50_000
