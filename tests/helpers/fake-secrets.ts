/**
 * Values in the exact formats the secret scan looks for, none of them real. They are built
 * at run time so no file of this repo holds one (the repo's own image builds stay clean).
 */
import { randomBytes } from 'node:crypto';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const B64 = `${ALNUM}+/`;

/** `n` characters of `alphabet`, fixed for a given seed (tests compare exact values). */
export function pseudoRandom(alphabet: string, n: number, seed = 7): string {
  return Array.from(
    { length: n },
    (_, i) => alphabet[(i * 31 + seed * 17 + ((i * i) % 13)) % alphabet.length],
  ).join('');
}

/** A fresh random value each call: a canary nobody else can have written anywhere. */
export function canaryToken(): string {
  const bytes = randomBytes(64);
  return `sk-ant-api03-${Array.from(bytes, (b) => ALNUM[b % ALNUM.length]).join('')}`;
}

/** One value per format, keyed by what the scan calls it. */
export const TOKENS: Readonly<Record<string, string>> = {
  'an Anthropic API key': `sk-ant-api03-${pseudoRandom(ALNUM, 80)}`,
  'an OpenAI API key': `sk-proj-${pseudoRandom(ALNUM, 60)}`,
  'a GitHub token': `ghp_${pseudoRandom(ALNUM, 36)}`,
  'a GitLab token': `glpat-${pseudoRandom(ALNUM, 20)}`,
  'a Slack token or webhook': `xoxb-123456789012-${pseudoRandom(ALNUM, 24)}`,
  'a Google API key': `AIza${pseudoRandom(ALNUM, 35)}`,
  'an npm token': `npm_${pseudoRandom(ALNUM, 36)}`,
  'an AWS access key id': `AKIA${pseudoRandom(B32, 16)}`,
  'a Stripe secret key': `sk_live_${pseudoRandom(ALNUM, 30)}`,
  'a private key (PEM block)': [
    `-----BEGIN ${'RSA'} PRIVATE KEY-----`,
    pseudoRandom(B64, 64, 3),
    pseudoRandom(B64, 64, 5),
    `-----END ${'RSA'} PRIVATE KEY-----`,
  ].join('\n'),
};
