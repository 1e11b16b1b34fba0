/**
 * DeerFlow's `authorization` section: role-based permissions (which tools, models and gateway routes each role
 * may use, through a provider such as `deerflow.authz.rbac:RbacAuthorizationProvider`). Antler does not enforce
 * them, so it reads only `enabled`: an enabled section is a configuration error rather than a restriction that
 * silently does not hold (every role would get every tool). Off, the section does nothing, as in DeerFlow, and its
 * other keys are named among the keys Antler does not read.
 */
import * as Schema from "effect/Schema"
import { withDefault } from "./Fields.js"

/** Why an enabled `authorization` section is refused. */
export const AUTHORIZATION_UNSUPPORTED = "role-based permissions (authorization.enabled: true) are not enforced by " +
  "Antler, so every role would be given every tool and route; set enabled: false or remove the section. " +
  "guardrails (use: allowlist) limits the tools of every user's runs, and a token without admin: true never " +
  "changes what another user's agents read"

/** `authorization`: read only to refuse it when enabled (see the top of this module). */
export const AuthorizationConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false)
}).pipe(Schema.filter((c) => !c.enabled || AUTHORIZATION_UNSUPPORTED))
export type AuthorizationConfig = typeof AuthorizationConfig.Type
