/**
 * A recorded bridge session played back with no provider: a cassette for third-party agents.
 * The agent's model calls are answered in order by the exchanges that were answered in the
 * recording (refused ones were never the provider's, and are refused again by the bridge's
 * own checks). A call must name the same API, model and streaming mode as the one recorded
 * in its place; anything else is a mismatch the agent sees as an error and the bridge
 * reports, never a silent answer to another question.
 */
import type { CheckedRequest, ProviderFamily } from './checks.js';
import { familyOf } from './checks.js';
import type { BridgeExchange } from './transcript.js';
import { fromChunks, type Upstream, type UpstreamResponse } from './upstream.js';

/** The agent asked something other than what the recording holds at this point. */
export class ReplayMismatch extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayMismatch';
  }
}

/** A recorded answer's text in the pieces it would have streamed in (one event each). */
function pieces(text: string, stream: boolean): Buffer[] {
  if (!stream) return [Buffer.from(text)];
  const events = text.split(/(?<=\n\n)/);
  return events.filter((event) => event.length > 0).map((event) => Buffer.from(event));
}

export class ReplayUpstream implements Upstream {
  readonly families: ReadonlySet<ProviderFamily>;
  private readonly answers: BridgeExchange[];
  private next = 0;

  constructor(exchanges: readonly BridgeExchange[]) {
    this.answers = exchanges.filter((exchange) => exchange.outcome === 'answered');
    this.families = new Set(
      this.answers.flatMap((exchange) => (exchange.api ? [familyOf(exchange.api)] : [])),
    );
  }

  /** Recorded answers not played yet. */
  remaining(): number {
    return this.answers.length - this.next;
  }

  async send(request: CheckedRequest): Promise<UpstreamResponse> {
    const recorded = this.answers[this.next];
    const call = `model call ${this.next + 1}`;
    if (!recorded) {
      throw new ReplayMismatch(
        `${call}: the recording holds only ${this.answers.length} answered call(s); the agent asked for more`,
      );
    }
    const asked = `${request.api} ${request.model}${request.stream ? ' (streamed)' : ''}`;
    const held = `${recorded.api} ${recorded.model}${recorded.stream ? ' (streamed)' : ''}`;
    if (asked !== held)
      throw new ReplayMismatch(`${call}: the agent asked ${asked}; the recording holds ${held}`);
    if (recorded.response.truncated) {
      throw new ReplayMismatch(
        `${call}: the recorded answer was cut at the record cap and cannot be replayed`,
      );
    }
    this.next += 1;
    return {
      status: recorded.response.status,
      ...(recorded.response.contentType ? { contentType: recorded.response.contentType } : {}),
      headers: [],
      body: fromChunks(pieces(recorded.response.text, recorded.stream === true)),
    };
  }
}
