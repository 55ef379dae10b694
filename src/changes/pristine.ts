/**
 * The bytes a pristine file had, where the host still has them: the change set reads old
 * contents for patches from it, and the change ignore reads the repo's pristine
 * `.gitignore` files. Its own file so neither has to import the other.
 */
export interface PristineFile {
  content: Buffer;
  mode: number;
}

/** The bytes a pristine file had, when the host still has them (for patches). */
export interface PristineSource {
  read(path: string): Promise<PristineFile | undefined>;
}
