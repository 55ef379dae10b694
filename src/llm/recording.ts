/**
 * Records a live conversation in the cassette format of `replay.ts` (for `fix --record`),
 * so that a real session can be replayed offline later.
 */
import { writeFileAtomic } from '../atomic-write.js';
import { CASSETTE_VERSION, type Cassette, type CassetteTurn } from './replay.js';
import type { Completion, CompletionRequest, ModelProvider } from './types.js';

export class RecordingProvider implements ModelProvider {
  readonly turns: CassetteTurn[] = [];

  constructor(
    private readonly inner: ModelProvider,
    /** The cassette's `model` label; the wrapped provider's model by default. */
    private readonly label: string = inner.model,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  get model(): string {
    return this.inner.model;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    // Only answers are recorded: a failed call has nothing to replay.
    const completion = await this.inner.complete(request);
    this.turns.push({
      content: structuredClone(completion.content),
      stopReason: completion.stopReason,
      usage: { ...completion.usage },
    });
    return completion;
  }

  countTokens(request: CompletionRequest): Promise<number> {
    return this.inner.countTokens(request);
  }

  toCassette(): Cassette {
    return { version: CASSETTE_VERSION, model: this.label, turns: structuredClone(this.turns) };
  }

  /** Writes the cassette atomically: a reader sees the old file or the whole new one. */
  async save(file: string): Promise<void> {
    await writeFileAtomic(file, `${JSON.stringify(this.toCassette(), null, 2)}\n`);
  }
}
