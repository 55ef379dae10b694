/**
 * One way to compare the names a request carries (CONNECT target, TLS server name, Host header,
 * absolute URI): IDNA to A-labels as a URL parser does, then the policy's normalisation (lower
 * case, no trailing dot, DNS characters only). Two spellings are the same name only when both
 * normalise, and to the same thing.
 */
import { domainToASCII } from 'node:url';
import { normaliseHost } from '../../egress-policy.js';

export function comparableName(raw: string): string | undefined {
  if (raw.length === 0 || raw.length > 1024) return undefined;
  // ASCII names stay as they are (domainToASCII would also accept what the policy refuses).
  const ascii = /^[\x21-\x7e]+$/.test(raw) ? raw : domainToASCII(raw);
  return ascii === '' ? undefined : normaliseHost(ascii);
}

/** `name` or `name:port` of a Host header (RFC 9110 7.2); undefined when it is neither. */
export function parseHostHeader(value: string): { name: string; port?: number } | undefined {
  const match = /^([^\s:/?#@[\]\\]+)(?::(\d{1,5}))?$/.exec(value);
  if (!match) return undefined;
  const name = comparableName(match[1]!);
  if (!name) return undefined;
  if (match[2] === undefined) return { name };
  const port = Number(match[2]);
  return port >= 1 && port <= 65535 ? { name, port } : undefined;
}
