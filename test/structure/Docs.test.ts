/**
 * The docs stay readable in order: the README opens with the two commands (CI and the project run them), stays
 * short (details live in docs/), and every relative link of the README, docs/ and bench/README.md reaches a
 * file that exists and, with a `#fragment`, a heading of that file (as GitHub makes their anchors).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")

const PAGES = [
  "README.md",
  "bench/README.md",
  ...Fs.readdirSync(Path.join(ROOT, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)
]

/** The text without fenced code blocks (their `#` lines are not headings, their brackets not links). */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "")

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
export const anchor = (heading: string) =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, "").replace(/ /g, "-")

const anchors = (page: string): ReadonlySet<string> =>
  new Set([...prose(Fs.readFileSync(Path.join(ROOT, page), "utf8")).matchAll(/^#+ (.*)$/gm)].map((m) => anchor(m[1]!)))

/** The relative links of a page that lead nowhere, as `page: target (why)`. */
const brokenLinks = (page: string): Array<string> => {
  const out: Array<string> = []
  for (const match of prose(Fs.readFileSync(Path.join(ROOT, page), "utf8")).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1]!
    if (/^[a-z]+:/.test(target)) continue
    const [path, fragment] = target.split("#") as [string, string | undefined]
    const file = path === "" ? page : Path.posix.normalize(Path.posix.join(Path.posix.dirname(page), path))
    if (!Fs.existsSync(Path.join(ROOT, file))) out.push(`${page}: ${target} (no such file)`)
    else if (fragment !== undefined && file.endsWith(".md") && !anchors(file).has(fragment)) {
      out.push(`${page}: ${target} (no such heading in ${file})`)
    }
  }
  return out
}

describe("the docs", () => {
  it("GitHub's anchors", () => {
    assert.strictEqual(anchor("The sandbox's resource limits"), "the-sandboxs-resource-limits")
    assert.strictEqual(anchor("The gateway (`antler serve`)"), "the-gateway-antler-serve")
    assert.strictEqual(anchor("Tools: configured, web, MCP, deferred"), "tools-configured-web-mcp-deferred")
  })

  it("the README opens with the two commands and stays short", () => {
    const readme = Fs.readFileSync(Path.join(ROOT, "README.md"), "utf8")
    assert.isTrue(
      readme.startsWith(
        "# Antler\n\n```sh\n" +
          "npm ci && npx antler demo     # install, then a complete agent run, offline\n" +
          "npm ci && npm test            # install, then the test suite\n```\n"
      ),
      "the README's first lines are the two commands"
    )
    assert.isAtMost(readme.split("\n").length, 250, "the README stays a tour; details go to docs/")
  })

  it("every relative link reaches a file and a heading", () => {
    assert.deepStrictEqual(PAGES.flatMap(brokenLinks), [])
  })
})
