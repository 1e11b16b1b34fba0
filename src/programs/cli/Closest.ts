/** The known name closest to a mistyped one: an option, a command, a key of config.yaml. */

// Edit distance counting a swap of two neighbouring letters as one edit (`--thraed` is one edit from `--thread`).
const editDistance = (a: string, b: string): number => {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => i + j))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
      }
    }
  }
  return d[a.length]![b.length]!
}

/**
 * The known name closest to a mistyped one, if one is close: the only name it is a prefix of, else the
 * nearest by edit distance (at most 1 for names of up to 4 letters, else 2). Dashes and case are ignored.
 */
export const closestName = (given: string, known: Iterable<string>): string | undefined => {
  const wanted = bare(given)
  const names = [...known]
  const extending = wanted.length >= 2 ? names.filter((name) => bare(name).startsWith(wanted)) : []
  if (extending.length === 1) return extending[0]
  return nearest(given, names)
}

const bare = (name: string) => name.replace(/^-+/, "").toLowerCase()

/**
 * The known name a few edits from a mistyped one (at most 1 for names of up to 4 letters, else 2), if there is
 * one: a misspelling, not a prefix (a key of config.yaml is no abbreviation of another).
 */
export const nearest = (given: string, known: Iterable<string>): string | undefined => {
  const wanted = bare(given)
  const names = [...known]
  let best: string | undefined
  let bestDistance = wanted.length <= 4 ? 2 : 3
  for (const name of names) {
    const distance = editDistance(wanted, bare(name))
    if (distance < bestDistance) {
      best = name
      bestDistance = distance
    }
  }
  return best
}
