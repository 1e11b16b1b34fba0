/**
 * DeerFlow's `auth.local.allow_registration` (its `config.yaml` switch closing self-registration, set where
 * accounts come from single sign-on), read as Antler's `gateway.auth.allow_registration`, with a warning. Closed
 * wins: `false` in either place closes registration, so a DeerFlow configuration that closed it does not open it
 * under Antler. The rest of DeerFlow's `auth:` section (`oidc`) stays among the keys Antler does not use.
 */
import { isRecord } from "../../state/Json.js"
import type { Migrated } from "./MemoryLegacy.js"

/** `raw` (a whole configuration value) with DeerFlow's `auth.local.allow_registration` read. */
export const migrate = (raw: unknown): Migrated => {
  if (!isRecord(raw) || !isRecord(raw.auth) || !isRecord(raw.auth.local)) return { raw, warnings: [] }
  const allowed = raw.auth.local.allow_registration
  if (typeof allowed !== "boolean") return { raw, warnings: [] }
  const { allow_registration: _read, ...local } = raw.auth.local
  const { local: _local, ...auth } = raw.auth
  const rest: Record<string, unknown> = { ...raw }
  const kept = Object.keys(local).length > 0 ? { ...auth, local } : auth
  if (Object.keys(kept).length > 0) rest.auth = kept
  else delete rest.auth
  if (allowed) {
    return {
      raw: rest,
      warnings: [
        "auth.local.allow_registration (DeerFlow's) read: registration is open unless " +
        "gateway.auth.allow_registration is false; move it there to silence this."
      ]
    }
  }
  const gateway = raw.gateway ?? {}
  const gatewayAuth = isRecord(gateway) ? gateway.auth ?? {} : undefined
  // (a gateway or gateway.auth that is not a mapping is left as it is, for the schema to refuse)
  const closed = isRecord(gateway) && isRecord(gatewayAuth)
    ? { ...rest, gateway: { ...gateway, auth: { ...gatewayAuth, allow_registration: false } } }
    : rest
  return {
    raw: closed,
    warnings: [
      "auth.local.allow_registration: false (DeerFlow's) read as gateway.auth.allow_registration: false " +
      "(registration closed); move it there to silence this."
    ]
  }
}
