import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  prefixProblem,
  resourceFileToken,
  resourceProblem,
  stepNameProblem,
  taskTypeProblem,
  tenantIdProblem,
} from './names.js';

describe('name validation', () => {
  const cases: Array<[string, (v: unknown) => string | undefined, unknown, boolean]> = [
    ['tenant', tenantIdProblem, 'acme', true],
    ['tenant', tenantIdProblem, 'acme-01_x', true],
    ['tenant', tenantIdProblem, '0acme', true],
    ['tenant', tenantIdProblem, 'Acme', false],
    ['tenant', tenantIdProblem, 'a.b', false],
    ['tenant', tenantIdProblem, 'a*', false],
    ['tenant', tenantIdProblem, 'a>', false],
    ['tenant', tenantIdProblem, 'a b', false],
    ['tenant', tenantIdProblem, '', false],
    ['tenant', tenantIdProblem, 42, false],
    ['tenant', tenantIdProblem, 'a'.repeat(64), true],
    ['tenant', tenantIdProblem, 'a'.repeat(65), false],
    ['type', taskTypeProblem, 'research-report', true],
    ['type', taskTypeProblem, '1report', false],
    ['resource', resourceProblem, 'llm', true],
    ['resource', resourceProblem, 'tool:http', true],
    ['resource', resourceProblem, 'mcp:search-1', true],
    ['resource', resourceProblem, 'tool:', false],
    ['resource', resourceProblem, 'tool:a:b', false],
    ['resource', resourceProblem, 'tool.http', false],
    ['resource', resourceProblem, ':http', false],
    ['resource', resourceProblem, 'tool__http', false],
    ['resource', resourceProblem, 'tool:a__b', false],
    ['step', stepNameProblem, 'fetchPages', true],
    ['step', stepNameProblem, 'fetch pages', false],
    ['prefix', prefixProblem, 'sluice', true],
    ['prefix', prefixProblem, 'sluice-x', false],
    ['prefix', prefixProblem, 'Sluice', false],
  ];
  for (const [kind, fn, value, ok] of cases) {
    it(`${kind} ${JSON.stringify(value)} is ${ok ? 'accepted' : 'refused'}`, () => {
      const problem = fn(value);
      if (ok) assert.equal(problem, undefined);
      else assert.match(problem ?? '', /\S/);
    });
  }

  it('turns a resource into a file-safe token', () => {
    assert.equal(resourceFileToken('tool:http'), 'tool__http');
    assert.equal(resourceFileToken('llm'), 'llm');
  });
});
