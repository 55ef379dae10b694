import { ReplayProvider } from '../../../src/llm/replay.js';
import type {
  AssistantContent,
  Completion,
  CompletionRequest,
  ModelProvider,
  StopReason,
  Usage,
} from '../../../src/llm/types.js';

export interface Turn {
  content: AssistantContent[];
  stopReason?: StopReason;
  usage?: Usage;
}

/** A replay provider over turns written inline (stopReason inferred from the content). */
export function scripted(turns: Turn[]): ReplayProvider {
  return new ReplayProvider({
    version: 1,
    model: 'scripted',
    turns: turns.map((turn) => ({
      content: turn.content,
      stopReason:
        turn.stopReason ??
        (turn.content.some((block) => block.type === 'tool_use') ? 'tool_use' : 'end_turn'),
      usage: turn.usage ?? { inputTokens: 10, outputTokens: 5 },
    })),
  });
}

export function toolUse(id: string, name: string, input: unknown): AssistantContent {
  return { type: 'tool_use', id, name, input };
}

export function text(value: string): AssistantContent {
  return { type: 'text', text: value };
}

/** A model that never stops asking for the same command. */
export class LoopingProvider implements ModelProvider {
  readonly name = 'looping';
  readonly model = 'looping';
  calls = 0;
  async complete(_request: CompletionRequest): Promise<Completion> {
    this.calls++;
    return {
      content: [
        { type: 'tool_use', id: `loop_${this.calls}`, name: 'run_command', input: { command: 'true' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 1, outputTokens: 1 },
      model: this.model,
    };
  }
  async countTokens(): Promise<number> {
    return 1;
  }
}
