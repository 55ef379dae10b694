/**
 * The harness's own shell scripts, run inside a sandbox as the sandbox user (POSIX `sh`,
 * GNU find, tar and coreutils, which every base image has). They are the backend-independent
 * half of the `Sandbox` contract: a backend only has to start a process.
 *
 * Exit codes >= 40 name a refusal (see `FILE_PROBLEMS`); the offending path is on stderr.
 * Paths arrive already checked by the host (`workspaceRelative`): relative, no `.`/`..`.
 */

import { WORKSPACE } from '../types.js';

/** Where the start marker lives: injected root-owned before anything runs, so only the harness sets its ctime. */
export const START_MARKER = '/etc/sandbox-harness/started';

export const FILE_PROBLEMS = {
  40: 'missing',
  41: 'through-link',
  42: 'not-a-file',
  43: 'not-a-folder',
  44: 'is-a-directory',
  45: 'permission',
  46: 'too-large',
} as const;

/**
 * Walks the folders of "$p" from the workspace, one component at a time, refusing a symlink
 * or a non-folder on the way (exit 41 / 43). With mkparents=1 a missing folder is created
 * (and checked again); otherwise a missing one is exit 40. Leaves the checked path in $f.
 */
const WALK = `
walk() {
  cur=.; rest=$p
  while :; do
    case $rest in */*) c=\${rest%%/*}; rest=\${rest#*/} ;; *) break ;; esac
    cur=$cur/$c
    if [ -L "$cur" ]; then fail 41 "\${cur#./}"; fi
    if [ ! -e "$cur" ]; then
      if [ "$mkparents" = 1 ]; then mkdir -- "$cur" 2>/dev/null || fail 45 "\${cur#./}"; else fail 40 "\${cur#./}"; fi
    fi
    if [ -L "$cur" ] || [ ! -d "$cur" ]; then fail 43 "\${cur#./}"; fi
  done
  f=$cur/$rest
  if [ -L "$f" ]; then fail 41 "$p"; fi
}`;

/** $1 path, $2 most bytes: the file's bytes on stdout. */
export const READ_SCRIPT = `
fail() { printf '%s' "$2" >&2; exit "$1"; }
${WALK}
p=$1; mkparents=0
walk
if [ ! -e "$f" ]; then fail 40 "$p"; fi
if [ -d "$f" ]; then fail 44 "$p"; fi
if [ ! -f "$f" ]; then fail 42 "$p"; fi
if [ ! -r "$f" ]; then fail 45 "$p"; fi
# find, not stat: coreutils 9's stat asks statx for AT_NO_AUTOMOUNT, which older gVisor refuses.
size=$(find "$f" -maxdepth 0 -printf %s) || fail 45 "$p"
if [ "$size" -gt "$2" ]; then fail 46 "$size"; fi
exec cat -- "$f"
`;

/**
 * $1 a random token, then pairs of (mode, path); stdin is a tar whose members are named
 * 0, 1, 2, ... in the order of the pairs. Each file is unpacked into a private staging
 * folder in the workspace (same filesystem) and renamed into place: whole files, and a
 * rename never writes through a link at the final name.
 *
 * A mode of `keep` (what the agent's file tools ask for) gives a file that already exists
 * its own permission bits, as `sed -i` does, read in the same step as the rename; a new
 * file gets 0644. Never a setuid, setgid or sticky bit: those are masked off here whatever
 * the file had, and the host never asks for them.
 */
export const WRITE_SCRIPT = `
stage=.sandbox-harness-stage-$1
shift
fail() { rm -rf "$stage"; printf '%s' "$2" >&2; exit "$1"; }
${WALK}
mkdir -m 700 "$stage" 2>/dev/null || { printf '%s' "the workspace is not writable" >&2; exit 45; }
tar -x -f - -C "$stage" --no-same-owner 2>/dev/null || fail 45 "cannot unpack the files (is the disk full?)"
i=0; mkparents=1
while [ $# -ge 2 ]; do
  mode=$1; p=$2; shift 2
  walk
  if [ -d "$f" ]; then fail 44 "$p"; fi
  if [ "$mode" = keep ]; then
    mode=644
    if [ -f "$f" ] && [ ! -L "$f" ]; then
      m=$(find "$f" -maxdepth 0 -printf %m 2>/dev/null) || m=
      case $m in '' | *[!0-7]*) ;; *) mode=$(printf '%o' $((0$m & 0777))) ;; esac
    fi
  fi
  chmod "$mode" "$stage/$i" 2>/dev/null && mv -f -- "$stage/$i" "$f" 2>/dev/null || fail 45 "$p"
  i=$((i + 1))
done
rm -rf "$stage"
`;

/** $1 folder ('.' for the workspace), $2 most entries: `type \\t size \\t path \\0` records. */
export const LIST_SCRIPT = `
fail() { printf '%s' "$2" >&2; exit "$1"; }
${WALK}
if [ "$1" = . ]; then f=.; else p=$1; mkparents=0; walk; fi
if [ ! -e "$f" ]; then fail 40 "$1"; fi
if [ ! -d "$f" ]; then fail 43 "$1"; fi
find "$f" -mindepth 1 \\( -name .git -o -name node_modules \\) -prune -o -printf '%y\\t%s\\t%P\\0' 2>/dev/null | head -z -n "$2"
`;

/**
 * $1 most entries + 1. One walk of the workspace lists every entry whose inode changed after
 * the start marker's (ctime: no user can set it back) on stdout; the children of each changed
 * folder follow on stderr, so the host can tell deletions from its own copy of the pristine
 * tree (two streams, so the two kinds of record never interleave):
 *   stdout: C \\t type \\t mode \\t links \\t size \\t path \\0     stderr: E \\t ./folder/child \\0
 * Nothing is written inside the sandbox: a full /tmp must not hide a change.
 */
export const SCAN_SCRIPT = `
m=${START_MARKER}
[ -e "$m" ] || { printf '%s' "no start marker at $m" >&2; exit 47; }
folder=$(printf 'C\\td\\t')
exec 3>&1
find . -newercc "$m" -printf 'C\\t%y\\t%m\\t%n\\t%s\\t%P\\0' 2>/dev/null | head -z -n "$1" | tee /dev/fd/3 |
  grep -z "^$folder" | cut -z -f6- | sed -z 's|^|./|; s|/$||' |
  xargs -0r sh -c 'find "$@" -mindepth 1 -maxdepth 1 -printf "E\\t%p\\0" 2>/dev/null' sh 1>&2
exit 0
`;

/**
 * stdin: NUL-separated workspace paths. stdout: one tar of exactly those entries, except
 * regular files with more than one link (a hard link shares its data with a file that may
 * not be editable): those are named on stderr as `H \\t path \\0` and left out.
 */
export const EXPORT_SCRIPT = `
find -files0-from - -maxdepth 0 \\( -type f -links +1 -fprintf /dev/fd/3 'H\\t%p\\0' \\) -o -print0 3>&2 2>/dev/null |
  tar -c -f - --no-recursion --null -T - 2>/dev/null
`;

/**
 * Stops every process this script may signal but the sandbox's init (pid 1) and this script
 * (and its parent, when a `timeout` runs it): SIGSTOP in passes until a pass finds nothing
 * new (a stopped process cannot fork, so this ends), then SIGKILL, then waits until they are
 * gone. The container's init and keep-alive run as root, so the sandbox user can neither
 * signal, trace nor write them: nothing it starts can hide in them (`SURVIVORS_SCRIPT` checks
 * that, as root, after this). Builtins only inside the loops: a fork here would stop itself.
 * Prints `frozen <n>`.
 */
export const FREEZE_SCRIPT = `
me="$$ $PPID"
stopped=' '
while :; do
  new=0
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    case " 1 $me$stopped" in *" $p "*) continue ;; esac
    if kill -STOP "$p" 2>/dev/null; then stopped="$stopped$p "; new=1; fi
  done
  [ "$new" = 0 ] && break
done
n=0
for p in $stopped; do kill -KILL "$p" 2>/dev/null; n=$((n + 1)); done
i=0
while [ "$i" -lt 200 ]; do
  left=0
  for p in $stopped; do
    if read -r line 2>/dev/null < "/proc/$p/stat"; then
      s=\${line##*) }; s=\${s%% *}
      case $s in Z|X) ;; *) left=1 ;; esac
    fi
  done
  [ "$left" = 0 ] && break
  i=$((i + 1)); sleep 0.01
done
[ "$left" = 0 ] || { echo "processes survived the freeze" >&2; exit 49; }
echo "frozen $n"
`;

/**
 * Run as root beside the freeze, so no process of the sandbox user can tamper with it: looks
 * (every 10 ms, for at most $1 tries) until no process is left that is not root's and not a
 * zombie (any of its uids: real, effective, saved, filesystem). Nothing of that user is ever
 * started again once none runs (only the host starts processes), so "clear" can only be seen
 * after the freeze script itself has exited, and stays true. Prints `clear <n>` (processes
 * seen); else exits 49 listing what still runs as `<pid> <state> <uids>`, or 48 when it cannot
 * tell (no process list, or pid 1 not seen), so the caller fails closed. Builtins only in the
 * scan.
 */
export const SURVIVORS_SCRIPT = `
tries=0
while :; do
  seen=0; bad=0; one=; list=
  for d in /proc/[0-9]*; do
    [ -r "$d/status" ] || continue
    s=; u=
    while read -r k a b c e rest; do
      case $k in State:) s=$a ;; Uid:) u="$a $b $c $e" ;; esac
    done < "$d/status" 2>/dev/null
    [ -n "$u" ] || continue
    seen=$((seen + 1))
    [ "$d" = /proc/1 ] && one=1
    [ "$u" = "0 0 0 0" ] && continue
    case $s in Z|X) continue ;; esac
    list="$list\${d#/proc/} $s $u
"; bad=$((bad + 1))
  done
  [ -n "$one" ] && [ "$seen" -gt 1 ] || { echo "cannot list the sandbox's processes" >&2; exit 48; }
  if [ "$bad" = 0 ]; then echo "clear $seen"; exit 0; fi
  tries=$((tries + 1))
  [ "$tries" -lt "\${1:-1}" ] || break
  sleep 0.01
done
printf '%s' "$list"
echo "$bad process(es) of the sandbox user survived the freeze" >&2
exit 49
`;

/**
 * $1 a command's token. Kills every process that carries it in its environment (see the
 * exec wrapper): the whole tree of that command, including children that left its process
 * group or lost their parent. Stops first, in passes, so nothing forks away meanwhile.
 */
export const KILL_TREE_SCRIPT = `
tok=$1
tree=' '
while :; do
  grew=0
  for f in $(grep -l -z -x "SANDBOX_HARNESS_EXEC=$tok" /proc/[0-9]*/environ 2>/dev/null); do
    p=\${f#/proc/}; p=\${p%/environ}
    case "$tree" in *" $p "*) continue ;; esac
    kill -STOP "$p" 2>/dev/null
    tree="$tree$p "
    grew=1
  done
  [ "$grew" = 0 ] && break
done
for p in $tree; do kill -KILL "$p" 2>/dev/null; done
exit 0
`;

/**
 * The command channel's server: one long-lived process that runs the commands it reads on
 * stdin (`<token> <timeout-sec> <line-count> <input-bytes>`, that many lines of command, then
 * that many bytes of the command's stdin: `read` takes a byte at a time from a pipe, so
 * `head -c` gets exactly the input), each like the exec wrapper does (under `timeout`, in
 * the workspace, its tree marked with the token, its output relayed through fifos that are
 * cut once it exits).
 *
 * Framing that the command cannot forge, whatever it prints: every byte of a command's
 * output reaches the channel's stdout or stderr only base64-encoded (`cat` drains the fifo
 * into `base64`, so cutting `cat` off loses nothing `base64` holds), and each command's
 * output ends with `\0SHX <token> <exit code>\0`, which no base64 text contains. Nothing else
 * of the server's reaches the streams (its own stderr is /dev/null; the two streams are fds
 * 3 and 4, closed for the command). The next command's relays and the watchdog that cuts
 * them off are started as soon as one command has answered, and fifos are made and removed
 * in batches, so a command waits on no process but its own.
 */
export const CHANNEL_SCRIPT = `
exec 3>&1 4>&2 2>/dev/null >/dev/null
d=$(mktemp -d /tmp/.sandbox-harness-channel-XXXXXX) || exit 125
n=0; made=0; old=
ready() {
  n=$((n + 1)); o="$d/o$n"; e="$d/e$n"; w="$d/w$n"; po="$d/p$n"; pe="$d/q$n"
  if [ "$made" -lt "$n" ]; then
    set --; i=$n
    while [ "$i" -lt $((n + 16)) ]; do set -- "$@" "$d/o$i" "$d/e$i" "$d/w$i" "$d/p$i" "$d/q$i"; i=$((i + 1)); done
    mkfifo "$@" && made=$((i - 1))
  fi
  if [ -p "$o" ] && [ -p "$e" ] && [ -p "$w" ] && [ -p "$po" ] && [ -p "$pe" ]; then
    base64 -w 0 < "$po" >&3 & bo=$!
    base64 -w 0 < "$pe" >&4 & be=$!
    cat "$o" > "$po" & ro=$!
    cat "$e" > "$pe" & re=$!
    ( read -r _ < "$w"; sleep 0.3; kill "$ro" "$re" ) & k=$!
    ok=1
  else
    ok=
  fi
}
ready
while IFS=' ' read -r tok t lines ib; do
  cmd=; i=0
  while [ "$i" -lt "$lines" ]; do
    IFS= read -r l || break
    if [ "$i" = 0 ]; then cmd=$l; else cmd="$cmd
$l"; fi
    i=$((i + 1))
  done
  in=/dev/null
  if [ "\${ib:-0}" -gt 0 ]; then in="$d/i$n"; head -c "$ib" > "$in"; old="$old $in"; fi
  if [ -n "$ok" ]; then
    (cd ${WORKSPACE} && SANDBOX_HARNESS_EXEC=$tok exec timeout -k 2 "$t" /bin/sh -c "$cmd") >"$o" 2>"$e" <"$in" 3>&- 4>&- &
    wait $!; rc=$?
    echo > "$w"
    wait "$bo" "$be"
    kill "$k"
    old="$old $o $e $w $po $pe"
  else
    rc=125; printf 'sandbox-harness: cannot create the output relay in %s (is /tmp full?)\\n' "$d" | base64 -w 0 >&4
  fi
  printf '\\0SHX %s %s\\0' "$tok" "$rc" >&3
  printf '\\0SHX %s %s\\0' "$tok" "$rc" >&4
  if [ $((n % 32)) = 0 ]; then rm -f $old; old=; fi
  ready
done
kill "$ro" "$re" "$k"
rm -rf "$d"
`;

/** Paths (args) removed before the agent starts: held-out files the attempt must not see. */
export const HIDE_SCRIPT = `rm -rf -- "$@"`;

/**
 * Makes the workspace a git repository of what it holds: one commit of the pathspecs on
 * stdin (NUL-separated: `.` and a `:(exclude,literal)` one per held-out path, so no object
 * of a held-out file is ever written), no history, no remote, no hooks (an empty template),
 * no configuration but its own (system and global files are not read), dates and names
 * fixed so the same tree always gives the same commit (no fsync: the image layer is the
 * durable copy; loose objects cost nothing per sandbox, the scan never sees them). Args: patterns
 * for `.git/info/exclude` (caches, dependency folders), so `git status` shows what the gate
 * looks at. Exit 3: no git in the image; 4: the workspace has a `.git` already (left alone).
 */
export const GIT_INIT_SCRIPT = `
set -u
command -v git >/dev/null 2>&1 || exit 3
[ -e .git ] || [ -L .git ] && exit 4
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 \\
  GIT_AUTHOR_NAME=sandbox-harness GIT_AUTHOR_EMAIL=sandbox-harness@localhost \\
  GIT_COMMITTER_NAME=sandbox-harness GIT_COMMITTER_EMAIL=sandbox-harness@localhost \\
  GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z'
git init -q --template= -b main . 2>/dev/null || git init -q --template= . || exit 5
mkdir -p .git/info || exit 5
for p in "$@"; do printf '%s\\n' "$p"; done > .git/info/exclude || exit 5
git config user.name sandbox-harness && git config user.email sandbox-harness@localhost &&
git config core.fsmonitor false && git config gc.auto 0 || exit 5
git -c core.fsync=none add -A --pathspec-from-file=- --pathspec-file-nul >/dev/null || exit 6
git -c core.fsync=none commit -q --no-verify --allow-empty \
  -m 'The workspace as the sandbox started (sandbox-harness)' >/dev/null || exit 7
exit 0
`;
