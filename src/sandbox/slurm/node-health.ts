/**
 * Which nodes this process trusts with a sandbox. Fail closed: a node is probed (inside the
 * first sandbox job it gets, so a full node cannot keep its own probe waiting) before any
 * sandbox there is used, and one that fails is excluded from every later job with the reason.
 * A node found lost mid-sandbox is excluded too, and comes back only after Slurm says it
 * answers again and the fence has removed every container of this tool there whose job no
 * longer runs on it (the lost copies: killed, never read).
 */
import { errorMessage, ImageError, UsageError } from '../../errors.js';
import { nodeStep } from './node-step.js';
import { fenceNode, probeNode, type NodeProbe } from './slurm-operator.js';
import type { SlurmClient } from './slurm-client.js';

/** How often a lost node's state is asked while the harness waits for it to return. */
const RETURN_POLL_MS = 2000;
/** Node states (`sinfo %t`) of a node that answers: no `*` (not responding), not down or drained. */
const ANSWERING = /^(idle|mix|mixed|alloc|allocated|comp|completing)$/;

export class NodeHealth {
  /** Node -> why no sandbox goes there now. */
  private readonly excluded = new Map<string, string>();
  private readonly probes = new Map<string, Promise<NodeProbe>>();
  private readonly watching = new Set<string>();

  constructor(
    private readonly client: SlurmClient,
    /** Notes for a person (a node excluded, fenced, back). */
    private readonly say: (line: string) => void = () => undefined,
  ) {}

  /** `--exclude=` for a new job, or nothing. */
  excludeArgs(): string[] {
    return this.excluded.size ? [`--exclude=${[...this.excluded.keys()].join(',')}`] : [];
  }

  /** Whether no new sandbox goes to `node` now (failed its probe, or lost until fenced). */
  isExcluded(node: string): boolean {
    return this.excluded.has(node);
  }

  /** Why the nodes left out are left out (for an error that no node could take a sandbox). */
  describeExcluded(): string {
    return [...this.excluded].map(([node, why]) => `${node}: ${why}`).join('; ');
  }

  /**
   * The node's probe, once per node while it stays trusted (inside `place`, the sandbox's job).
   * A failed probe excludes the node.
   */
  async check(place: { job: string; node: string }, image: string): Promise<NodeProbe> {
    let probe = this.probes.get(place.node);
    if (!probe) {
      probe = probeNode(this.client, place.node, image, place);
      this.probes.set(place.node, probe);
    }
    const verdict = await probe;
    if (verdict.missingImage) {
      // The node's engine was not judged: the sandbox's image is what is missing there.
      this.probes.delete(place.node);
      throw new ImageError(`${verdict.detail}`, {
        hint: "Load it into every node's engine, or pull it there from the cluster's registry.",
      });
    }
    if (!verdict.ok) {
      this.exclude(place.node, `failed the sandbox probe (${verdict.detail})`);
      // Probed again only when the node comes back into use after an operator's fix (a new process).
    }
    return verdict;
  }

  /**
   * Whether the node still runs a step of `place.job`: a no-op step. Slurm notices a dead slurmd
   * only after `SlurmdTimeout` (300 s by default) and keeps the node's jobs RUNNING until then,
   * while every new step there fails to launch (srun: "Communication connection failure").
   */
  async takesSteps(place: { job: string; node: string }): Promise<boolean> {
    const result = await nodeStep(this.client, place, 'exit 0', [], { timeoutMs: 60_000 }).catch(
      () => undefined,
    );
    return result?.code === 0;
  }

  /** A sandbox on `node` was lost: no new sandbox goes there until it returns and is fenced. */
  lost(node: string): void {
    this.exclude(node, 'lost mid-sandbox');
    this.probes.delete(node);
    void this.watchReturn(node);
  }

  private exclude(node: string, why: string): void {
    if (this.excluded.has(node)) return;
    this.excluded.set(node, why);
    this.say(`slurm: node ${node} excluded: ${why}`);
  }

  /** Waits (without keeping the process alive) for the node to answer, fences it, lets it back in. */
  private async watchReturn(node: string): Promise<void> {
    if (this.watching.has(node)) return;
    this.watching.add(node);
    let failedFence = false;
    try {
      for (;;) {
        await new Promise<void>((resolve) => setTimeout(resolve, RETURN_POLL_MS).unref());
        let state = '';
        try {
          state =
            (await this.client.run('sinfo', ['-h', '-n', node, '-o', '%t'])).stdout.trim().split('\n')[0] ??
            '';
        } catch (error) {
          // The cluster's configuration is gone (the cluster itself): nothing will answer again.
          if (error instanceof UsageError) return;
        }
        if (!ANSWERING.test(state)) continue;
        try {
          const removed = await fenceNode(this.client, node);
          this.say(
            `slurm: node ${node} is back; fenced${removed.length ? `: removed ${removed.join(', ')}` : ''}`,
          );
          this.excluded.delete(node);
          return;
        } catch (error) {
          // Said once: a node whose slurmd is dead but not yet DOWN fails every fence until it is back.
          if (!failedFence)
            this.say(`slurm: fencing node ${node} failed (${errorMessage(error)}); it stays excluded`);
          failedFence = true;
        }
      }
    } finally {
      this.watching.delete(node);
    }
  }
}
