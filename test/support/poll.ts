/**
 * Waiting in tests for what another party does (a process starting, a run getting under way, a tick firing):
 * poll, and say what never happened.
 */

/** Polls `check` until it gives a value, and returns it; throws "never happened: <what>" after `tries` polls. */
export const eventually = async <A>(
  check: () => Promise<A | undefined> | A | undefined,
  what: string | (() => string),
  options: { readonly tries?: number; readonly everyMs?: number } = {}
): Promise<A> => {
  const tries = options.tries ?? 2400
  for (let i = 0; i < tries; i++) {
    const found = await check()
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 50))
  }
  throw new Error(`never happened: ${typeof what === "string" ? what : what()}`)
}

/** Polls `check` until it holds (every 50 ms unless said); throws "never happened: <what>" after `tries` polls. */
export const until = async (
  check: () => Promise<boolean> | boolean,
  what: string | (() => string),
  tries = 2400,
  everyMs = 50
): Promise<void> => {
  await eventually(async () => ((await check()) ? true : undefined), what, { tries, everyMs })
}
