/**
 * Waiting for a condition instead of for a fixed time: a test acts when the thing it needs
 * has happened (a request arrived, a process runs), however loaded the machine is.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 10));
  }
}
