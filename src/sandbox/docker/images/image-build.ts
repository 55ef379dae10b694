/**
 * One image build on an engine, explained when it fails: the step it failed at, the last
 * lines of that step's output and where the full log is, never the whole builder output.
 */
import { Interrupted, ImageError, SandboxUnavailable } from '../../../errors.js';
import type { BuildContext } from '../../../image-context/build-context.js';
import { statusOf, type DockerEngine } from '../engine/index.js';
import { LABEL } from '../labels.js';
import type { LogFile } from './build-log.js';

/** Keeps the current `Step N/M : ...` line and the output since, to explain a failure. */
class StepTracker {
  step: string | undefined;
  private lines: string[] = [];

  push(line: string): void {
    if (/^Step \d+\/\d+ : /.test(line)) {
      this.step = line;
      this.lines = [];
      return;
    }
    // Builder chatter, not output of the step.
    if (/^ ---> |^Removing intermediate container /.test(line)) return;
    this.lines.push(line);
    if (this.lines.length > 200) this.lines.shift();
  }

  lastLines(count: number): string[] {
    return this.lines.slice(-count);
  }
}

function shorten(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export interface RunBuildOptions {
  tag: string;
  buildArgs: Record<string, string>;
  labels: Record<string, string>;
  noCache: boolean;
  onLine?: ((line: string) => void) | undefined;
  log: LogFile;
  /** For the hint: which recipe failed (`/repo/Dockerfile.sandbox`, `images/node/Dockerfile`). */
  recipe: string;
  /**
   * `none`: build steps have no network (resolving a name fails at once); a network's name:
   * the build's egress network. Default: the daemon's.
   */
  networkMode?: string | undefined;
  /** Added to the hint of a failed build (what else could be wrong). */
  failureNote?: string | undefined;
  /** The base image the build starts from, named in every failure ("pip: not found" on which base?). */
  baseImage?: string | undefined;
  signal?: AbortSignal | undefined;
}

export async function runBuild(
  engine: DockerEngine,
  context: BuildContext,
  options: RunBuildOptions,
): Promise<string> {
  const tracker = new StepTracker();
  const { stream, done } = context.createTar();
  let imageId: string;
  try {
    imageId = await engine.images.build(stream, {
      tag: options.tag,
      dockerfile: context.dockerfileInContext,
      buildArgs: options.buildArgs,
      labels: options.labels,
      noCache: options.noCache,
      networkMode: options.networkMode,
      signal: options.signal,
      onLine: (line) => {
        tracker.push(line);
        options.log.line(line);
        options.onLine?.(line);
      },
    });
  } catch (error) {
    // Ctrl-C (the engine reports it as Interrupted) is not the recipe's fault.
    if (error instanceof Interrupted) throw error;
    const tarError = await done.then(
      () => undefined,
      (e: unknown) => e,
    );
    if (tarError) throw tarError;
    // An unreachable daemon is not the recipe's fault; a refusal the daemon answered is.
    if (error instanceof SandboxUnavailable && statusOf(error.cause) === undefined) throw error;
    const reason = (error instanceof Error ? error.message : String(error))
      .replace(/^building \S+: /, '')
      .replace(/^\(HTTP code \d+\) [\w ]+ - /, '')
      // The step line above already shows the command; the legacy builder repeats it in full.
      .replace(
        /^The command '[\s\S]*' returned a non-zero code: (\d+)$/,
        'the command of that step exited with code $1',
      );
    options.log.line(`error: ${reason}`);
    const last = tracker
      .lastLines(21)
      .filter(
        (l) => !/^The command '[\s\S]*' returned a non-zero code: \d+$/.test(l) && l.trim() !== reason.trim(),
      )
      .slice(-20);
    throw new ImageError(
      [
        `building ${options.tag}${options.baseImage ? ` on ${options.baseImage}` : ''} failed at ${tracker.step ? shorten(tracker.step) : 'the start (before the first step)'}`,
        `  ${reason}`,
        ...(last.length ? ['last output lines:', ...last.map((l) => `  | ${shorten(l, 300)}`)] : []),
        `full log: ${options.log.path}`,
      ].join('\n'),
      {
        hint: `Fix ${options.recipe} (or what that step needs), then run again; the full build log is ${options.log.path}.${options.baseImage && options.labels[LABEL.kind] === 'repo' ? ` The build ran on ${options.baseImage}: if the step needs another toolchain, choose the base with sandbox.baseImage in the catalog (or the recipe's ARG BASE_IMAGE default).` : ''}${options.failureNote ? ` ${options.failureNote}` : ''}`,
        cause: error,
        details: {
          step: tracker.step,
          lastLines: last,
          logFile: options.log.path,
          ...(options.baseImage ? { baseImage: options.baseImage } : {}),
        },
      },
    );
  }
  // The daemon should refuse a cut-off context; if it did not, the image is not trusted.
  const tarError = await done.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (tarError) {
    await engine.images.remove(imageId).catch(() => undefined);
    throw tarError;
  }
  return imageId;
}
