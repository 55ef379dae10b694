/**
 * What must never enter a sandbox image: files whose name says "credentials" (left out of
 * every build context, whatever `.dockerignore` says), and file contents that look like a
 * private key or a well-known token (the build is refused, naming `file:line`).
 *
 * Everything in `/workspace` is readable by the agent and so, sooner or later, by the
 * model. Names are matched case-insensitively (`.ENV` on a case-insensitive checkout is
 * still `.env`); contents by formats specific enough that a hit is almost never a false
 * alarm, and never echoed back: a report names the file, the line and the kind only.
 */
import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface SecretNameRule {
  /** Shown in messages and the README, `.dockerignore`-like. */
  pattern: string;
  /** Tested against the lower-cased name of one path segment; `parent` is the lower-cased parent folder path. */
  test: (name: string, parent: string) => boolean;
  /** Only folders match. */
  dirOnly?: boolean;
}

const exact =
  (...names: string[]) =>
  (name: string) =>
    names.includes(name);
const suffix =
  (...endings: string[]) =>
  (name: string) =>
    endings.some((e) => name.endsWith(e));
const prefix =
  (...starts: string[]) =>
  (name: string) =>
    starts.some((s) => name.startsWith(s));

/**
 * Left out of every build context at any depth. `.git` and `.sandbox-harness/` are not
 * secrets, but the first holds remotes with credentials and the second run records.
 */
export const SECRET_NAME_RULES: readonly SecretNameRule[] = [
  { pattern: '.git', test: exact('.git') },
  { pattern: '.sandbox-harness/', test: exact('.sandbox-harness'), dirOnly: true },
  // dotenv files and friends: .env, .env.local, .envrc (direnv), .ENV
  { pattern: '.env*', test: prefix('.env') },
  // Key and certificate stores
  {
    pattern: '*.pem, *.key, *.p12, *.pfx, *.p8, *.jks, *.keystore, *.ppk, *.kdbx, *.keytab',
    test: suffix('.pem', '.key', '.p12', '.pfx', '.p8', '.jks', '.keystore', '.ppk', '.kdbx', '.keytab'),
  },
  // SSH private keys (and their .pub, which nobody needs in a sandbox either)
  {
    pattern: 'id_rsa*, id_dsa*, id_ecdsa*, id_ed25519*',
    test: prefix('id_rsa', 'id_dsa', 'id_ecdsa', 'id_ed25519'),
  },
  // Cloud and tool credential files
  {
    pattern: 'credentials, credentials.{json,yml,yaml,xml,csv}, *accesskeys.csv',
    test: (n) =>
      exact(
        'credentials',
        'credentials.json',
        'credentials.yml',
        'credentials.yaml',
        'credentials.xml',
        'credentials.csv',
      )(n) || n.endsWith('accesskeys.csv'),
  },
  {
    pattern: '*service-account*.json, *service_account*.json, *serviceaccount*.json, client_secret*.json',
    test: (n) =>
      n.endsWith('.json') &&
      (n.includes('service-account') ||
        n.includes('service_account') ||
        n.includes('serviceaccount') ||
        n.startsWith('client_secret')),
  },
  // Terraform variables and state hold provider credentials and every secret it created
  {
    pattern: '*.tfvars, *.tfvars.json, *.tfstate*, .terraformrc, credentials.tfrc.json',
    test: (n) =>
      n.endsWith('.tfvars') ||
      n.endsWith('.tfvars.json') ||
      n.includes('.tfstate') ||
      exact('.terraformrc', 'terraform.rc', 'credentials.tfrc.json')(n),
  },
  { pattern: 'kubeconfig, *.kubeconfig', test: (n) => n === 'kubeconfig' || n.endsWith('.kubeconfig') },
  // Package registry, git, database and tool logins
  {
    pattern:
      '.npmrc, .pypirc, .netrc, _netrc, .git-credentials, .pgpass, .my.cnf, .htpasswd, .vault-token, .boto, .s3cfg, .dockercfg',
    test: exact(
      '.npmrc',
      '.pypirc',
      '.netrc',
      '_netrc',
      '.git-credentials',
      '.pgpass',
      '.my.cnf',
      '.htpasswd',
      '.vault-token',
      '.boto',
      '.s3cfg',
      '.dockercfg',
    ),
  },
  // Shell and REPL histories: commands typed with tokens in them
  { pattern: '.*_history', test: (n) => n.startsWith('.') && n.endsWith('_history') },
  // Credential folders of cloud CLIs, ssh, gpg, Docker, Kubernetes
  {
    pattern:
      '.aws/, .azure/, .gcloud/, .config/gcloud/, .docker/, .kube/, .ssh/, .gnupg/, .terraform.d/, .password-store/',
    test: (n, parent) =>
      exact(
        '.aws',
        '.azure',
        '.gcloud',
        '.docker',
        '.kube',
        '.ssh',
        '.gnupg',
        '.terraform.d',
        '.password-store',
      )(n) ||
      (n === 'gcloud' && (parent === '.config' || parent.endsWith('/.config'))),
    dirOnly: true,
  },
];

/** Why a path segment is never put in an image, or undefined. `parent` is the repo-relative folder. */
export function secretNameReason(name: string, isDir: boolean, parent: string): string | undefined {
  const lower = name.toLowerCase();
  const lowerParent = parent.toLowerCase();
  for (const rule of SECRET_NAME_RULES) {
    if (rule.dirOnly && !isDir) continue;
    if (rule.test(lower, lowerParent)) return `secret-like name (${rule.pattern}), never put in an image`;
  }
  return undefined;
}

// ---- contents --------------------------------------------------------------------------

interface TokenFormat {
  /** What a hit is called in messages; never the value. */
  what: string;
  /** Without capturing groups: the formats are joined into one expression. */
  source: string;
  /**
   * Also looked for inside dependency folders (`node_modules`, `.venv`). Published packages
   * ship test keys (ssh2's fixtures, TLS test certificates) and code that mentions PEM
   * headers; they do not ship live provider tokens, whose formats are exact enough to trust.
   */
  inDependencies: boolean;
}

const TOKEN_FORMATS: readonly TokenFormat[] = [
  {
    what: 'a private key (PEM block)',
    // The header alone is what key-parsing code contains; a key has a body right after it.
    source: '-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\\s\\S]{0,400}?[A-Za-z0-9+/]{40}',
    inDependencies: false,
  },
  {
    what: 'an AWS access key id',
    source: '(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Z0-9])',
    inDependencies: true,
  },
  {
    what: 'an AWS secret access key',
    source:
      '(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|awsSecretAccessKey|SecretAccessKey)["\']?\\s*[:=]\\s*["\']?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])',
    inDependencies: false,
  },
  {
    what: 'an Anthropic API key',
    source: 'sk-ant-[a-z]{2,8}[0-9]{0,3}-[A-Za-z0-9_-]{32,}',
    inDependencies: true,
  },
  {
    what: 'an OpenAI API key',
    source: 'sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}',
    inDependencies: true,
  },
  {
    what: 'a GitHub token',
    source: '(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])|github_pat_[A-Za-z0-9_]{60,}',
    inDependencies: true,
  },
  { what: 'a GitLab token', source: 'glpat-[A-Za-z0-9_-]{20}', inDependencies: true },
  {
    what: 'a Slack token or webhook',
    source:
      'xox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{10,}|hooks\\.slack\\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}',
    inDependencies: true,
  },
  { what: 'a Google API key', source: 'AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])', inDependencies: true },
  { what: 'a Google OAuth client secret', source: 'GOCSPX-[A-Za-z0-9_-]{28}', inDependencies: true },
  {
    what: 'an npm token',
    source: '(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])',
    inDependencies: true,
  },
  { what: 'a PyPI token', source: 'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}', inDependencies: true },
  { what: 'a Stripe secret key', source: '(?:sk|rk)_live_[0-9A-Za-z]{24,}', inDependencies: true },
  {
    what: 'a Hugging Face token',
    source: '(?<![A-Za-z0-9_])hf_[A-Za-z]{34}(?![A-Za-z0-9])',
    inDependencies: true,
  },
  { what: 'a SendGrid API key', source: 'SG\\.[A-Za-z0-9_-]{22}\\.[A-Za-z0-9_-]{43}', inDependencies: true },
  { what: 'a DigitalOcean token', source: 'do[opr]_v1_[a-f0-9]{64}', inDependencies: true },
];

/** One alternation, one group per format, so a file is searched once for all of them. */
function combined(formats: readonly TokenFormat[]): RegExp {
  return new RegExp(formats.map((f) => `(${f.source})`).join('|'), 'g');
}

const ALL = { formats: TOKEN_FORMATS, regex: combined(TOKEN_FORMATS) };
const STRICT_FORMATS = TOKEN_FORMATS.filter((f) => f.inDependencies);
const STRICT = { formats: STRICT_FORMATS, regex: combined(STRICT_FORMATS) };

/**
 * Documentation and test values (`AKIAIOSFODNN7EXAMPLE`, `ghp_xxxx…`, `sk-ant-…-000…`) are
 * not secrets; refusing a build over them would teach people to switch the scan off.
 */
function isPlaceholder(value: string): boolean {
  if (/example|dummy|placeholder|redacted|your[_-]?(?:api[_-]?)?(?:key|token)/i.test(value)) return true;
  if (/(.)\1{7,}/.test(value)) return true;
  return new Set(value).size < 6;
}

export interface SecretHit {
  /** 1-based line of the start of the match. */
  line: number;
  what: string;
}

/** Past this many hits in one file the rest are not worth listing. */
const MAX_HITS_PER_FILE = 5;
/** Longer than any bounded format, so a token cut by a chunk border is found in the next chunk. */
const CARRY_CHARS = 1024;

/**
 * Scans one file as it is read, chunk by chunk (files are hashed in the same pass, so the
 * scan reads nothing twice). Text is handled as latin1: one char per byte, so any file,
 * binary or not, can be searched and line numbers count '\n' bytes.
 */
export class SecretScanner {
  readonly hits: SecretHit[] = [];
  private readonly set: typeof ALL;
  private carry = '';
  /** Absolute offset of `carry[0]` and the number of newlines before it. */
  private carryOffset = 0;
  private carryLine = 1;
  private lastHitOffset = -1;

  /** `dependencies`: the file is inside `node_modules` or `.venv`; only the strict formats apply. */
  constructor(dependencies = false) {
    this.set = dependencies ? STRICT : ALL;
  }

  push(chunk: Buffer): void {
    if (this.hits.length >= MAX_HITS_PER_FILE) return;
    const text = this.carry + chunk.toString('latin1');
    const regex = this.set.regex;
    regex.lastIndex = 0;
    let counted = 0;
    let line = this.carryLine;
    for (let match = regex.exec(text); match; match = regex.exec(text)) {
      const offset = this.carryOffset + match.index;
      if (offset <= this.lastHitOffset || isPlaceholder(match[0])) continue;
      const group = match.findIndex((g, i) => i > 0 && g !== undefined);
      line += countNewlines(text, counted, match.index);
      counted = match.index;
      this.hits.push({ line, what: this.set.formats[group - 1]?.what ?? 'a secret' });
      this.lastHitOffset = offset;
      if (this.hits.length >= MAX_HITS_PER_FILE) return;
    }
    const keepFrom = Math.max(0, text.length - CARRY_CHARS);
    this.carryLine =
      counted <= keepFrom
        ? line + countNewlines(text, counted, keepFrom)
        : line - countNewlines(text, keepFrom, counted);
    this.carryOffset += keepFrom;
    this.carry = text.slice(keepFrom);
  }
}

function countNewlines(text: string, from: number, to: number): number {
  let count = 0;
  for (let i = text.indexOf('\n', from); i !== -1 && i < to; i = text.indexOf('\n', i + 1)) count++;
  return count;
}

/** Scans one whole buffer (a Dockerfile, a small file). */
export function scanForSecrets(data: Buffer, dependencies = false): SecretHit[] {
  const scanner = new SecretScanner(dependencies);
  scanner.push(data);
  return scanner.hits;
}

// ---- remembering clean files ---------------------------------------------------------

/**
 * Changes whenever a format changes, so a digest found clean under old rules is scanned
 * again under new ones.
 */
export const SECRET_RULES_VERSION = createHash('sha256')
  .update(JSON.stringify(TOKEN_FORMATS))
  .update(isPlaceholder.toString())
  .digest('hex')
  .slice(0, 16);

/** A cache file past this size is started afresh rather than read. */
const MAX_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * The sha256 of every file content already scanned and found clean, kept between runs in
 * the harness's cache folder. The context hash reads every file anyway; scanning is several
 * times slower than hashing, so an unchanged repo scans nothing and a changed one only what
 * changed. Only clean verdicts are remembered: a file with a hit is scanned every time.
 */
export class CleanDigestCache {
  private readonly fresh: string[] = [];

  private constructor(
    private readonly file: string | undefined,
    private readonly known: Set<string>,
  ) {}

  /** `file` undefined: remembers nothing (every file is scanned). A bad cache file is ignored. */
  static async open(file: string | undefined): Promise<CleanDigestCache> {
    if (!file) return new CleanDigestCache(undefined, new Set());
    const known = new Set<string>();
    try {
      const st = await stat(file);
      if (st.size > MAX_CACHE_BYTES) await rm(file, { force: true });
      else for (const line of (await readFile(file, 'latin1')).split('\n')) if (line) known.add(line);
    } catch {
      // No cache yet, or unreadable: scan everything.
    }
    return new CleanDigestCache(file, known);
  }

  /** A file inside a dependency folder is clean when it was clean under either rule set. */
  has(digest: string, dependencies: boolean): boolean {
    return this.known.has(`a ${digest}`) || (dependencies && this.known.has(`s ${digest}`));
  }

  add(digest: string, dependencies: boolean): void {
    const key = `${dependencies ? 's' : 'a'} ${digest}`;
    if (this.known.has(key)) return;
    this.known.add(key);
    this.fresh.push(key);
  }

  /** Appends what was learnt; one write, so concurrent runs never interleave within a line. */
  async save(): Promise<void> {
    if (!this.file || this.fresh.length === 0) return;
    try {
      await mkdir(dirname(this.file), { recursive: true });
      await appendFile(this.file, `${this.fresh.join('\n')}\n`, 'latin1');
      this.fresh.length = 0;
    } catch {
      // Only a cache: the next run scans again.
    }
  }
}
