/**
 * The skills as host bash sees them while a skill is disabled: a copy of the skills directory's tree made for one
 * command (directories made, files hard-linked, or copied where a link cannot be made, symbolic links made again)
 * without the disabled skills' folders, and removed when the command ends. Bubblewrap hides such a folder by
 * mounting over it; on the host, the command's skills path is rewritten to this copy instead, so a glob, a `cd`
 * then a relative path, or a recursive search does not reach the folder either (DeerFlow's local sandbox maps the
 * skills to a copy of the enabled ones). Files are linked, not copied, so a view costs a directory entry a file.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const realOrSelf = (path: string) => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return path
  }
}

const inside = (path: string, root: string) =>
  path === root || path.startsWith(root.endsWith(Path.sep) ? root : `${root}${Path.sep}`)

/**
 * Makes at `view` (which must not exist) the skills directory `root` without the folders `hidden` (paths relative
 * to `root`; `""` hides everything). A symbolic link whose target is inside a hidden folder, or holds one, is left
 * out; one into the skills directory points into the view; one out of it points where it did. FIFOs, sockets and
 * devices are left out. Throws when the view cannot be made.
 */
export const buildSkillsView = (root: string, view: string, hidden: ReadonlyArray<string>): void => {
  Fs.mkdirSync(view, { recursive: true })
  if (hidden.includes("") || !Fs.statSync(root, { throwIfNoEntry: false })?.isDirectory()) return
  const hiddenReal = hidden.map((rel) => realOrSelf(Path.join(root, rel)))
  const realRoot = realOrSelf(root)
  const copy = (rel: string) => {
    for (const name of Fs.readdirSync(Path.join(root, rel))) {
      const child = rel === "" ? name : `${rel}/${name}`
      if (hidden.includes(child)) continue
      const source = Path.join(root, child)
      const target = Path.join(view, child)
      // a hidden folder below this entry: it is walked (a link to a folder on the way is followed)
      const above = hidden.some((h) => h.startsWith(`${child}/`))
      const stat = Fs.lstatSync(source)
      if (stat.isDirectory() || (above && stat.isSymbolicLink() && Fs.statSync(source).isDirectory())) {
        Fs.mkdirSync(target)
        copy(child)
      } else if (stat.isSymbolicLink()) {
        const real = realOrSelf(source)
        // (into a hidden folder, or to a folder holding one: `/`, the skills directory from outside)
        if (hiddenReal.some((dir) => inside(real, dir) || inside(dir, real))) continue
        const lexical = Path.resolve(Path.dirname(source), Fs.readlinkSync(source))
        const base = inside(lexical, root) ? root : inside(lexical, realRoot) ? realRoot : undefined
        const text = base === undefined
          ? lexical
          : Path.relative(Path.dirname(target), Path.join(view, Path.relative(base, lexical))) || "."
        Fs.symlinkSync(text, target)
      } else if (stat.isFile()) {
        try {
          Fs.linkSync(source, target)
        } catch {
          Fs.copyFileSync(source, target, Fs.constants.COPYFILE_FICLONE)
        }
      }
    }
  }
  copy("")
}
