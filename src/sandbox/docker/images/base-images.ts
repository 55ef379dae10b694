/** The harness's own base images: what each is called, built on, and bootstrapped from. No engine here. */
export type BaseKind = 'node' | 'python';

export interface BaseImageSpec {
  kind: BaseKind;
  /** The local tag every sandbox builds on. */
  tag: string;
  /** What the recipe builds on when a registry answers. */
  registryImage: string;
  /** The offline root filesystem: `docker import` of an mmdebstrap tarball. */
  rootfs: { repo: string; tag: string; suite: string; packages: string[] };
  /** Folder under the package root that holds the recipe's Dockerfile. */
  recipe: string;
}

export const BASE_IMAGES: Readonly<Record<BaseKind, BaseImageSpec>> = {
  node: {
    kind: 'node',
    tag: 'sandbox-harness/base-node:20',
    registryImage: 'node:20-bookworm-slim',
    rootfs: {
      repo: 'sandbox-harness/rootfs-node',
      tag: 'trixie',
      suite: 'trixie',
      packages: ['nodejs', 'npm', 'git', 'ca-certificates', 'passwd'],
    },
    recipe: 'images/node',
  },
  python: {
    kind: 'python',
    tag: 'sandbox-harness/base-python:3',
    registryImage: 'python:3.12-slim-bookworm',
    rootfs: {
      repo: 'sandbox-harness/rootfs-python',
      tag: 'trixie',
      suite: 'trixie',
      // python3-pytest: the base's test runner (no package index is needed to run pytest).
      packages: ['python3', 'python3-venv', 'python3-pytest', 'git', 'ca-certificates', 'passwd'],
    },
    recipe: 'images/python',
  },
};

export const DEFAULT_BASE_IMAGE = BASE_IMAGES.node.tag;

export function isBaseKind(value: string): value is BaseKind {
  return value === 'node' || value === 'python';
}
