/**
 * Tool groups (SPEC §7.1): a custom agent's `tool_groups` limit the configured tools it gets to those groups
 * (`undefined` = every group, `[]` = no configured tool); built-in tools (present_files, view_image, task,
 * update_agent, ...) are never filtered.
 *
 * Until the configured tools (`tools:` with their `group`) are read from config.yaml (issue 10), the group of
 * a tool is DeerFlow's default group of the sandbox tool of that name (`config.example.yaml`).
 */

/** DeerFlow's default groups of the configured tools Antler provides itself. */
export const DEFAULT_GROUPS: Readonly<Record<string, string>> = {
  ls: "file:read",
  read_file: "file:read",
  glob: "file:read",
  grep: "file:read",
  write_file: "file:write",
  str_replace: "file:write",
  bash: "bash",
  web_search: "web",
  web_fetch: "web",
  image_search: "web"
}

/** The group of a configured tool, or undefined for a built-in tool (never filtered). */
export const defaultGroupOf = (name: string): string | undefined =>
  Object.hasOwn(DEFAULT_GROUPS, name) ? DEFAULT_GROUPS[name] : undefined

/** The tools an agent with these groups gets: built-ins always, configured tools only in one of the groups. */
export const filter = <T extends { readonly name: string }>(
  tools: ReadonlyArray<T>,
  groups: ReadonlyArray<string> | undefined,
  groupOf: (name: string) => string | undefined = defaultGroupOf
): ReadonlyArray<T> => {
  if (groups === undefined) return tools
  const allowed = new Set(groups)
  return tools.filter((tool) => {
    const group = groupOf(tool.name)
    return group === undefined || allowed.has(group)
  })
}
