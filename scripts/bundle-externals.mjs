/**
 * The packages the bundles leave outside (loaded from node_modules at run time): native (better-sqlite3), or
 * loaded only at first use (the document converters' libraries, the MCP SDK, the tokenizer, the parsers of
 * src/internal/OnDemand.ts). Used by scripts/bundle-cli.mjs (the CLI) and bench/run.ts (the bundled bench worker).
 */
export const EXTERNAL = [
  "better-sqlite3",
  "@modelcontextprotocol/sdk",
  "exceljs",
  "mammoth",
  "jszip",
  "unpdf",
  "turndown",
  "@joplin/turndown-plugin-gfm",
  "gpt-tokenizer",
  "yaml",
  "re2js",
  "fast-xml-parser"
]

/** esbuild's `external` for them (each package and its subpaths). */
export const external = () => EXTERNAL.flatMap((name) => [name, `${name}/*`])
