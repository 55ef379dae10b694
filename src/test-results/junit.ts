/**
 * JUnit XML, the report format vitest, jest (jest-junit), mocha (mocha-junit-reporter),
 * node:test and pytest all write, read as hostile data: the file was written inside a sandbox
 * where the agent's code ran, so its size, depth, entities, counts and names are all checked
 * before anything in it is believed. A report that fails a check is refused as a whole with
 * the reason; it is never half-trusted.
 *
 * The XML itself is parsed by fast-xml-parser (well kept, no native code, its own caps on
 * nesting and entities) with entity processing off: a JUnit report has no use for a DOCTYPE,
 * so one is refused before the parser sees it (billion laughs, external entities).
 */
import { XMLParser } from 'fast-xml-parser';
import type { TestLogFormat, TestStatus } from '../outcomes.js';

export interface TestCaseResult {
  /** Stable: `file > suite > ... > name` (the parts that exist). */
  id: string;
  file?: string;
  suites: string[];
  name: string;
  status: Exclude<TestStatus, 'missing'>;
  durationMs?: number;
  /** The first part of a failure's message, control characters removed. */
  message?: string;
  /** Other names the runner's output gave the same test (read from a test log: `test-log.ts`). */
  aliases?: string[];
}

export interface TestReport {
  /** `junit`, or the runner whose console output it was read from (`test-log.ts`). */
  format: 'junit' | TestLogFormat;
  tests: TestCaseResult[];
  counts: { passed: number; failed: number; skipped: number };
}

export interface JunitLimits {
  maxBytes: number;
  maxDepth: number;
  maxTests: number;
  maxNameChars: number;
}

export const JUNIT_LIMITS: JunitLimits = {
  maxBytes: 8 * 1024 * 1024,
  maxDepth: 32,
  maxTests: 50_000,
  maxNameChars: 1000,
};

/** A report that is not believed, with the reason a person reads. */
export class ReportRefused extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ReportRefused';
  }
}

const MESSAGE_CHARS = 2000;

type Node = Record<string, unknown>;

export interface ParseJunitOptions {
  limits?: JunitLimits;
  /** The folder the tests ran in (the sandbox workspace): absolute file names below it become relative. */
  root?: string;
}

export function parseJunit(input: Buffer | string, options: ParseJunitOptions = {}): TestReport {
  const limits = options.limits ?? JUNIT_LIMITS;
  const root = options.root?.replace(/\/+$/, '');
  const bytes = typeof input === 'string' ? Buffer.byteLength(input) : input.length;
  if (bytes > limits.maxBytes)
    throw new ReportRefused(`the report is ${bytes} bytes, more than the ${limits.maxBytes} allowed`);
  const text = typeof input === 'string' ? input : input.toString('utf8');
  if (text.includes('\u0000')) throw new ReportRefused('the report holds NUL bytes: not an XML text');
  if (/<!DOCTYPE|<!ENTITY/i.test(text))
    throw new ReportRefused('the report declares a DOCTYPE or entities, which no JUnit report needs');
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '@',
    processEntities: false,
    htmlEntities: false,
    parseTagValue: false,
    parseAttributeValue: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    trimValues: true,
    maxNestedTags: limits.maxDepth,
    isArray: (name) => name === 'testsuite' || name === 'testcase',
  });
  let doc: Node;
  try {
    doc = parser.parse(text, true) as Node;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    if (/nest/i.test(why))
      throw new ReportRefused(`the report is nested deeper than ${limits.maxDepth} elements`);
    throw new ReportRefused(`the report is not well-formed XML (${oneLine(why).slice(0, 200)})`);
  }
  const roots = Object.keys(doc).filter((k) => !k.startsWith('@') && k !== '#text');
  if (roots.length !== 1 || (roots[0] !== 'testsuites' && roots[0] !== 'testsuite'))
    throw new ReportRefused(
      `not a JUnit report: the root element is ${roots.map((r) => `<${r}>`).join(', ') || 'missing'}, expected <testsuites> or <testsuite>`,
    );
  const tests: TestCaseResult[] = [];
  const element = roots[0]!;
  const top = element === 'testsuites' ? [doc[element]] : (doc[element] as unknown[]);
  const walk = (node: unknown, suites: string[], file: string | undefined, isContainer: boolean): void => {
    if (!isObject(node)) return;
    const suiteName = isContainer ? undefined : attr(node, 'name');
    const suiteFile = relativeTo(root, attr(node, 'file')) ?? file;
    const chain = suiteName !== undefined ? [...suites, suiteName] : suites;
    for (const tc of asList(node.testcase)) {
      if (tests.length >= limits.maxTests)
        throw new ReportRefused(`the report holds more than ${limits.maxTests} test cases`);
      tests.push(testCase(tc, chain, suiteFile, limits, root));
    }
    for (const child of asList(node.testsuite)) walk(child, chain, suiteFile, false);
  };
  for (const node of top) walk(node, [], undefined, element === 'testsuites');
  return { format: 'junit', tests: merged(tests), counts: countOf(tests) };
}

function testCase(
  node: unknown,
  chain: string[],
  suiteFile: string | undefined,
  limits: JunitLimits,
  root: string | undefined,
) {
  if (!isObject(node)) throw new ReportRefused('a <testcase> element has no attributes (no name)');
  const name = attr(node, 'name');
  if (name === undefined || name.trim() === '')
    throw new ReportRefused('a <testcase> has no name: its result cannot be told apart from the others');
  const classname = attr(node, 'classname');
  const file = relativeTo(root, attr(node, 'file')) ?? suiteFile ?? fileLike(classname) ?? fileLike(chain[0]);
  const suites = withClass(
    chain.filter((s, i) => s !== file && !(i === 0 && RUNNER_ROOTS.has(s))),
    classPart(classname, file, name),
  );
  for (const part of [name, file ?? '', ...suites]) checkName(part, limits);
  const status: TestCaseResult['status'] =
    'failure' in node || 'error' in node ? 'failed' : 'skipped' in node ? 'skipped' : 'passed';
  const seconds = Number(attr(node, 'time'));
  const message = status === 'failed' ? failureMessage(node.failure ?? node.error) : undefined;
  const id = [file, ...suites, name].filter((p): p is string => p !== undefined && p !== '').join(' > ');
  return {
    id,
    ...(file ? { file } : {}),
    suites,
    name,
    status,
    ...(Number.isFinite(seconds) && seconds >= 0 ? { durationMs: Math.round(seconds * 1000) } : {}),
    ...(message ? { message } : {}),
  } satisfies TestCaseResult;
}

/** Suite names some runners put around every test; they name the runner, not the test. */
const RUNNER_ROOTS = new Set(['pytest', 'Root Suite', 'Mocha Tests', 'jest tests', 'vitest tests']);

const RUNNER_CLASSNAMES = new Set(['test', 'suite']);

/**
 * The describe chain with a classname's parts (jest-junit's `add > nested`) added: parts the
 * chain already ends with are not repeated.
 */
function withClass(suites: string[], classname: string | undefined): string[] {
  if (classname === undefined) return suites;
  const parts = classname.split(' > ');
  if (suites.length > 0 && suites.every((s, i) => parts[i] === s)) return parts;
  const last = suites[suites.length - 1];
  if (last !== undefined && parts[0] === last) return [...suites, ...parts.slice(1)];
  return [...suites, ...parts];
}

function relativeTo(root: string | undefined, file: string | undefined): string | undefined {
  if (file === undefined || file === '') return undefined;
  if (root && file.startsWith(`${root}/`)) return file.slice(root.length + 1);
  return file;
}

const TEST_FILE = /(^|\/)[^/\s]+\.(m?[jt]sx?|c[jt]s|py|rb|go|rs|java|php)$/;

function fileLike(value: string | undefined): string | undefined {
  return value !== undefined && TEST_FILE.test(value) ? value : undefined;
}

/**
 * The class a pytest `classname` adds beyond the module (`tests.test_x.TestC` in
 * `tests/test_x.py` is `TestC`); another runner's classname that is not the file is kept
 * as a suite (mocha's and jest's describe titles).
 */
function classPart(
  classname: string | undefined,
  file: string | undefined,
  name: string,
): string | undefined {
  if (classname === undefined || classname.trim() === '' || classname === file) return undefined;
  // node:test writes classname="test" for every case; mocha and unconfigured jest-junit
  // write the test's own title (which the name already ends with).
  if (RUNNER_CLASSNAMES.has(classname) || name === classname || name.endsWith(` ${classname}`))
    return undefined;
  if (file && file.endsWith('.py')) {
    const module = file.replace(/\.py$/, '').replace(/\//g, '.');
    if (classname === module) return undefined;
    if (classname.startsWith(`${module}.`)) return classname.slice(module.length + 1);
  }
  return classname;
}

function checkName(value: string, limits: JunitLimits): void {
  if (value.length > limits.maxNameChars)
    throw new ReportRefused(
      `a test name is ${value.length} characters long, more than ${limits.maxNameChars}`,
    );
  // Finding control characters is the point here.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value))
    throw new ReportRefused(`a test name holds control characters: ${JSON.stringify(value.slice(0, 80))}`);
}

/** Two cases with one id (a runner that repeats a name) are one test that passed only if all did. */
function merged(tests: TestCaseResult[]): TestCaseResult[] {
  const byId = new Map<string, TestCaseResult>();
  const rank = { failed: 2, passed: 1, skipped: 0 } as const;
  for (const t of tests) {
    const seen = byId.get(t.id);
    if (!seen || rank[t.status] > rank[seen.status]) byId.set(t.id, t);
  }
  return [...byId.values()];
}

function countOf(tests: TestCaseResult[]): TestReport['counts'] {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const t of merged(tests)) counts[t.status]++;
  return counts;
}

function failureMessage(value: unknown): string | undefined {
  const first = Array.isArray(value) ? (value[0] as unknown) : value;
  let text: string | undefined;
  if (typeof first === 'string') text = decodeXml(first);
  else if (isObject(first))
    text = attr(first, 'message') ?? (typeof first['#text'] === 'string' ? first['#text'] : undefined);
  if (text === undefined || text === '') return undefined;
  return oneLine(text).slice(0, MESSAGE_CHARS);
}

function oneLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

function attr(node: Node, name: string): string | undefined {
  const value = node[`@${name}`];
  return typeof value === 'string' ? decodeXml(value) : undefined;
}

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/**
 * The five predefined entities and character references, decoded in one pass (so `&amp;lt;`
 * stays `&lt;`): the parser's own entity handling is off, and these never expand.
 */
function decodeXml(text: string): string {
  return text.replace(/&(lt|gt|amp|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});/g, (whole, ref: string) => {
    if (ref.startsWith('#')) {
      const code = ref[1] === 'x' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return PREDEFINED[ref] ?? whole;
  });
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : value === undefined ? [] : [value];
}

function isObject(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
