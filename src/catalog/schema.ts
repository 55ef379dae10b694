/**
 * The service catalog (`catalog/<service>.yaml`): business rules, what the agent may edit,
 * how to test, and how to build the sandbox. Every object is strict because a typo in a
 * key (`editableFile:`) would otherwise silently drop a rule or widen nothing. The sections
 * are in their own files (`agent-schema.ts`, `sandbox-schema.ts`, `egress-schema.ts`), built
 * from the checks in `field-checks.ts`; the catalog's types are all here.
 *
 * Custom messages here follow the convention of `src/yaml-validate.ts`: for type/range checks
 * they are the "expected …" clause; for refinements they are the whole sentence.
 */
import { z } from 'zod';
import { agentSchema, testLayerSchema } from './agent-schema.js';
import { PROVIDER_NAMES } from '../llm/provider-registry.js';
import type { egressSchema } from './egress-schema.js';
import { nonEmpty, typeError } from './field-checks.js';
import {
  sandboxSchema,
  type buildSchema,
  type resourcesSchema,
  type setupSchema,
  type timeoutsSchema,
} from './sandbox-schema.js';

export const ruleSchema = z
  .strictObject(
    {
      value: z.union([z.number(), z.string(), z.boolean()], {
        error: 'expected a number, string or boolean',
      }),
      unit: z.string({ error: 'expected a unit such as "EUR" or "days"' }).optional(),
      source: z.string({ error: 'expected where the rule comes from (a document, a person)' }).optional(),
      description: z.string({ error: 'expected a description' }).optional(),
    },
    { error: typeError('expected a rule such as {value: 50, unit: EUR}') },
  )
  .meta({ description: 'A business rule the agent must respect; tests in the sandbox can read it too.' });

export const providerSchema = z.strictObject({
  name: z.enum(PROVIDER_NAMES, { error: 'expected one of "anthropic", "openai" or "replay"' }),
  model: nonEmpty('a model name').optional(),
});

export const catalogSchema = z
  .strictObject({
    name: z.string({ error: 'expected a service name' }).regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
      error: 'expected a service name of letters, digits, ".", "_" or "-"',
    }),
    owner: nonEmpty('the owning team or person'),
    description: z.string({ error: 'expected a description' }).optional(),
    repo: nonEmpty('the path of the service repo, relative to this catalog file').meta({
      description: 'Path of the service repo, relative to this catalog file.',
    }),
    // Optional: a service without business rules yet still has a catalog.
    rules: z
      .record(z.string(), ruleSchema, {
        error: 'expected a mapping of rule name: {value, unit, source}',
      })
      .default({}),
    agent: agentSchema,
    sandbox: sandboxSchema.prefault({}),
    provider: providerSchema.optional(),
  })
  .meta({
    title: 'sandbox-harness service catalog',
    description: 'Business rules, editable files, test command and sandbox of one service.',
  })
  .superRefine((catalog, ctx) => {
    const command = catalog.agent.testCommand;
    if (catalog.sandbox.setup && typeof command !== 'string') {
      const at = command.findIndex((layer) => layer.name === SETUP_LAYER);
      if (at >= 0)
        ctx.addIssue({
          code: 'custom',
          path: ['agent', 'testCommand', at, 'name'],
          message: `"${SETUP_LAYER}" is the name of sandbox.setup's layer in a verification; name this layer otherwise`,
        });
    }
    if (catalog.agent.steps && !catalog.agent.reward)
      ctx.addIssue({
        code: 'custom',
        path: ['agent', 'steps'],
        message: 'steps need agent.reward: each step is decided by the reward its verifier leaves',
      });
  });

export type Catalog = z.output<typeof catalogSchema>;
export type CatalogInput = z.input<typeof catalogSchema>;
export type Rule = z.output<typeof ruleSchema>;
export type TestLayer = z.output<typeof testLayerSchema>;
export type AgentConfig = z.output<typeof agentSchema>;
export type SandboxConfig = z.output<typeof sandboxSchema>;
export type BuildConfig = z.output<typeof buildSchema>;
export type SandboxTimeouts = z.output<typeof timeoutsSchema>;
export type ResourcesConfig = z.output<typeof resourcesSchema>;
export type ProviderConfig = z.output<typeof providerSchema>;
export type EgressConfig = z.output<typeof egressSchema>;
export type SetupConfig = z.output<typeof setupSchema>;

/** The name of the layer the setup command runs as in a verification (`verificationLayers`). */
export const SETUP_LAYER = 'setup';

/** The test command as layers; a single command is one layer called `test`. */
export function testLayers(catalog: { agent: Pick<AgentConfig, 'testCommand'> }): TestLayer[] {
  const command = catalog.agent.testCommand;
  return typeof command === 'string' ? [{ name: 'test', command }] : command.map((layer) => ({ ...layer }));
}

/**
 * What a verification and the baseline run, in order: the catalog's setup (`sandbox.setup`)
 * as a first layer, then the test layers. The agent is told the test layers only: its
 * sandbox starts from the setup's result.
 */
export function verificationLayers(catalog: {
  agent: Pick<AgentConfig, 'testCommand'>;
  sandbox: Pick<SandboxConfig, 'setup'>;
}): TestLayer[] {
  const setup = catalog.sandbox.setup;
  return setup
    ? [{ name: SETUP_LAYER, command: setup.command }, ...testLayers(catalog)]
    : testLayers(catalog);
}
