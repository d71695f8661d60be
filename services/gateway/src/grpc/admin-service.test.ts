/**
 * AdminService's declarations against the compiled descriptor set: `loadApi` loads the service
 * with the methods the handlers implement, and refuses a set whose methods differ.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { ADMIN_SERVICE_METHOD_KINDS, ADMIN_SERVICE_NAME } from './admin-service.js';
import { parseDescriptorSet, readDescriptorSet } from './descriptor-set.js';
import { loadApi } from './load-api.js';

interface PlainSet {
  file: {
    name: string;
    service?: { name: string; method: { name: string; serverStreaming?: boolean }[] }[];
  }[];
}

/** The real descriptor set with the AdminService descriptor changed by `edit`. */
function withEditedAdminService(
  edit: (service: NonNullable<PlainSet['file'][number]['service']>[number]) => void,
) {
  const decoded = descriptor.FileDescriptorSet.decode(readDescriptorSet().bytes);
  const plain = descriptor.FileDescriptorSet.toObject(decoded, { arrays: true }) as PlainSet;
  const file = plain.file.find((f) => f.name === 'sluice/v1/admin_service.proto');
  const service = file?.service?.find((s) => s.name === 'AdminService');
  assert.ok(service !== undefined, 'the set defines AdminService');
  edit(service);
  const bytes = descriptor.FileDescriptorSet.encode(
    descriptor.FileDescriptorSet.fromObject(plain),
  ).finish();
  return parseDescriptorSet(bytes, 'edited.binpb');
}

describe('AdminService declarations', () => {
  it('match the compiled service, method for method', () => {
    const api = loadApi(readDescriptorSet());
    assert.deepEqual(
      Object.keys(api.adminService).sort(),
      Object.keys(ADMIN_SERVICE_METHOD_KINDS).sort(),
    );
    assert.equal(api.adminService.RevokeApiKey?.path, `/${ADMIN_SERVICE_NAME}/RevokeApiKey`);
  });

  it('carry the proto field names on the wire', () => {
    const method = loadApi(readDescriptorSet()).adminService.CreateApiKey;
    assert.ok(method !== undefined);
    const bytes = method.responseSerialize({
      key: { key_id: 'k', tenant_id: 'acme', prefix: 'slk_abcdef', admin: true },
      secret: 's',
    });
    const decoded = method.responseDeserialize(bytes) as Record<string, unknown>;
    assert.deepEqual(decoded, {
      key: {
        key_id: 'k',
        tenant_id: 'acme',
        prefix: 'slk_abcdef',
        admin: true,
        create_time: null,
        revoke_time: null,
      },
      secret: 's',
    });
  });

  it('refuse a set that lacks a method', () => {
    const set = withEditedAdminService((service) => {
      service.method = service.method.filter((m) => m.name !== 'ListApiKeys');
    });
    assert.throws(
      () => loadApi(set),
      /declares sluice\.v1\.AdminService as \[.*npm run proto:build/,
    );
  });

  it('refuse a set where a method streams', () => {
    const set = withEditedAdminService((service) => {
      const method = service.method.find((m) => m.name === 'ListTenants');
      assert.ok(method !== undefined);
      method.serverStreaming = true;
    });
    assert.throws(() => loadApi(set), /ListTenants:server_streaming/);
  });
});
