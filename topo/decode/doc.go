// Package decode turns the bytes of topology records into readable forms:
// JSON through a protobuf message type chosen by the record's path
// (Registry), and a schema-less dump of the protobuf wire format (Raw).
//
// A Registry knows message types from the binary itself (Builtin:
// topokit's CellInfo and the other types compiled in) or from a protoset
// (a FileDescriptorSet, as "protoc --include_imports --descriptor_set_out"
// writes) loaded at run time (FromProtoset, ReadProtoset). The type of a
// record is chosen by its path's last segment: the records Vitess stores
// (Keyspace, Shard, Tablet, SrvKeyspace, VSchema, ...) map to their
// message types when the registry has them (see Register for more), and
// any other base name to the one message of that short name.
//
// The package holds no command-line code: it returns values and typed
// errors (*TypeError). A Registry is safe for concurrent use once built;
// Register must not race with lookups.
package decode
