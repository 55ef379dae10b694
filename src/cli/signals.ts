/**
 * Ctrl-C handling: the first SIGINT/SIGTERM aborts the shared signal so the running command
 * can stop its model call and sandbox command, keep or remove containers per policy and
 * write its record; a second one exits at once (the host repo is only ever written
 * atomically, so exiting mid-way still leaves it whole).
 */
export function installInterruptHandler(onSecond: () => void): AbortController {
  const controller = new AbortController();
  let count = 0;
  const handler = (signal: NodeJS.Signals) => {
    count += 1;
    if (count === 1) {
      process.stderr.write(
        `\n${signal === 'SIGINT' ? 'Ctrl-C' : signal}: stopping (press Ctrl-C again to quit at once)\n`,
      );
      controller.abort();
    } else {
      onSecond();
    }
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return controller;
}
