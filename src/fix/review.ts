/**
 * Maker-checker: after an attempt is verified, an independent checker (its own provider
 * session role, a fresh context, read-only tools, a throwaway sandbox made from the pristine
 * image plus the verified change) reviews it against the ticket, the catalog rules and
 * AGENTS.md and answers with a structured verdict. The implementer never judges its own
 * work; `ready-for-review` needs the checker's approval when review is on.
 */
import { nestedSink } from '../agent/events.js';
import { runAgentLoop, type AgentLoopResult } from '../agent/loop.js';
import { buildReviewRequest, buildSystemPrompt, CHECKER_RULES } from '../agent/prompt.js';
import { createReviewToolRegistry } from '../agent/tools/tool-registry.js';
import type { SubmittedReview } from '../agent/tools/submit-review.js';
import { CATALOG_SANDBOX_PATH } from '../catalog/load.js';
import { hostMode, type ChangeSet } from '../changes/change-set.js';
import { changeSetPatch } from '../changes/patch.js';
import type { Message, ModelProvider } from '../llm/types.js';
import type { ReviewRecord } from '../runs/record.js';
import type { Run } from './types.js';
import { formatTestRun, tail, type TestRun } from './test-layers.js';

export interface Review {
  record: ReviewRecord;
  /** What the next attempt's model is told, when changes were requested. */
  feedback?: string;
}

/** The reasons, as the maker reads them next. */
export function reviewFeedback(review: SubmittedReview): string {
  return [
    'Your change passed the tests in a fresh sandbox, but an independent reviewer requested changes:',
    review.summary,
    ...review.reasons.map(
      (r) =>
        `- ${[r.file, r.rule ? `rule ${r.rule}` : undefined].filter(Boolean).join(', ')}${r.file || r.rule ? ': ' : ''}${r.text}`,
    ),
    'Address every reason; the tests must still pass.',
  ].join('\n');
}

export async function reviewChange(
  run: Run,
  checker: ModelProvider,
  n: number,
  round: number,
  changeSet: ChangeSet,
  tests: TestRun,
  repoAgentsMd: string | undefined,
  heldOut: readonly string[] = [],
): Promise<Review> {
  const started = Date.now();
  const review = run.catalog.catalog.agent.review;
  run.journal.append({ kind: 'review_start', attempt: n, round });
  // The checker's reasons go to the maker verbatim, so it sees no more of the held-out
  // tests than the maker does: not their files, not the output of a run that had them.
  const box = await run.sandboxes.create(
    `review-${n}`,
    heldOut.length > 0 ? { hidden: [...heldOut] } : {},
    true,
  );
  const capture: { review?: SubmittedReview } = {};
  const messages: Message[] = [];
  try {
    await box.writeFiles(
      changeSet.entries
        .filter((e) => e.content !== undefined)
        .map((e) => ({ path: e.path, content: e.content!, mode: hostMode(e.mode ?? 0o644) & 0o777 })),
      { signal: run.signal },
    );
    const system = checkerSystem(run, repoAgentsMd);
    run.transcript.push({ attempt: n, role: 'checker', system, messages });
    const loop = await runAgentLoop({
      sandbox: box,
      provider: checker,
      tools: createReviewToolRegistry(capture, {
        defaultCommandTimeoutSec: run.catalog.catalog.sandbox.timeouts.commandSec,
      }),
      system,
      firstUserMessage: buildReviewRequest({
        ticket: { id: run.ticket.id, title: run.ticket.title, body: run.ticket.body },
        patch: changeSetPatch(changeSet),
        testOutput:
          heldOut.length > 0
            ? 'The tests pass in a fresh sandbox, held-out tests included. Their output is not shown: it would name the held-out tests.'
            : tail(formatTestRun(tests), 4096),
      }),
      limits: { maxTurns: review?.maxTurns ?? 12, costExceeded: () => run.costs.exceeded() },
      events: nestedSink(run.events, 'checker', `review-${n}`),
      signal: run.signal,
      attempt: n,
      messages,
    });
    const { submitted, record } = checkerVerdict(capture.review, loop, round, started);
    // The checker's turns and tokens count into the run's (the fold adds them).
    run.journal.append({
      kind: 'review',
      review: record,
      attempt: n,
      status: submitted.verdict,
      durationMs: record.durationMs,
      message: submitted.summary,
    });
    return {
      record,
      ...(submitted.verdict === 'request-changes' ? { feedback: reviewFeedback(submitted) } : {}),
    };
  } finally {
    await run.sandboxes.release(box);
  }
}

/** The checker's system prompt: its own rules, the catalog's, AGENTS.md; no word of the maker's. */
function checkerSystem(run: Run, repoAgentsMd: string | undefined): string {
  return buildSystemPrompt({
    harnessRules: CHECKER_RULES,
    ...(repoAgentsMd ? { repoAgentsMd } : {}),
    rules: Object.entries(run.catalog.catalog.rules).map(([name, rule]) => ({ name, ...rule })),
    editableFiles: run.catalog.catalog.agent.editableFiles,
    testCommands: run.record.testCommand.map((l) => l.command),
    catalogPathInSandbox: CATALOG_SANDBOX_PATH,
  });
}

/** What the checker submitted (a checker that gave no verdict has not approved), as the record keeps it. */
function checkerVerdict(
  review: SubmittedReview | undefined,
  loop: AgentLoopResult,
  round: number,
  started: number,
): { submitted: SubmittedReview; record: ReviewRecord } {
  const submitted: SubmittedReview = review ?? {
    verdict: 'request-changes',
    summary: `the checker gave no verdict (its loop ended: ${loop.status})`,
    reasons: [{ text: 'no review was submitted' }],
  };
  const record: ReviewRecord = {
    round,
    verdict: submitted.verdict,
    summary: submitted.summary,
    reasons: submitted.reasons.map((r) => ({
      ...(r.file ? { file: r.file } : {}),
      ...(r.rule ? { rule: r.rule } : {}),
      text: r.text,
    })),
    turns: loop.turns,
    inputTokens: loop.usage.inputTokens,
    outputTokens: loop.usage.outputTokens,
    durationMs: Date.now() - started,
  };
  return { submitted, record };
}
