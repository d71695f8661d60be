/**
 * The services' settings a bench run takes from its environment, and the command line that names
 * them in the report without writing a credential.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { parseThresholds } from '../../../../services/governor/src/pressure/thresholds.js';
import { footprint } from '../scenarios/footprint.js';
import { priority } from '../scenarios/priority.js';
import { drain } from '../scenarios/drain.js';
import {
  HARNESS_SETTINGS,
  settingsPrefix,
  sluiceServiceSettings,
  sluiceStackSettings,
} from './sluice-settings.js';

describe('sluiceServiceSettings', () => {
  it("takes SLUICE_* and OTEL_* variables, not the test harness's own nor anything else", () => {
    const settings = sluiceServiceSettings({
      SLUICE_PRIORITY_AGING_MS: '0',
      SLUICE_TEST_RUN_ID: 'abc',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      DATABASE_URL: 'postgres://x',
      PATH: '/usr/bin',
      NOT_SLUICE_X: '1',
      SLUICE_UNSET: undefined,
    });
    assert.deepEqual(settings, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      SLUICE_PRIORITY_AGING_MS: '0',
    });
    assert.deepEqual(Object.keys(settings), [
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'SLUICE_PRIORITY_AGING_MS',
    ]);
  });
});

describe('sluiceStackSettings', () => {
  it('lets the governor keep every backlog the scenarios build, as the governor reads it', () => {
    const settings = sluiceStackSettings({});
    assert.deepEqual(settings, HARNESS_SETTINGS);
    const table = parseThresholds(settings['SLUICE_GOVERNOR_THRESHOLDS']);
    if (typeof table === 'string') assert.fail(`the governor refuses it: ${table}`);
    const rejectAt = table.queue_depth.thresholds.find((t) => t.level === 'reject')?.enterAt;
    const largest = Math.max(
      ...[footprint, drain, priority].map((s) => Math.max(s.defaultCount, s.fullCount ?? 0)),
    );
    assert.ok(rejectAt !== undefined && rejectAt > largest, `sheds at ${rejectAt} of ${largest}`);
  });

  it("gives the environment's settings over the harness's", () => {
    const mine = `{"queue_depth":[{"level":"reject","enter":10,"exit":5}]}`;
    const settings = sluiceStackSettings({
      SLUICE_GOVERNOR_THRESHOLDS: mine,
      SLUICE_PRIORITY_AGING_MS: '0',
    });
    assert.deepEqual(settings, {
      SLUICE_GOVERNOR_THRESHOLDS: mine,
      SLUICE_PRIORITY_AGING_MS: '0',
    });
  });
});

describe('settingsPrefix', () => {
  it('is empty without settings', () => {
    assert.equal(settingsPrefix({}), '');
  });

  it('writes each setting as the shell would take it back', () => {
    assert.equal(
      settingsPrefix({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        SLUICE_GOVERNOR_THRESHOLDS: `{"queue_depth":[{"level":"reject"}]}`,
        SLUICE_NOTE: "it's",
      }),
      `OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 ` +
        `SLUICE_GOVERNOR_THRESHOLDS='{"queue_depth":[{"level":"reject"}]}' ` +
        `SLUICE_NOTE='it'\\''s'`,
    );
  });

  it('gives the shell back every value', () => {
    const settings = {
      SLUICE_A: `{"queue_depth":[{"level":"reject"}]}`,
      SLUICE_B: "it's a $HOME `x` \\ test",
      SLUICE_C: 'plain-1.5',
    };
    const printed = execFileSync('sh', ['-c', `${settingsPrefix(settings)} env`], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '' },
    });
    for (const [name, value] of Object.entries(settings)) {
      assert.ok(printed.split('\n').includes(`${name}=${value}`), `${name}=${value}`);
    }
  });

  it('names credentials without their values', () => {
    const prefix = settingsPrefix({
      SLUICE_LLM_API_KEY: 'sk-live-1',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer t0ken',
      SLUICE_ADMIN_TOKEN: 't0ken',
    });
    assert.equal(
      prefix,
      'SLUICE_LLM_API_KEY=<redacted> OTEL_EXPORTER_OTLP_HEADERS=<redacted> SLUICE_ADMIN_TOKEN=<redacted>',
    );
    assert.doesNotMatch(prefix, /sk-live|t0ken/);
  });
});
