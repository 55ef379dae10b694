/**
 * Records live conversations in the cassette format of `replay.ts` (for `fix --record`), so
 * that a real session can be replayed offline later. One `CassetteRecorder` per run; each
 * role's provider is wrapped by it and adds to that role's queue.
 */
import { writeFileAtomic } from '../atomic-write.js';
import type { Cassette, CassetteTurn, RoleTape } from './replay.js';
import {
  MODEL_ROLES,
  type Completion,
  type CompletionRequest,
  type ModelProvider,
  type ModelRole,
} from './types.js';

export class CassetteRecorder {
  private readonly tapes = new Map<ModelRole, { model: string; turns: CassetteTurn[] }>();

  /** A provider that answers like `inner` and records each answer under `role`. */
  wrap(inner: ModelProvider, role: ModelRole = 'main', label: string = inner.model): RecordingProvider {
    return new RecordingProvider(inner, label, this, role);
  }

  add(role: ModelRole, label: string, completion: Completion): void {
    let tape = this.tapes.get(role);
    if (!tape) {
      tape = { model: label, turns: [] };
      this.tapes.set(role, tape);
    }
    tape.turns.push({
      content: structuredClone(completion.content),
      stopReason: completion.stopReason,
      usage: { ...completion.usage },
    });
  }

  turns(role: ModelRole): CassetteTurn[] {
    return this.tapes.get(role)?.turns ?? [];
  }

  /**
   * Version 1 while only the main agent spoke, so a plain recording stays readable by every
   * version of the harness; version 2, one queue per role, as soon as another role did.
   */
  toCassette(): Cassette {
    const main = this.tapes.get('main');
    const others = [...this.tapes.keys()].filter((role) => role !== 'main');
    if (others.length === 0) {
      return { version: 1, model: main?.model ?? 'recorded', turns: structuredClone(main?.turns ?? []) };
    }
    const roles: Partial<Record<ModelRole, RoleTape>> = {};
    for (const role of MODEL_ROLES) {
      const tape = this.tapes.get(role);
      if (tape) roles[role] = structuredClone(tape);
    }
    return { version: 2, model: (main ?? [...this.tapes.values()][0])?.model ?? 'recorded', roles };
  }

  /** Writes the cassette atomically: a reader sees the old file or the whole new one. */
  async save(file: string): Promise<void> {
    await writeFileAtomic(file, `${JSON.stringify(this.toCassette(), null, 2)}\n`);
  }
}

export class RecordingProvider implements ModelProvider {
  constructor(
    private readonly inner: ModelProvider,
    /** The role's `model` label in the cassette; the wrapped provider's model by default. */
    private readonly label: string = inner.model,
    /** Shared by all roles of a run; a recorder of its own by default. */
    readonly recorder: CassetteRecorder = new CassetteRecorder(),
    readonly role: ModelRole = 'main',
  ) {}

  get name(): string {
    return this.inner.name;
  }

  get model(): string {
    return this.inner.model;
  }

  get turns(): CassetteTurn[] {
    return this.recorder.turns(this.role);
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    // Only answers are recorded: a failed call has nothing to replay.
    const completion = await this.inner.complete(request);
    this.recorder.add(this.role, this.label, completion);
    return completion;
  }

  countTokens(request: CompletionRequest): Promise<number> {
    return this.inner.countTokens(request);
  }

  toCassette(): Cassette {
    return this.recorder.toCassette();
  }

  save(file: string): Promise<void> {
    return this.recorder.save(file);
  }
}
