/**
 * Opaque page tokens of `ListTenants`: the id of the last tenant of a page (keyset pagination in
 * id order, stable while tenants are added).
 */
import { tenantIdProblem } from '@sluice/core';

/** Marks a token as ours and versions its format. */
const TOKEN_TAG = 'tenants.v1:';

/** Encodes the position after the tenant `tenantId`. */
export function encodeTenantPageToken(tenantId: string): string {
  return Buffer.from(`${TOKEN_TAG}${tenantId}`, 'utf8').toString('base64url');
}

/** The tenant id a token continues after; `null` when it is not one this module made. */
export function decodeTenantPageToken(token: string): string | null {
  const text = Buffer.from(token, 'base64url').toString('utf8');
  if (!text.startsWith(TOKEN_TAG)) return null;
  const tenantId = text.slice(TOKEN_TAG.length);
  return tenantIdProblem(tenantId) === undefined ? tenantId : null;
}
