/**
 * Skills on disk in DeerFlow's layout: found next to the config file (all 23 of DeerFlow's public skills),
 * categories, nested packages, hidden folders, front-matter checks with a reason per rejected file, enabled
 * state from extensions_config.json, shadowing, and where the directory comes from.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"
import { defaults } from "../../src/services/AppConfig.js"
import type { AppConfigService } from "../../src/services/AppConfig.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const FIXTURE = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/config.example.yaml")

const write = (root: string, relative: string, content: string) => {
  const file = Path.join(root, relative)
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, content)
}

const skill = (name: string, extra = "") =>
  `---\nname: ${name}\ndescription: Does ${name} things.\n${extra}---\n\n# ${name}\n`

const appAt = (dir: string, config: Record<string, unknown> = {}): AppConfigService["Type"] => ({
  config: { ...defaults(), ...config } as AppConfigService["Type"]["config"],
  source: Path.join(dir, "config.yaml"),
  home: Path.join(dir, "home"),
  ignored: []
})

describe("SkillsDirectory", () => {
  it.effect("all 23 public DeerFlow skills are found from DeerFlow's layout: skills/ next to config.yaml", () =>
    Effect.gen(function*() {
      const app = yield* ConfigFile.load(FIXTURE).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      const where = SkillsDirectory.location(app, {})
      assert.strictEqual(where.path, Path.join(Path.dirname(FIXTURE), "skills"))
      assert.strictEqual(where.from, "skills/ next to the config file")
      const catalog = SkillsDirectory.catalogOf(app)
      assert.lengthOf(catalog.skills, 23)
      assert.deepStrictEqual(catalog.rejected, [])
      for (const s of catalog.skills) {
        assert.strictEqual(s.category, "public")
        assert.isTrue(s.enabled)
        assert.strictEqual(s.location, `/mnt/skills/public/${s.relativePath}/SKILL.md`)
        assert.isTrue(Fs.existsSync(s.file))
        // DeerFlow test_skills_bundled.py: each passes the check a skill installed or written must pass too
        assert.isUndefined(SkillsDirectory.installProblem(Fs.readFileSync(s.file, "utf8")), s.name)
      }
      // the name comes from the front matter, not the folder
      const find = (name: string) => catalog.skills.find((s) => s.name === name)
      assert.strictEqual(find("vercel-deploy")?.relativePath, "vercel-deploy-claimable")
      assert.deepStrictEqual(find("skill-reviewer")?.allowedTools, ["review_skill_package"])
      // DeerFlow test_skills_parser.py::test_parse_license_field
      assert.strictEqual(find("frontend-design")?.license, "Complete terms in LICENSE.txt")
      assert.isUndefined(find("deep-research")?.license)
      const deep = catalog.skills.find((s) => s.name === "deep-research")!
      const text = yield* SkillsDirectory.make(app).read(deep)
      assert.strictEqual(text, Fs.readFileSync(deep.file, "utf8"))
    }))

  it("rejects what is not a skill, each with its file and the problem; skips hidden folders; finds nested ones", () => {
    const root = tempDir("antler-skills-")
    write(root, "public/good/SKILL.md", skill("good"))
    write(root, "public/good/nested/SKILL.md", skill("inner-data"))
    write(root, "public/team/review/SKILL.md", skill("team-review", "allowed-tools:\n  - read_file\n  - bash\n"))
    write(root, "public/.hidden/SKILL.md", skill("hidden"))
    write(root, "public/plain/SKILL.md", "# no front matter\n")
    write(root, "public/noname/SKILL.md", "---\ndescription: x\n---\n")
    write(root, "public/nodesc/SKILL.md", "---\nname: nodesc\n---\n")
    write(root, "public/badtools/SKILL.md", skill("badtools", "allowed-tools: bash\n"))
    write(root, "public/badyaml/SKILL.md", "---\nname: [unclosed\n---\n")
    write(root, "custom/good/SKILL.md", skill("good").replace("things", "my own things"))
    const states = new Map([["team-review", false]])
    const catalog = SkillsDirectory.discover(root, { container: "/mnt/skills/", states })
    assert.deepStrictEqual(catalog.skills.map((s) => [s.name, s.category, s.relativePath, s.enabled]), [
      ["good", "custom", "good", true],
      ["team-review", "public", "team/review", false]
    ])
    assert.deepStrictEqual(catalog.skills[1]!.allowedTools, ["read_file", "bash"])
    assert.strictEqual(catalog.skills[0]!.location, "/mnt/skills/custom/good/SKILL.md")
    assert.strictEqual(catalog.skills[0]!.description, "Does good my own things.")
    assert.deepStrictEqual(catalog.shadowed.map((s) => s.location), ["/mnt/skills/public/good/SKILL.md"])
    const problems = Object.fromEntries(catalog.rejected.map((r) => [Path.relative(root, r.file), r.problem]))
    assert.deepStrictEqual(Object.keys(problems).sort(), [
      "public/badtools/SKILL.md",
      "public/badyaml/SKILL.md",
      "public/nodesc/SKILL.md",
      "public/noname/SKILL.md",
      "public/plain/SKILL.md"
    ])
    assert.strictEqual(problems["public/plain/SKILL.md"], "no YAML front matter (the file must start with a --- block)")
    assert.strictEqual(problems["public/noname/SKILL.md"], "the front matter has no `name`")
    assert.strictEqual(problems["public/nodesc/SKILL.md"], "the front matter has no `description`")
    assert.strictEqual(problems["public/badtools/SKILL.md"], "`allowed-tools` must be a list of tool names")
    assert.match(problems["public/badyaml/SKILL.md"]!, /^the front matter is not valid YAML/)
  })

  // DeerFlow test_skills_loader.py (load_skills sorts by name): the skills are listed by name, whatever their
  // category or folder, so the prompt and GET /api/skills list a custom skill among the public ones
  it("lists the skills by name, not by category or folder", () => {
    const root = tempDir("antler-skills-")
    write(root, "public/a-folder/SKILL.md", skill("zeta-report"))
    write(root, "public/team/helper/SKILL.md", skill("Mid-tool"))
    write(root, "public/beta/SKILL.md", skill("beta"))
    write(root, "custom/alpha/SKILL.md", skill("alpha"))
    write(root, "custom/omega/SKILL.md", skill("omega"))
    const catalog = SkillsDirectory.discover(root, { container: "/mnt/skills" })
    assert.deepStrictEqual(catalog.skills.map((s) => s.name), ["Mid-tool", "alpha", "beta", "omega", "zeta-report"])
  })

  // DeerFlow's loader follows every link (os.walk followlinks=True); a folder linked from outside the category is
  // skipped here, named among the rejected, while a link that stays inside it is followed
  it("follows a linked folder inside the category, skips one linked from outside", () => {
    const root = tempDir("antler-skills-")
    const outside = tempDir("antler-skills-outside-")
    write(outside, "stray/SKILL.md", skill("stray"))
    write(root, "public/real/inner/SKILL.md", skill("inner"))
    Fs.symlinkSync(Path.join(outside, "stray"), Path.join(root, "public", "stray"))
    Fs.symlinkSync(Path.join(root, "public", "real"), Path.join(root, "public", "alias"))
    const catalog = SkillsDirectory.discover(root, { container: "/mnt/skills" })
    assert.deepStrictEqual(catalog.skills.map((s) => [s.name, s.relativePath]), [["inner", "real/inner"]])
    assert.deepStrictEqual(catalog.shadowed.map((s) => s.relativePath), ["alias/inner"])
    assert.deepStrictEqual(catalog.rejected, [{
      file: Path.join(root, "public", "stray"),
      problem: "a link to a folder outside the skills directory (skipped)"
    }])
  })

  // DeerFlow test_skills_parser.py::test_parse_unquoted_colon_value_logs_line_and_hint, ..._nested_key_indent,
  // ..._escapes_backslashes_in_hint, ..._escapes_regex_in_hint, test_parse_unrelated_yaml_error_omits_quoting_hint:
  // an unquoted `: ` in a value (what a model writing a SKILL.md often does) is named by its line in the file, whole,
  // with the quoted line to write instead
  it("a YAML mistake is named by its line in the file, and an unquoted ': ' gets the quoted line to write", () => {
    const problem = (frontMatter: string) => {
      const parsed = SkillsDirectory.parseSkill(`---\n${frontMatter}\n---\n# Skill\n`)
      assert.isFalse(parsed.ok)
      return parsed.ok ? "" : parsed.problem
    }
    const long = "StarRun collector: progress, errors, tables out, plus assorted diagnostic notes"
    const colon = problem(`name: collect-startrun\ndescription: ${long}`)
    assert.match(colon, /^the front matter is not valid YAML \(/)
    assert.include(colon, `\n  line 3: description: ${long}\n`)
    assert.isTrue(colon.endsWith(`\n  hint: values containing ":" must be quoted, e.g. description: "${long}"`))
    assert.include(
      problem("name: nested-skill\nmetadata:\n  author: Jane: Doe"),
      'hint: values containing ":" must be quoted, e.g.   author: "Jane: Doe"'
    )
    const windows = problem("name: path-skill\ndescription: Windows path: C:\\Temp")
    assert.include(windows, String.raw`description: "Windows path: C:\\Temp"`)
    const regex = problem("name: regex-skill\ndescription: match: \\d+ digits")
    assert.include(regex, String.raw`description: "match: \\d+ digits"`)
    // what the hint suggests reads back as the value written
    const fixed = SkillsDirectory.parseSkill(`---\nname: path-skill\ndescription: "Windows path: C:\\\\Temp"\n---\n`)
    assert.deepInclude(fixed, { ok: true, description: "Windows path: C:\\Temp" })
    const unclosed = problem("name: [unclosed\ndescription: x")
    assert.match(unclosed, /^the front matter is not valid YAML/)
    assert.notInclude(unclosed, "hint:")
    assert.deepInclude(SkillsDirectory.parseSkill('---\nname: ok-skill\ndescription: "Foo: bar"\n---\n'), {
      ok: true,
      description: "Foo: bar"
    })
  })

  // DeerFlow test_skills_validation.py (TestValidateSkillFrontmatter): what may be installed or written as a skill
  it("installProblem: DeerFlow's check of an installed or written SKILL.md, with its messages", () => {
    const fm = (lines: string) => `---\n${lines}\n---\n\nBody\n`
    for (const valid of [
      "name: my-skill\ndescription: A valid skill",
      "name: my-skill\ndescription: A skill\nlicense: MIT\nversion: '1.0'\nauthor: test\n" +
      "allowed-tools: [bash, read_file]",
      "name: my-skill\ndescription: A skill\nallowed-tools: []",
      "name: my-skill\ndescription: A skill\nmetadata:\n  team: x\ncompatibility: any\nrequired-secrets: [API_KEY]",
      'name: demo-skill\ndescription: "Curly quotes: \u201cutf8\u201d"\nsecrets-autonomous: false'
    ]) {
      assert.isUndefined(SkillsDirectory.installProblem(fm(valid)), valid)
    }
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["# Just markdown\n\nNo front matter.\n", "No YAML frontmatter found"],
      [fm("[invalid yaml: {{"), "Invalid YAML in frontmatter: "],
      [fm("description: no name"), "Missing 'name' in frontmatter"],
      [fm("name: my-skill"), "Missing 'description' in frontmatter"],
      [fm("name: my-skill\ndescription: test\n42: bad\ncustom-field: bad"),
        "Unexpected key(s) in SKILL.md frontmatter: 42, custom-field"],
      [fm("name: MySkill\ndescription: test"),
        "Name 'MySkill' should be hyphen-case (lowercase letters, digits, and hyphens only)"],
      [fm("name: -my-skill\ndescription: test"),
        "Name '-my-skill' cannot start/end with hyphen or contain consecutive hyphens"],
      [fm("name: my-skill-\ndescription: test"), "cannot start/end with hyphen"],
      [fm("name: my--skill\ndescription: test"), "contain consecutive hyphens"],
      [fm(`name: ${"a".repeat(65)}\ndescription: test`), "Name is too long (65 characters). Maximum is 64 characters."],
      [fm("name: ''\ndescription: test"), "Name cannot be empty"],
      [fm("name: my-skill\ndescription: Has <html> tags"), "Description cannot contain angle brackets (< or >)"],
      [fm(`name: my-skill\ndescription: ${"a".repeat(1025)}`), "Description is too long (1025 characters)."],
      [fm("name: my-skill\ndescription: A skill\nallowed-tools: bash"), "allowed-tools in SKILL.md must be a list"],
      [fm("name: my-skill\ndescription: A skill\nallowed-tools: [bash, 1]"), "must contain only strings"],
      [fm("name: my-skill\ndescription: A skill\nrequired-secrets: API_KEY"),
        "required-secrets in SKILL.md must be a list"],
      [fm("name: my-skill\ndescription: A skill\nsecrets-autonomous: 'no'"), "must be a boolean"]
    ]
    for (const [content, message] of cases) {
      const problem = SkillsDirectory.installProblem(content)
      assert.isString(problem, content)
      assert.include(problem, message, content)
    }
  })

  it("enabled state comes from extensions_config.json next to the config; a broken file is a warning", () => {
    const dir = tempDir("antler-skills-cfg-")
    write(dir, "skills/public/alpha/SKILL.md", skill("alpha"))
    write(dir, "skills/public/beta/SKILL.md", skill("beta"))
    write(dir, "extensions_config.json", JSON.stringify({ mcpServers: {}, skills: { beta: { enabled: false } } }))
    const catalog = SkillsDirectory.catalogOf(appAt(dir))
    assert.deepStrictEqual(catalog.skills.map((s) => [s.name, s.enabled]), [["alpha", true], ["beta", false]])
    write(dir, "extensions_config.json", "{ not json")
    const broken = SkillsDirectory.catalogOf(appAt(dir))
    assert.isTrue(broken.skills.every((s) => s.enabled))
    assert.match(broken.warnings[0]!, /extensions_config\.json: not valid JSON/)
  })

  // DeerFlow's ExtensionsConfig.resolve_config_path (test_runtime_paths): mcp_config.json, the older name, is the
  // extensions file when there is no extensions_config.json; the MCP servers are read from the same file
  it("a skill switched off in mcp_config.json next to the config is off", () => {
    const dir = tempDir("antler-skills-mcpcfg-")
    write(dir, "skills/public/alpha/SKILL.md", skill("alpha"))
    write(dir, "skills/public/beta/SKILL.md", skill("beta"))
    write(dir, "mcp_config.json", JSON.stringify({ mcpServers: {}, skills: { beta: { enabled: false } } }))
    const catalog = SkillsDirectory.catalogOf(appAt(dir))
    assert.deepStrictEqual(catalog.skills.map((s) => [s.name, s.enabled]), [["alpha", true], ["beta", false]])
    assert.strictEqual(SkillsDirectory.extensionsConfigPath(appAt(dir), {}), Path.join(dir, "mcp_config.json"))
  })

  it.effect("bounded: a name over 64 characters, a SKILL.md over 1 MiB or a FIFO is rejected; a long description is cut, with a warning", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-skills-bounds-")
      const root = Path.join(dir, "skills")
      write(root, "public/ok/SKILL.md", skill("ok"))
      write(root, "public/long-name/SKILL.md", skill("n".repeat(65)))
      write(root, "public/wordy/SKILL.md", `---\nname: wordy\ndescription: ${"very ".repeat(1000)}\n---\n`)
      write(root, "public/huge/SKILL.md", `${skill("huge")}${"padding\n".repeat(140_000)}`)
      Fs.mkdirSync(Path.join(root, "public/pipe"))
      ChildProcess.execFileSync("mkfifo", [Path.join(root, "public/pipe/SKILL.md")])
      write(dir, "extensions_config.json", JSON.stringify({ skills: {}, padding: "x".repeat(1024 * 1024) }))
      const catalog = SkillsDirectory.catalogOf(appAt(dir))
      assert.deepStrictEqual(catalog.skills.map((s) => s.name), ["ok", "wordy"])
      const wordy = catalog.skills[1]!
      assert.strictEqual(wordy.description.length, 1024)
      assert.isTrue(wordy.description.endsWith("…"))
      const problems = Object.fromEntries(catalog.rejected.map((r) => [Path.relative(root, r.file), r.problem]))
      assert.deepStrictEqual(problems, {
        "public/huge/SKILL.md": "too large: 1.1 MiB, over the limit of 1 MiB",
        "public/long-name/SKILL.md": "the name is 65 characters long (at most 64)",
        "public/pipe/SKILL.md": "not a regular file (a FIFO)"
      })
      assert.deepStrictEqual(catalog.warnings, [
        `${Path.join(dir, "extensions_config.json")}: too large: 1.0 MiB, over the limit of 1 MiB; skills stay enabled`,
        `${Path.join(root, "public/wordy/SKILL.md")}: the description of wordy is 4999 characters long; the prompt ` +
        "shows its first 1024"
      ])
      // reading a skill whose file became a FIFO since it was found is refused, not a hang
      const ok = catalog.skills[0]!
      Fs.rmSync(ok.file)
      ChildProcess.execFileSync("mkfifo", [ok.file])
      const error = yield* Effect.flip(SkillsDirectory.make(appAt(dir)).read(ok))
      assert.strictEqual(error.message, "The SKILL.md of ok cannot be read: not a regular file (a FIFO)")
    }))

  it("skills.path (relative to the config file) wins over the environment, which wins over skills/ next to it", () => {
    const dir = tempDir("antler-skills-where-")
    const skills = { container_path: "/mnt/skills", deferred_discovery: false, path: "my-skills" }
    const configured = appAt(dir, { skills })
    assert.deepStrictEqual(SkillsDirectory.location(configured, { DEER_FLOW_SKILLS_PATH: "/elsewhere" }), {
      path: Path.join(dir, "my-skills"),
      from: "skills.path"
    })
    assert.deepStrictEqual(SkillsDirectory.location(appAt(dir), { DEER_FLOW_SKILLS_PATH: "/elsewhere" }), {
      path: "/elsewhere",
      from: "$DEER_FLOW_SKILLS_PATH"
    })
    assert.strictEqual(SkillsDirectory.location(appAt(dir), {}).path, Path.join(dir, "skills"))
    assert.isUndefined(SkillsDirectory.root(appAt(dir)))
  })

  it.effect("a skill file outside the skills directory (through a link) is not read", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-skills-link-")
      const outside = tempDir("antler-outside-")
      write(outside, "evil/SKILL.md", skill("evil"))
      Fs.mkdirSync(Path.join(dir, "skills", "public"), { recursive: true })
      Fs.symlinkSync(Path.join(outside, "evil"), Path.join(dir, "skills", "public", "evil"))
      const catalog = SkillsDirectory.catalogOf(appAt(dir))
      assert.deepStrictEqual(catalog.skills, [])
      assert.match(catalog.rejected[0]!.problem, /outside the skills directory/)
      const error = yield* Effect.flip(SkillsDirectory.make(appAt(dir)).read({
        name: "evil",
        description: "",
        category: "public",
        relativePath: "evil",
        location: "/mnt/skills/public/evil/SKILL.md",
        file: Path.join(outside, "evil", "SKILL.md"),
        enabled: true,
        allowedTools: undefined
      }))
      assert.strictEqual(error._tag, "SkillReadError")
      assert.include(error.message, "not inside the skills directory")
    }))
})
