/** What images of the harness an engine holds: every one it made, and which base images are there. */
import { dockerEngine, type DockerEngine } from '../engine/index.js';
import { LABEL, ORIGIN_LABEL } from '../labels.js';
import { BASE_IMAGES, type BaseKind } from './base-images.js';

export interface HarnessImage {
  id: string;
  tags: string[];
  kind: string;
  createdAt: Date;
  sizeBytes: number;
  labels: Record<string, string>;
}

/** Every image this harness made (base, rootfs and repo images), newest first. */
export async function listHarnessImages(engine: DockerEngine = dockerEngine()): Promise<HarnessImage[]> {
  const images = await engine.images.list({ [LABEL.kind]: true });
  return images
    .map((i) => ({
      id: i.id,
      tags: i.tags.filter((t) => t !== '<none>:<none>'),
      kind: i.labels[LABEL.kind] ?? '',
      createdAt: i.createdAt,
      sizeBytes: i.sizeBytes,
      labels: i.labels,
    }))
    .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
}

/** Which of the harness's base images are present locally. */
export interface BaseImageState {
  kind: BaseKind;
  tag: string;
  present: boolean;
  imageId?: string | undefined;
  /** `pulled` or `bootstrapped`, as its label says. */
  origin?: string | undefined;
}

export async function baseImageStatus(engine: DockerEngine = dockerEngine()): Promise<BaseImageState[]> {
  const result: BaseImageState[] = [];
  for (const spec of Object.values(BASE_IMAGES)) {
    const image = await engine.images.inspect(spec.tag);
    result.push(
      image
        ? {
            kind: spec.kind,
            tag: spec.tag,
            present: true,
            imageId: image.id,
            origin: image.labels[ORIGIN_LABEL],
          }
        : { kind: spec.kind, tag: spec.tag, present: false },
    );
  }
  return result;
}
