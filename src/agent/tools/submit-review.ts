import { z } from 'zod';
import { defineTool, type AgentTool } from './types.js';

export const reviewSchema = z.object({
  verdict: z.enum(['approve', 'request-changes']).describe('approve, or request-changes with reasons'),
  summary: z.string().trim().min(1).describe('One or two sentences: what the change does and your verdict'),
  reasons: z
    .array(
      z.object({
        file: z.string().optional().describe('The file a reason is about, when it is about one'),
        rule: z.string().optional().describe('The catalog rule it is about, when it is about one'),
        text: z.string().trim().min(1).describe('What is wrong (or what is right), concretely'),
      }),
    )
    .describe('Why; required when requesting changes, tied to files and catalog rules'),
});

export type SubmittedReview = z.output<typeof reviewSchema>;

/**
 * The checker's answer, as a tool so that every provider (replay included) gives a
 * structured verdict. The verdict lands in `capture`; the loop ends after the call.
 */
export function submitReviewTool(capture: { review?: SubmittedReview }): AgentTool {
  return defineTool({
    name: 'submit_review',
    description:
      'Submit your verdict on the change, once, when you have checked it: approve, or request-changes with reasons tied to files and catalog rules. This ends your review.',
    input: reviewSchema,
    async run(review) {
      if (review.verdict === 'request-changes' && review.reasons.length === 0) {
        return {
          content: 'request-changes needs at least one reason: say what must change and where',
          isError: true,
        };
      }
      capture.review = review;
      return { content: `review submitted: ${review.verdict}`, isError: false, endsLoop: true };
    },
  });
}
