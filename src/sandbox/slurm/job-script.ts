/**
 * What a Slurm sandbox is on the cluster: a batch job that holds the allocation and, when Slurm
 * signals it (scancel, time limit, preemption, its node returning after it was given up), removes
 * every container labelled with its job id. The container itself is made afterwards by a step
 * (`CREATE_SCRIPT`), so a missing image is an error the harness sees, not a job that dies on its own.
 */

/** Labels every container of this backend carries besides the common ones. */
export const SLURM_LABEL = {
  marker: 'sandbox-harness',
  run: 'sandbox-harness.run',
  role: 'sandbox-harness.role',
  keep: 'sandbox-harness.keep',
  created: 'sandbox-harness.created',
  job: 'sandbox-harness.slurm-job',
  /** The job's run (`SLURM_RESTART_COUNT`, 0 with --no-requeue): a fence keeps only the current one. */
  restart: 'sandbox-harness.slurm-restart',
  /** On a repo image a node built: the same names a local engine's image carries. */
  kind: 'sandbox-harness.kind',
  contentHash: 'sandbox-harness.content-hash',
  repo: 'sandbox-harness.repo',
  buildNetwork: 'sandbox-harness.build-network',
  /** The id the base image had on that node when it was built: a changed base means a rebuild. */
  baseId: 'sandbox-harness.base-id',
} as const;

/** Every job of a run shares one name, so `scancel --name` cancels the whole run at once. */
export function jobName(runId: string | undefined): string {
  return `sandbox-harness.${(runId ?? 'adhoc').replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 60)}`;
}

/** The container of job J's run R: the name alone says which job and which run of it. */
export function containerNameOf(job: string, restart = 0): string {
  return `sandbox-harness-slurm-${job}-r${restart}`;
}

/** The batch script (read by sbatch from stdin: no arguments). Waits for signals; on one, removes the job's containers and ends. */
export function jobScript(cli: 'docker' | 'podman'): string {
  return `#!/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; export PATH
cli=${cli}
clean() {
  # The container by its name first, then any other of the job's by label, by a remover of its
  # own session that outlives this script: Slurm ends the job's processes KillWait seconds after
  # the signal, and an engine client killed mid-request can leave the removal undone (seen on a
  # loaded node: the container outlived its cancelled job).
  setsid sh -c '"$1" rm -f "$2" >/dev/null 2>&1
ids=$("$1" ps -aq --filter "label=$3")
[ -n "$ids" ] && "$1" rm -f $ids >/dev/null 2>&1' sandbox-harness-clean "$cli" \
    "sandbox-harness-slurm-$SLURM_JOB_ID-r\${SLURM_RESTART_COUNT:-0}" "${SLURM_LABEL.job}=$SLURM_JOB_ID" \
    </dev/null >/dev/null 2>&1 &
  exit 0
}
trap clean TERM INT USR1
while :; do sleep 3600 & wait $!; done
`;
}

/**
 * Run before the job's first container is made: waits (at most 30 s) until the job's batch
 * script has set its trap, which shows in /proc as a handler of TERM (SigCgt bit 15). Slurm
 * starts the script and a step independently, so on a loaded node the container could exist
 * before the trap does, and a cancel in that gap would leave it behind (seen: a scancel right
 * after create, with the machine busy, left the container running and the job gone). Without
 * `scontrol` on the node, or a batch step it does not list, there is nothing to wait for.
 */
export const AWAIT_TRAP_SCRIPT = `n=0
while [ $n -lt 300 ] && command -v scontrol >/dev/null 2>&1; do
  seen=
  for p in $(scontrol listpids "$SLURM_JOB_ID" 2>/dev/null | awk '$3 == "batch" { print $1 }'); do
    seen=1
    c=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
    [ -n "$c" ] && [ $(( 0x$c & 0x4000 )) -ne 0 ] && break 2
  done
  [ -z "$seen" ] && [ $n -ge 100 ] && break
  n=$((n + 1)); sleep 0.1
done
`;

/**
 * $1 engine CLI, $2 image, $3 container name, then the create flags (image and command last).
 * stdin: the tar of the injected files. Exit 40: no such image on this node; 44: the image
 * declares volumes; 41-43: create, copy or start failed (the container is removed again).
 */
export const CREATE_SCRIPT = `cli=$1; img=$2; name=$3; shift 3
"$cli" image inspect "$img" >/dev/null 2>&1 || { echo "image $img is not on node \${SLURMD_NODENAME:-$(hostname)}" >&2; exit 40; }
vols=$("$cli" image inspect -f '{{len .Config.Volumes}}' "$img")
[ "$vols" = 0 ] || { echo "image $img declares volumes" >&2; exit 44; }
"$cli" create "$@" >/dev/null || exit 41
"$cli" cp - "$name:/" || { "$cli" rm -f "$name" >/dev/null 2>&1; exit 42; }
"$cli" start "$name" >/dev/null || { "$cli" rm -f "$name" >/dev/null 2>&1; exit 43; }
echo ready
`;

/** $1 engine CLI, $2 container: removed (missing is fine). */
export const REMOVE_SCRIPT = `"$1" rm -f "$2" >/dev/null 2>&1; "$1" inspect "$2" >/dev/null 2>&1 && exit 1; exit 0`;

/** $1 engine CLI, $2 container: prints true/false. */
export const RUNNING_SCRIPT = `"$1" inspect -f '{{.State.Running}}' "$2" 2>/dev/null || echo gone`;

/** $1 engine CLI, $2 container: every process killed at once, the writable layer kept. */
export const RESTART_SCRIPT = `"$1" restart -t 0 "$2" >/dev/null`;

/**
 * $1 engine CLI, $2 image, then the create flags of an idle container that only holds the
 * image (never started): the tar of its /workspace on stdout, the container removed after.
 */
export const TREE_SCRIPT = `cli=$1; img=$2; shift 2
"$cli" image inspect "$img" >/dev/null 2>&1 || { echo "image $img is not on node \${SLURMD_NODENAME:-$(hostname)}" >&2; exit 40; }
id=$("$cli" create "$@") || exit 41
"$cli" cp "$id:/workspace" -; rc=$?
"$cli" rm -f "$id" >/dev/null 2>&1
exit $rc
`;
