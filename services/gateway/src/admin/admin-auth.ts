/**
 * Who may call `AdminService`: the holder of a valid admin key. The key is looked up on every call
 * (no cache), so a key revoked a moment ago is refused on its very next call.
 */
import { status, type Metadata } from '@grpc/grpc-js';
import { findKeyOwner, type Executor, type KeyOwner } from '@sluice/db';
import { GrpcError, readBearerKey, unauthenticated } from '../grpc/index.js';

/**
 * The owner of the call's admin key.
 *
 * @throws GrpcError `UNAUTHENTICATED` without a well-formed bearer key or for an unknown or
 *   revoked one; `PERMISSION_DENIED` for a valid key that is not an admin key.
 */
export async function authenticateAdmin(executor: Executor, metadata: Metadata): Promise<KeyOwner> {
  const key = readBearerKey(metadata);
  if (key === undefined) throw unauthenticated();
  const owner = await findKeyOwner(executor, key);
  if (owner === undefined) throw unauthenticated('the API key is not valid');
  if (!owner.isAdmin) {
    throw new GrpcError(status.PERMISSION_DENIED, 'AdminService requires an admin API key');
  }
  return owner;
}
