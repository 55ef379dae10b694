/**
 * The time limit of an image build (`RepoImageRequest.timeLimit`), for any backend: the build
 * gets a signal that is aborted when the limit passes (and on the caller's own signal), and
 * the caller gets a `BuildTimeout` naming the file and field that set the limit at once, not
 * whenever the backend notices; the backend's own end of the build is awaited in the
 * background so nothing is left unhandled.
 */
import { BuildTimeout } from '../errors.js';
import type { RepoImage, RepoImageRequest } from './request.js';

export function withBuildTimeLimit(
  request: RepoImageRequest,
  build: (request: RepoImageRequest) => Promise<RepoImage>,
): Promise<RepoImage> {
  const limit = request.timeLimit;
  if (!limit) return build(request);
  const controller = new AbortController();
  const outer = request.signal;
  const onOuter = () => controller.abort(outer?.reason);
  if (outer?.aborted) onOuter();
  outer?.addEventListener('abort', onOuter, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new BuildTimeout(
        `${limit.file}: ${limit.field}: making the sandbox image took longer than its limit of ${limit.sec} s, so the build was stopped`,
        {
          hint: `Raise ${limit.field} in ${limit.file}, or make the build faster${request.logFile ? ` (its log: ${request.logFile})` : ''}.`,
          details: { limitSec: limit.sec, file: limit.file, field: limit.field },
        },
      );
      // The limit is the news, whatever the backend says once its build is stopped.
      reject(error);
      controller.abort(error);
    }, limit.sec * 1000);
  });
  const building = build({ ...request, signal: controller.signal });
  // Once the limit has passed, the build's own end (an interruption) is nobody's news.
  building.catch(() => undefined);
  return Promise.race([building, passed]).finally(() => {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
  });
}
