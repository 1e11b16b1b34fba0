/**
 * The `authorization` section of `config.yaml` for tests of roles: DeerFlow's RBAC provider, on.
 */

/** `authorization` on, with DeerFlow's RBAC provider over `roles` (by name), and `more` of the section beside. */
export const rbac = (roles: unknown, more: Record<string, unknown> = {}) => ({
  enabled: true,
  ...more,
  provider: { use: "deerflow.authz.rbac:RbacAuthorizationProvider", config: { roles } }
})
