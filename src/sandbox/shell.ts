/** Quotes one argument for `sh -c`, so text from the model or a catalog is never parsed as shell. */
export function shellQuote(value: string): string {
  if (value === '') return "''";
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(args: string[]): string {
  return args.map(shellQuote).join(' ');
}
