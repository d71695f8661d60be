/**
 * The compiled API: the `FileDescriptorSet` that `buf build` writes to `proto/sluice.binpb`.
 *
 * The gateway builds its service definitions from it (see `load-api.ts`) and serves its files,
 * byte for byte, over server reflection (see `reflection.ts`). Serving the compiler's own files
 * keeps their real names and `import`s, which strict reflection clients such as grpcurl need.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { z } from 'zod';

/** Where `npm run proto:build` writes the descriptor set: `<repo>/proto/sluice.binpb`. */
export const DEFAULT_DESCRIPTOR_SET_PATH = fileURLToPath(
  new URL('../../../../proto/sluice.binpb', import.meta.url),
);

/** The command that (re)builds the descriptor set, named in every error about it. */
export const DESCRIPTOR_SET_BUILD_COMMAND = 'npm run proto:build';

/** The descriptor set is missing, unreadable, malformed or does not match this code. */
export class DescriptorSetError extends Error {
  override readonly name = 'DescriptorSetError';
}

/** What a fully-qualified symbol of the descriptor set is. */
export type SymbolKind =
  'message' | 'field' | 'oneof' | 'enum' | 'enum_value' | 'service' | 'method' | 'extension';

/** One `.proto` file of the set. */
export interface DescriptorFile {
  /** Path as compiled, e.g. `sluice/v1/task.proto`. */
  readonly name: string;
  /** Protobuf package, e.g. `sluice.v1`; empty for none. */
  readonly package: string;
  /** Names of the files this one imports, as declared. */
  readonly dependencies: readonly string[];
  /** The serialized `google.protobuf.FileDescriptorProto`, as the compiler wrote it. */
  readonly bytes: Uint8Array;
}

/** A parsed descriptor set with the lookups server reflection needs. */
export interface DescriptorSet {
  /** Where it was read from, for error messages. */
  readonly source: string;
  /** The files by name, in the order of the set (dependencies before dependents). */
  readonly files: ReadonlyMap<string, DescriptorFile>;
  /** Every symbol by its fully-qualified name (no leading dot). */
  readonly symbols: ReadonlyMap<string, { readonly kind: SymbolKind; readonly file: string }>;
  /** Extensions by extended message (no leading dot), then by field number, to their file. */
  readonly extensions: ReadonlyMap<string, ReadonlyMap<number, string>>;
  /** The set re-encoded as a `FileDescriptorSet` of exactly {@link DescriptorFile.bytes}. */
  readonly bytes: Uint8Array;
}

/**
 * Reads and parses the descriptor set at `path`.
 *
 * @throws DescriptorSetError when the file is missing (naming the command that builds it) or
 *   cannot be parsed.
 */
export function readDescriptorSet(path: string = DEFAULT_DESCRIPTOR_SET_PATH): DescriptorSet {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    const reason =
      (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : 'cannot be read';
    throw new DescriptorSetError(
      `the API descriptor set ${path} ${reason}; build it with \`${DESCRIPTOR_SET_BUILD_COMMAND}\``,
      { cause: err },
    );
  }
  return parseDescriptorSet(bytes, path);
}

/**
 * Parses a serialized `FileDescriptorSet` (or a Buf image, which is wire-compatible).
 *
 * @param source - Where the bytes came from; used in error messages.
 * @throws DescriptorSetError when the bytes are not a descriptor set, a file imports one that is
 *   not in the set (built with `--exclude-imports`), or two files define the same symbol.
 */
export function parseDescriptorSet(bytes: Uint8Array, source: string): DescriptorSet {
  let parsed: { raw: Uint8Array; proto: FileProto }[];
  try {
    parsed = splitFileDescriptorSet(bytes)
      .map(withoutField(BUF_IMAGE_EXTENSION_FIELD))
      .map((raw) => {
        const decoded = descriptor.FileDescriptorProto.decode(raw);
        const plain: unknown = descriptor.FileDescriptorProto.toObject(decoded, { arrays: true });
        return { raw, proto: FileProtoSchema.parse(plain) };
      });
  } catch (err) {
    throw new DescriptorSetError(
      `${source} is not a valid descriptor set; rebuild it with \`${DESCRIPTOR_SET_BUILD_COMMAND}\``,
      { cause: err },
    );
  }

  const files = new Map<string, DescriptorFile>();
  for (const { raw, proto } of parsed) {
    files.set(proto.name, {
      name: proto.name,
      package: proto.package,
      dependencies: proto.dependency,
      bytes: raw,
    });
  }
  for (const file of files.values()) {
    const missing = file.dependencies.filter((dependency) => !files.has(dependency));
    if (missing.length > 0) {
      throw new DescriptorSetError(
        `${source}: ${file.name} imports ${missing.join(', ')}, which the set does not contain; ` +
          `rebuild it with \`${DESCRIPTOR_SET_BUILD_COMMAND}\` (without --exclude-imports)`,
      );
    }
  }

  const index = new SymbolIndex(source);
  for (const { proto } of parsed) index.addFile(proto);

  return {
    source,
    files,
    symbols: index.symbols,
    extensions: index.extensions,
    bytes: encodeFileDescriptorSet(parsed.map(({ raw }) => raw)),
  };
}

/**
 * The file `name` followed by every file it depends on, directly or transitively, each once,
 * nearest first — the answer server reflection gives to a file query.
 *
 * @throws DescriptorSetError when `name` is not in the set.
 */
export function fileWithDependencies(set: DescriptorSet, name: string): DescriptorFile[] {
  const result: DescriptorFile[] = [];
  const seen = new Set<string>([name]);
  const queue = [name];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const file = set.files.get(next);
    if (file === undefined) throw new DescriptorSetError(`${set.source} has no file ${next}`);
    result.push(file);
    for (const dependency of file.dependencies) {
      if (!seen.has(dependency)) {
        seen.add(dependency);
        queue.push(dependency);
      }
    }
  }
  return result;
}

/** `FileDescriptorSet.file` (repeated `FileDescriptorProto`). */
const FILE_DESCRIPTOR_SET_FILE_FIELD = 1;

/**
 * The field Buf adds to each file of an image (`buf_extension`: whether the file is an import,
 * its module). It is Buf's bookkeeping, not part of `FileDescriptorProto`, so it is dropped before
 * files are served; `buf build --as-file-descriptor-set` would leave it out in the first place.
 */
const BUF_IMAGE_EXTENSION_FIELD = 8042;

const WIRE_TYPE_LENGTH_DELIMITED = 2;

/** The serialized files of a `FileDescriptorSet`, without decoding (and so altering) them. */
function splitFileDescriptorSet(bytes: Uint8Array): Uint8Array[] {
  const files: Uint8Array[] = [];
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag >>> 3 === FILE_DESCRIPTOR_SET_FILE_FIELD && (tag & 7) === WIRE_TYPE_LENGTH_DELIMITED) {
      files.push(reader.bytes());
    } else {
      reader.skipType(tag & 7);
    }
  }
  return files;
}

/** A function that copies a message's bytes without the top-level field `fieldNumber`. */
function withoutField(fieldNumber: number): (message: Uint8Array) => Uint8Array {
  return (message) => {
    const kept: Uint8Array[] = [];
    const reader = protobuf.Reader.create(message);
    while (reader.pos < reader.len) {
      const start = reader.pos;
      const tag = reader.uint32();
      reader.skipType(tag & 7);
      if (tag >>> 3 !== fieldNumber) kept.push(message.subarray(start, reader.pos));
    }
    return Buffer.concat(kept);
  };
}

function encodeFileDescriptorSet(files: readonly Uint8Array[]): Uint8Array {
  const writer = protobuf.Writer.create();
  for (const file of files) {
    writer.uint32((FILE_DESCRIPTOR_SET_FILE_FIELD << 3) | WIRE_TYPE_LENGTH_DELIMITED).bytes(file);
  }
  return writer.finish();
}

// The parts of descriptor.proto the symbol index reads, as protobufjs's `toObject` names them.
const NamedSchema = z.object({ name: z.string() });
const FieldProtoSchema = z.object({
  name: z.string(),
  number: z.number().int(),
  extendee: z.string().optional(),
});
const EnumProtoSchema = z.object({ name: z.string(), value: z.array(NamedSchema).default([]) });
const ServiceProtoSchema = z.object({ name: z.string(), method: z.array(NamedSchema).default([]) });

interface MessageProto {
  name: string;
  field: z.infer<typeof FieldProtoSchema>[];
  extension: z.infer<typeof FieldProtoSchema>[];
  nestedType: MessageProto[];
  enumType: z.infer<typeof EnumProtoSchema>[];
  oneofDecl: z.infer<typeof NamedSchema>[];
}
const MessageProtoSchema: z.ZodType<MessageProto> = z.lazy(() =>
  z.object({
    name: z.string(),
    field: z.array(FieldProtoSchema).default([]),
    extension: z.array(FieldProtoSchema).default([]),
    nestedType: z.array(MessageProtoSchema).default([]),
    enumType: z.array(EnumProtoSchema).default([]),
    oneofDecl: z.array(NamedSchema).default([]),
  }),
);
const FileProtoSchema = z.object({
  name: z.string().min(1),
  package: z.string().default(''),
  dependency: z.array(z.string()).default([]),
  messageType: z.array(MessageProtoSchema).default([]),
  enumType: z.array(EnumProtoSchema).default([]),
  service: z.array(ServiceProtoSchema).default([]),
  extension: z.array(FieldProtoSchema).default([]),
});
type FileProto = z.infer<typeof FileProtoSchema>;

/** Collects the fully-qualified names protobuf scoping gives every definition of a file. */
class SymbolIndex {
  readonly symbols = new Map<string, { kind: SymbolKind; file: string }>();
  readonly extensions = new Map<string, Map<number, string>>();
  private file = '';

  constructor(private readonly source: string) {}

  addFile(proto: FileProto): void {
    this.file = proto.name;
    const scope = proto.package;
    for (const message of proto.messageType) this.addMessage(scope, message);
    for (const enumProto of proto.enumType) this.addEnum(scope, enumProto);
    for (const extension of proto.extension) this.addExtension(scope, extension);
    for (const service of proto.service) {
      const serviceName = qualify(scope, service.name);
      this.add(serviceName, 'service');
      for (const method of service.method) this.add(qualify(serviceName, method.name), 'method');
    }
  }

  private addMessage(scope: string, message: MessageProto): void {
    const name = qualify(scope, message.name);
    this.add(name, 'message');
    for (const field of message.field) this.add(qualify(name, field.name), 'field');
    for (const oneof of message.oneofDecl) this.add(qualify(name, oneof.name), 'oneof');
    for (const nested of message.nestedType) this.addMessage(name, nested);
    for (const enumProto of message.enumType) this.addEnum(name, enumProto);
    for (const extension of message.extension) this.addExtension(name, extension);
  }

  private addEnum(scope: string, enumProto: z.infer<typeof EnumProtoSchema>): void {
    this.add(qualify(scope, enumProto.name), 'enum');
    // Enum values are siblings of their enum (C++ scoping rules), not its children.
    for (const value of enumProto.value) this.add(qualify(scope, value.name), 'enum_value');
  }

  private addExtension(scope: string, extension: z.infer<typeof FieldProtoSchema>): void {
    this.add(qualify(scope, extension.name), 'extension');
    const extendee = (extension.extendee ?? '').replace(/^\./, '');
    let byNumber = this.extensions.get(extendee);
    if (byNumber === undefined) {
      byNumber = new Map();
      this.extensions.set(extendee, byNumber);
    }
    byNumber.set(extension.number, this.file);
  }

  private add(name: string, kind: SymbolKind): void {
    const existing = this.symbols.get(name);
    if (existing !== undefined) {
      throw new DescriptorSetError(
        `${this.source}: ${name} is defined in both ${existing.file} and ${this.file}`,
      );
    }
    this.symbols.set(name, { kind, file: this.file });
  }
}

function qualify(scope: string, name: string): string {
  return scope === '' ? name : `${scope}.${name}`;
}
