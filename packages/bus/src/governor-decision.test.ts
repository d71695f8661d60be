import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isSluiceError } from '@sluice/core';
import {
  AdmissionLevel,
  decidedAdmission,
  decodeDecision,
  encodeDecision,
  MAX_DECISION_BYTES,
  NO_SIGNALS_REASON,
  NOTHING_DECIDED,
  normalDecision,
  parseDecision,
  sameDecision,
  type GovernorDecision,
} from './governor-decision.js';

const encoder = new TextEncoder();
const bytes = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

const valid: GovernorDecision = {
  epoch: 3,
  holder: 'governor-a',
  level: AdmissionLevel.Hold,
  holds: [2, 3],
  reject: [3],
  decided_at: '2025-01-02T03:04:05.000Z',
  reasons: ['queue depth of P3 above 10000'],
  retry_after_ms: 5_000,
  throttle: [3],
  degrade: [2, 3],
  limits: { llm: 12, 'tool:search': 1 },
  breakers: { 'tool:search': 'half_open', 'mcp:files': 'open' },
  signals: [{ signal: 'queue_depth', scope: 'all', value: 12_000, level: 'reject' }],
};

function assertInvalid(fn: () => unknown, field: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isSluiceError(err), `expected a SluiceError, got ${String(err)}`);
    assert.equal(err.code, 'invalid_argument');
    assert.equal(err.field, field);
    return true;
  });
}

describe('normalDecision', () => {
  it('admits everything and says why', () => {
    const at = new Date('2025-06-01T12:00:00Z');
    assert.deepEqual(normalDecision(7, 'governor-x', at), {
      epoch: 7,
      holder: 'governor-x',
      level: 'normal',
      holds: [],
      reject: [],
      decided_at: '2025-06-01T12:00:00.000Z',
      reasons: [NO_SIGNALS_REASON],
      ...NOTHING_DECIDED,
    });
  });
});

describe('decidedAdmission', () => {
  it('holds, closes resources with open breakers only, caps and throttles as decided', () => {
    assert.deepEqual(decidedAdmission(valid), {
      heldPriorities: [2, 3],
      closedResources: ['mcp:files'],
      resourceLimits: { llm: 12, 'tool:search': 1 },
      throttledPriorities: [3],
    });
  });

  it('asks nothing of a claim under a normal decision', () => {
    assert.deepEqual(decidedAdmission(normalDecision(1, 'governor-x')), {
      heldPriorities: [],
      closedResources: [],
      resourceLimits: {},
      throttledPriorities: [],
    });
  });
});

describe('sameDecision', () => {
  const later = { ...valid, decided_at: '2025-01-02T03:04:06.000Z' };
  const reread = {
    ...later,
    signals: [{ signal: 'queue_depth', scope: 'all', value: 12_001, level: 'reject' }],
  };

  it('sets aside when each was made', () => {
    assert.ok(sameDecision(valid, later, { readings: true }));
    assert.ok(sameDecision(valid, later, { readings: false }));
  });

  it('counts the readings only when asked to', () => {
    assert.ok(!sameDecision(valid, reread, { readings: true }));
    assert.ok(sameDecision(valid, reread, { readings: false }));
  });

  it('tells apart decisions that decide differently', () => {
    const held: GovernorDecision = { ...later, holds: [1, 2, 3] };
    assert.ok(!sameDecision(valid, held, { readings: false }));
    assert.ok(!sameDecision(valid, held, { readings: true }));
  });
});

describe('encodeDecision / decodeDecision', () => {
  it('round-trips a decision', () => {
    assert.deepEqual(decodeDecision(encodeDecision(valid)), valid);
    const normal = normalDecision(1, 'g');
    assert.deepEqual(decodeDecision(encodeDecision(normal)), normal);
  });

  it('reads a first-version document (no optional fields) as deciding nothing more', () => {
    const { epoch, holder, level, holds, reject, decided_at, reasons } = valid;
    const first = { epoch, holder, level, holds, reject, decided_at, reasons };
    assert.deepEqual(decodeDecision(bytes(first)), { ...first, ...NOTHING_DECIDED });
  });

  it('drops unknown fields and normalises priority sets', () => {
    const decoded = decodeDecision(bytes({ ...valid, holds: [3, 2, 3], extra: { x: 1 } }));
    assert.deepEqual(decoded, { ...valid, holds: [2, 3] });
    assert.equal('extra' in decoded, false);
  });

  it('refuses bytes that are not JSON, too large, or not an object', () => {
    assertInvalid(() => decodeDecision(encoder.encode('{nope')), 'decision');
    assertInvalid(() => decodeDecision(new Uint8Array([0xff, 0xfe])), 'decision');
    assertInvalid(() => decodeDecision(new Uint8Array(MAX_DECISION_BYTES + 1)), 'decision');
    for (const value of [null, 42, 'normal', [valid]]) {
      assertInvalid(() => decodeDecision(bytes(value)), 'decision');
    }
  });

  const badFields: [keyof GovernorDecision, unknown][] = [
    ['epoch', 0],
    ['epoch', -1],
    ['epoch', 1.5],
    ['epoch', '3'],
    ['epoch', undefined],
    ['holder', ''],
    ['holder', 'h'.repeat(201)],
    ['holder', 5],
    ['level', 'panic'],
    ['level', undefined],
    ['holds', [4]],
    ['holds', ['P3']],
    ['holds', 3],
    ['holds', undefined],
    ['reject', [-1]],
    ['reject', null],
    ['decided_at', 'yesterday'],
    ['decided_at', 1700000000000],
    ['reasons', 'busy'],
    ['reasons', [1]],
    ['reasons', ['r'.repeat(501)]],
    ['reasons', Array.from({ length: 33 }, () => 'r')],
    ['retry_after_ms', -1],
    ['retry_after_ms', 1.5],
    ['throttle', [7]],
    ['degrade', 'P3'],
    ['limits', { llm: -1 }],
    ['limits', { llm: '3' }],
    ['limits', { 'no spaces': 3 }],
    ['limits', [3]],
    ['breakers', { 'tool:x': 'closed' }],
    ['breakers', { 'tool:x': 'open', 'Bad Name': 'open' }],
    ['signals', [{ signal: 'x', scope: 'all', value: Number.NaN, level: 'normal' }]],
    ['signals', [{ signal: '', scope: 'all', value: 1, level: 'normal' }]],
    ['signals', {}],
  ];
  for (const [field, value] of badFields) {
    it(`refuses ${field} = ${JSON.stringify(value)?.slice(0, 30) ?? 'undefined'}`, () => {
      assertInvalid(() => parseDecision({ ...valid, [field]: value }), field);
      assertInvalid(() => encodeDecision({ ...valid, [field]: value }), field);
    });
  }
});
