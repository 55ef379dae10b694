/**
 * The catalog's `agent.mcpServers`: MCP tool servers (stdio programs of the sandbox image)
 * that run inside the attempt sandbox, never on the host. Their tools are offered to the
 * built-in loop as `<server>__<tool>` and handed to CLI agents that speak MCP as their own
 * configuration (src/mcp/).
 */
import { z } from 'zod';
import { hasControlCharacter, int, variables } from './field-checks.js';

/**
 * A server's name is the prefix of its tools' names (`<server>__<tool>`), which the model
 * APIs limit to letters, digits, `_` and `-`: short, lowercase, no `__` of its own, so a
 * tool name says unambiguously whose it is.
 */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,23}$/;

const argument = z
  .string({ error: 'expected a string' })
  .refine((value) => !hasControlCharacter(value) && !value.includes('\0'), {
    error: 'must not contain control characters',
  });

export const mcpServerSchema = z.strictObject({
  command: argument
    .refine((value) => value.trim() !== '', { error: 'expected a program name or path' })
    .meta({
      description:
        'The program, as the sandbox image has it (on its PATH or an absolute path), started as the sandbox user in /workspace. It speaks MCP over stdin and stdout.',
    }),
  args: z.array(argument, { error: 'expected a list of arguments' }).max(100).default([]).meta({
    description: 'Its arguments, each passed as one word (no shell).',
  }),
  env: variables('environment variable').optional().meta({
    description: 'Extra variables for this server only (never a secret: sandboxes hold no credentials).',
  }),
  startupTimeoutSec: int(1, 300).default(30).meta({
    description: 'How long the server has to start and list its tools; past it the attempt ends `error`.',
  }),
  callTimeoutSec: int(1, 3600).default(120).meta({
    description: 'How long one tool call may take; past it the model gets an error result.',
  }),
});

export const mcpServersSchema = z
  .record(
    z.string().regex(MCP_SERVER_NAME, {
      error:
        'expected a server name of lowercase letters, digits and "-" (at most 24, starting with a letter)',
    }),
    mcpServerSchema,
    { error: 'expected a mapping of server name: {command, args}' },
  )
  .refine((servers) => Object.keys(servers).length <= 16, { error: 'expected at most 16 servers' })
  .meta({
    description:
      "MCP servers (stdio) that run inside the attempt sandbox, never on the host, by name. The built-in agent gets their tools as `<name>__<tool>` (input checked against the tool's schema, results capped like every tool result, the server's output read as hostile data); claude-code and codex get them as their own MCP configuration; the command agent finds that configuration (Claude's JSON shape) at $SANDBOX_HARNESS_MCP_CONFIG.",
  });

export type McpServerConfig = z.output<typeof mcpServerSchema>;
