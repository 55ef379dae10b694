import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ImageError } from '../../../src/errors.js';
import { shipImages } from '../../../src/sandbox/docker/images/image-shipping.js';
import type { DockerEngine, ImageDetails } from '../../../src/sandbox/docker/engine/index.js';

/** Just enough of an engine for shipping: images by reference, save and load as streams. */
class FakeEngine {
  saves = 0;
  received = 0;
  constructor(
    readonly where: string,
    readonly images = new Map<string, string>(),
    /** What a load makes of the stream: the ids the engine ends up with per reference. */
    private readonly onLoad: (refs: Map<string, string>) => void = () => undefined,
  ) {}
  async inspectImage(ref: string): Promise<ImageDetails | undefined> {
    const id = this.images.get(ref);
    return id ? { id, tags: [ref], labels: {}, user: '', env: [], volumes: [] } : undefined;
  }
  async saveImages(refs: string[]): Promise<Readable> {
    this.saves++;
    return Readable.from([Buffer.alloc(1024, 1), Buffer.from(refs.join(','))]);
  }
  async loadImages(tar: Readable): Promise<string[]> {
    for await (const chunk of tar) this.received += (chunk as Buffer).length;
    this.onLoad(this.images);
    return [];
  }
}

const engine = (fake: FakeEngine) =>
  ({
    where: fake.where,
    images: {
      inspect: (ref: string) => fake.inspectImage(ref),
      save: (refs: string[]) => fake.saveImages(refs),
      load: (tar: Readable) => fake.loadImages(tar),
    },
  }) as unknown as DockerEngine;

describe('shipping images between engines', () => {
  it('streams the images once however many callers want them on the same engine at once', async () => {
    const source = new FakeEngine('tcp://a:2376 (TLS)', new Map([['base:1', 'sha256:aaaa']]));
    const target = new FakeEngine('tcp://b:2376 (TLS)', new Map(), (images) =>
      images.set('base:1', 'sha256:aaaa'),
    );
    const [one, two] = await Promise.all([
      shipImages(engine(source), engine(target), ['base:1']),
      shipImages(engine(source), engine(target), ['base:1']),
    ]);
    expect(source.saves).toBe(1);
    expect(one).toBe(two);
    expect(one.bytes).toBe(target.received);
  });

  it('fails when the target does not end up with the same image id (a cut or altered stream)', async () => {
    const source = new FakeEngine('tcp://a:2376 (TLS)', new Map([['base:1', 'sha256:aaaaaaaaaaaaaaaaaaaa']]));
    const target = new FakeEngine('tcp://c:2376 (TLS)', new Map(), (images) =>
      images.set('base:1', 'sha256:bbbbbbbbbbbbbbbbbbbb'),
    );
    const error = await shipImages(engine(source), engine(target), ['base:1']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageError);
    expect((error as Error).message).toBe(
      'shipping base:1 to tcp://c:2376 (TLS) failed: expected image aaaaaaaaaaaa there, found bbbbbbbbbbbb',
    );
  });

  it('refuses an image the source does not have, before any stream', async () => {
    const source = new FakeEngine('tcp://a:2376 (TLS)');
    await expect(shipImages(engine(source), engine(new FakeEngine('x')), ['nope:1'])).rejects.toThrow(
      'cannot ship nope:1: it is not on tcp://a:2376 (TLS)',
    );
    expect(source.saves).toBe(0);
  });
});
