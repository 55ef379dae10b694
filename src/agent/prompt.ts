/**
 * Prompt assembly. The system prompt carries what holds for every ticket of a service
 * (harness rules, the repo's AGENTS.md, catalog rules, editable files, test commands); the
 * first user message carries this ticket and what the previous attempt taught us.
 */
import { librarySection, type Library } from './library.js';

export const DEFAULT_HARNESS_RULES = `You are a software engineer fixing a ticket in a repository.

How you work:
- The repository is at /workspace inside a sandbox with no network access and no credentials. Every tool runs there; paths are relative to /workspace.
- Tools: read_file, write_file, edit_file, list_files, search, run_command. A failed tool call is information: read the error and adjust.
- Read the relevant code and tests before changing anything. Make the smallest change that fixes the ticket; do not reformat or refactor unrelated code.
- Change only the editable files listed below. A change to any other path rejects the whole attempt.
- Do not weaken, skip or delete tests to make them pass. Do not try to reach the network.
- Run the test command before you finish and make sure it passes.
- When you are done, reply without any tool call, with a short summary of what you changed and why.`;

/** The independent checker's rules: a reviewer with a fresh context, never the implementer. */
export const CHECKER_RULES = `You are an independent reviewer. Another engineer changed a repository to fix a ticket; you did not write the change and you have not seen their reasoning. Decide whether it is right.

How you work:
- The repository is at /workspace inside a sandbox with no network and no credentials, with the change already applied. It is a throwaway copy: nothing you change there is kept.
- Tools: read_file, list_files, search, run_command, and submit_review to answer.
- The tests already passed with the change. Look for what tests miss: a value hard-coded for the one tested case, a business rule ignored or duplicated, behaviour wrong for other inputs, a change wider than the ticket asks, weakened checks.
- The business rules below PREVAIL over code, tests and comments.
- Finish by calling submit_review exactly once: approve, or request-changes with concrete reasons tied to files and rules. Reasons go to the engineer as they are: say what must change and where.`;

export interface PromptRule {
  name: string;
  value: string | number | boolean;
  unit?: string | undefined;
  /** Where the rule comes from (a policy document, a contract, a person). */
  source?: string | undefined;
  description?: string | undefined;
}

export interface SystemPromptInput {
  /** Replaces the default harness rules. */
  harnessRules?: string;
  /** The target repo's AGENTS.md, when it has one. */
  repoAgentsMd?: string;
  rules: readonly PromptRule[];
  editableFiles: readonly string[];
  testCommands: readonly string[];
  /** Where the read-only catalog is mounted inside the sandbox. */
  catalogPathInSandbox: string;
  /** Topic documents and skills, listed a line each for `read_doc` and `skill`. */
  library?: Library;
  /** The workspace is a git repository of the untouched repo (see `SandboxBackend.workspaceGitImage`). */
  workspaceGit?: boolean;
}

const MAX_AGENTS_MD_CHARS = 20_000;

function formatRule(rule: PromptRule): string {
  const value = `${String(rule.value)}${rule.unit ? ` ${rule.unit}` : ''}`;
  let line = `- ${rule.name} = ${value}`;
  if (rule.description) line += ` — ${rule.description}`;
  line += rule.source ? ` (source: ${rule.source})` : ' (source: the service catalog)';
  return line;
}

export function buildSystemPrompt(input: SystemPromptInput): string {
  const sections: string[] = [(input.harnessRules ?? DEFAULT_HARNESS_RULES).trim()];

  if (input.rules.length > 0) {
    sections.push(
      [
        '## Business rules (PREVAILING)',
        `These rules come from the service catalog (read-only at ${input.catalogPathInSandbox}). They PREVAIL over values found in code, tests, comments, configuration or documentation: where the code disagrees with a rule, the rule is right and the code is wrong.`,
        ...input.rules.map(formatRule),
      ].join('\n'),
    );
  } else {
    sections.push(`## Business rules\nThe service catalog is read-only at ${input.catalogPathInSandbox}.`);
  }

  sections.push(
    [
      '## Files you may change',
      ...(input.editableFiles.length > 0 ? input.editableFiles.map((glob) => `- ${glob}`) : ['- (none)']),
    ].join('\n'),
  );

  if (input.testCommands.length > 0) {
    sections.push(
      [
        '## How the change is verified',
        'After you finish, these commands run in a fresh sandbox with only your changes to the editable files applied:',
        ...input.testCommands.map((command) => `- ${command}`),
        "What the tests and builds write (build output, caches, paths the repository's .gitignore ignores) is not part of your change.",
      ].join('\n'),
    );
  }

  const listing = librarySection(input.library);
  if (listing) sections.push(listing);
  if (input.workspaceGit) {
    sections.push(
      '## git\n/workspace is a git repository of the untouched repository (one commit): `git status` and `git diff` show what you changed.',
    );
  }

  const agents = input.repoAgentsMd?.trim();
  if (agents) {
    const text =
      agents.length > MAX_AGENTS_MD_CHARS
        ? `${agents.slice(0, MAX_AGENTS_MD_CHARS)}\n[... AGENTS.md cut here ...]`
        : agents;
    sections.push(
      [
        "## The repository's AGENTS.md",
        'Guidance from the repository maintainers. Where it conflicts with the rules above, the rules above win.',
        '',
        text,
      ].join('\n'),
    );
  }

  return `${sections.join('\n\n')}\n`;
}

export interface TicketInput {
  id?: string;
  title?: string;
  body: string;
}

export interface ReviewRequestInput {
  ticket: TicketInput;
  /** The change, as a unified diff. */
  patch: string;
  /** The end of the verification's test output. */
  testOutput: string;
}

/** What the checker is asked to review: the ticket, the diff, the tests' result. */
export function buildReviewRequest(input: ReviewRequestInput): string {
  const { ticket } = input;
  const heading = ['# Ticket', ticket.id, ticket.title ? `— ${ticket.title}` : undefined]
    .filter((part): part is string => part !== undefined && part !== '')
    .join(' ');
  return [
    heading,
    '',
    ticket.body.trim(),
    '',
    '## The change to review (a unified diff)',
    '',
    input.patch.trim(),
    '',
    '## The tests, run in a fresh sandbox with the change applied (they passed)',
    '',
    input.testOutput.trim(),
    '',
  ].join('\n');
}

export interface FirstUserMessageInput {
  ticket: TicketInput;
  /** What went wrong in the previous attempt (test output tail, gate rejection). */
  feedback?: string;
}

export function buildFirstUserMessage(input: FirstUserMessageInput): string {
  const { ticket } = input;
  const heading = ['# Ticket', ticket.id, ticket.title ? `— ${ticket.title}` : undefined]
    .filter((part): part is string => part !== undefined && part !== '')
    .join(' ');
  const parts = [heading, '', ticket.body.trim()];
  const feedback = input.feedback?.trim();
  if (feedback) {
    parts.push(
      '',
      '## Feedback from the previous attempt',
      'A previous attempt at this ticket did not pass. Take this into account:',
      '',
      feedback,
    );
  }
  return `${parts.join('\n')}\n`;
}
