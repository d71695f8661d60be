import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from './command.js';
import { COMMANDS, helpText, parseCommandLine, type ParsedCommandLine } from './main.js';

function parsed(argv: string[]): ParsedCommandLine {
  const result = parseCommandLine(argv);
  assert.ok(!('help' in result), `"${argv.join(' ')}" is a command, not a help request`);
  return result;
}

function usageError(argv: string[], message: RegExp) {
  assert.throws(
    () => parseCommandLine(argv),
    (error: unknown) => error instanceof UsageError && message.test(error.message),
    `"${argv.join(' ')}" → ${message}`,
  );
}

describe('parseCommandLine', () => {
  it('finds the command and its arguments, with global options before or after', () => {
    const line = parsed([
      '--address',
      'gw:50051',
      'create',
      'research-brief',
      '--input',
      '{}',
      '--watch',
      '--json',
    ]);
    assert.equal(line.command.name, 'create');
    assert.deepEqual(line.args, ['research-brief']);
    assert.equal(line.values['address'], 'gw:50051');
    assert.equal(line.values['input'], '{}');
    assert.equal(line.values['watch'], true);
    assert.equal(line.values['json'], true);
  });

  it('does not take an option value for the command name', () => {
    // "get" is the value of --type here, not a command.
    const line = parsed(['list', '--type', 'get']);
    assert.equal(line.command.name, 'list');
    assert.equal(line.values['type'], 'get');
  });

  it('reads every command of the CLI', () => {
    const id = '0f8f2f4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
    const lines: [string[], string][] = [
      [['get', id], 'get'],
      [['watch', id, '--after', '3'], 'watch'],
      [['list', '--status', 'running', '--limit', '5'], 'list'],
      [['cancel', id, '--reason', 'no longer needed'], 'cancel'],
      [['approve', id, '--comment', 'ok'], 'approve'],
      [['reject', id, '--comment', 'no'], 'reject'],
      [['pause', id], 'pause'],
      [['resume', id], 'resume'],
      [['retry', id], 'retry'],
      [['tenants', 'create', 'acme', '--name', 'Acme Corp'], 'tenants create'],
      [['tenants', 'list'], 'tenants list'],
      [['keys', 'create', 'acme', '--admin'], 'keys create'],
      [['keys', 'list', 'acme'], 'keys list'],
      [['keys', 'revoke', id], 'keys revoke'],
    ];
    for (const [argv, name] of lines) assert.equal(parsed(argv).command.name, name);
  });

  it('refuses what is wrong with a usage error that names it', () => {
    usageError([], /no command given/);
    usageError(['frobnicate'], /unknown command "frobnicate"/);
    usageError(['keys'], /"keys" needs a subcommand: keys create, keys list, keys revoke/);
    usageError(
      ['tenants', 'delete', 'acme'],
      /"tenants" needs a subcommand: tenants create, tenants list/,
    );
    usageError(['keys', 'create', 'acme', '--name', 'x'], /Unknown option '--name'/);
    usageError(['get'], /missing <id>/);
    usageError(['get', 'a', 'b'], /too many arguments: expected <id>, got "a b"/);
    usageError(['get', 'a', '--bogus'], /unknown option --bogus/);
    // An option of another command is unknown to this one.
    usageError(['get', 'a', '--reason', 'x'], /Unknown option '--reason'/);
    usageError(['list', '--limit'], /--limit/);
    // A repeated option is refused rather than all but its last value dropped: `--status running
    // --status queued` does not list both, and of two inputs only one would be sent.
    usageError(
      ['list', '--status', 'running', '--status=queued'],
      /--status is given twice \("running", "queued"\): give it once/,
    );
    usageError(
      ['create', 'brief', '--input', '{}', '--input', '{"a":1}'],
      /--input is given twice/,
    );
    usageError(['watch', 'a', '--after'], /--after/);
  });

  it('keeps the command on a usage error so its usage can be shown', () => {
    try {
      parseCommandLine(['pause']);
      assert.fail('expected a usage error');
    } catch (error) {
      assert.ok(error instanceof UsageError);
      assert.equal(error.command?.name, 'pause');
    }
  });

  it('answers help requests in any position', () => {
    assert.deepEqual(parseCommandLine(['--help']), { help: true });
    assert.deepEqual(parseCommandLine(['help']), { help: true });
    assert.equal(
      (parseCommandLine(['help', 'watch']) as { command?: { name: string } }).command?.name,
      'watch',
    );
    assert.equal(
      (parseCommandLine(['cancel', '-h']) as { command?: { name: string } }).command?.name,
      'cancel',
    );
    const group = parseCommandLine(['keys', '--help']) as { group?: { name: string }[] };
    assert.deepEqual(
      group.group?.map((c) => c.name),
      ['keys create', 'keys list', 'keys revoke'],
    );
  });
});

describe('helpText', () => {
  it('lists every command and the exit codes', () => {
    const text = helpText(COMMANDS);
    for (const command of COMMANDS) assert.match(text, new RegExp(`^  ${command.name} `, 'm'));
    assert.match(text, /exit codes: 0 success, 1 .*, 2 usage error/);
  });

  it("shows one command's usage, options and the global options", () => {
    const create = COMMANDS.find((c) => c.name === 'create');
    assert.ok(create);
    const text = helpText(COMMANDS, create);
    assert.match(
      text,
      /^usage: sluice create <type> \(--input '<json>' \| --input-file <file> \| --inputs-file <file>\)/,
    );
    assert.match(text, /--idempotency-key <key>/);
    assert.match(text, /--api-key <key> .*SLUICE_API_KEY/);
  });
});
