/**
 * The setup inside a staged sandbox: the script that mounts the thread's directories through overlayfs (or bind
 * mounts them where it cannot), detaches the staging area, applies the limits and drops to the sandbox user; what
 * it reports; and the removal of overlayfs work directories afterwards.
 */
import * as Fs from "node:fs"
import { SANDBOX_USER } from "./SystemView.js"

/**
 * The first command of a staged sandbox, run as root of the sandbox's user namespace (capabilities over that
 * namespace only). It mounts each of the thread's directories from the staging area with overlayfs, so
 * /proc/self/mountinfo shows a mount whose source is `/.stage/...` instead of the host path (a bind mount shows
 * the directory's path on the host filesystem, whatever else is done); falls back to a bind mount where overlayfs
 * cannot be used (reported on the status descriptor); detaches the staging area; allows no further user
 * namespaces (the one made next is the last); makes /proc/sys read-only; applies the limits; and finally runs
 * the command as the unprivileged `sandbox` user of a nested user namespace (no capabilities anywhere).
 * Arguments: status fd, working directory, memory KiB, file KiB, tasks, command, mount count, then per mount:
 * rw|ro|hide, source, target, overlay work directory (`hide`: an empty read-only tmpfs over the target).
 */
export const SETUP_SCRIPT = `set -u
status=$1 cwd=$2 mem=$3 fsize=$4 nproc=$5 cmd=$6 n=$7
shift 7
fail() { echo "fail $*" >&"$status"; exit 125; }
overlay() { command -p mount -t overlay overlay -o "nosuid,nodev,userxattr,index=off,$1" "$2" 2>/dev/null; }
bind() { command -p mount --bind -o "$1" "$2" "$3" 2>/dev/null && echo "bind $3" >&"$status"; }
while [ "$n" -gt 0 ]; do
  kind=$1 src=$2 dst=$3 work=$4
  shift 4
  n=$((n - 1))
  if [ "$kind" = hide ]; then
    command -p mount -t tmpfs -o ro,nosuid,nodev,size=4k tmpfs "$dst" 2>/dev/null || fail "could not hide $dst"
  elif [ "$kind" = rw ]; then
    overlay "lowerdir=/.stage/empty,upperdir=$src,workdir=$work" "$dst" || bind nosuid,nodev "$src" "$dst" ||
      fail "could not mount $dst"
  else
    overlay "ro,lowerdir=$src:/.stage/empty" "$dst" || bind ro,nosuid,nodev "$src" "$dst" ||
      fail "could not mount $dst"
  fi
done
command -p umount -l /.stage 2>/dev/null || fail "could not detach the staging area"
echo 1 2>/dev/null >/proc/sys/user/max_user_namespaces || fail "could not limit user namespaces"
command -p mount --bind -o ro /proc/sys /proc/sys 2>/dev/null || fail "could not make /proc/sys read-only"
limit() { [ -z "$2" ] || ulimit -H -S "$1" "$2"; }
ulimit -H -S -c 0 && limit -v "$mem" && limit -f "$fsize" && limit -u "$nproc" ||
  fail "could not apply the resource limits"
cd "$cwd" 2>/dev/null || fail "could not enter $cwd"
unshare=$(command -p -v unshare) || fail "unshare (util-linux) is missing"
exec {status}>&-
exec "$unshare" --user --map-user=${SANDBOX_USER.uid} --map-group=${SANDBOX_USER.gid} -- /bin/bash -c "$cmd" 2>&1`

/** Where a staged sandbox sees its staging area (detached before the command runs). */
export const STAGE = "/.stage"

/** What a staged setup reported: targets that fell back to bind mounts, and why it failed (if it did). */
export const parseSetupStatus = (
  text: string
): { readonly bound: ReadonlyArray<string>; readonly failure?: string } => {
  const bound: Array<string> = []
  let failure: string | undefined
  for (const line of text.split("\n")) {
    if (line.startsWith("bind ")) bound.push(line.slice(5))
    else if (line.startsWith("fail ")) failure ??= line.slice(5)
  }
  return failure === undefined ? { bound } : { bound, failure }
}

/** Removes a directory tree that may hold overlayfs work directories (mode 000 when made by a non-root user). */
export const removeTree = (path: string): void => {
  try {
    Fs.rmSync(path, { recursive: true, force: true })
  } catch {
    try {
      const chmod = (dir: string) => {
        Fs.chmodSync(dir, 0o700)
        for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
          if (entry.isDirectory()) chmod(`${dir}/${entry.name}`)
        }
      }
      chmod(path)
      Fs.rmSync(path, { recursive: true, force: true })
    } catch {
      // left behind; swept later
    }
  }
}
