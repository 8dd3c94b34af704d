// Package decode turns the bytes of topology records into readable forms:
// JSON through a protobuf message type chosen by the record's path
// (Registry), text rendered as JSON (Text), and a schema-less dump of the
// protobuf wire format (Raw).
//
// A Registry knows message types from the binary itself (Builtin: every
// record of Vitess's topology layout, compiled in from proto/topodatapb and
// proto/vschemapb, and any other generated package the program imports)
// or from a protoset (a FileDescriptorSet, as "protoc --include_imports
// --descriptor_set_out" writes) loaded at run time (FromProtoset,
// ReadProtoset), which adds its types to the layout's.
//
// The type of a record is chosen by its path: first a rule for its last
// segment (Register), then a rule by path pattern (RegisterPath), then
// Vitess's layout (Layout: keyspaces/*/Keyspace, keyspaces/*/VSchema,
// tablets/*/Tablet, ExternalClusters/vitess/*, ...), and last the one
// message whose short name is the last segment. Locks' and elections'
// files hold text (Identify); Decode renders them with Text. Decode
// tolerates fields a rule-chosen type does not have (a newer writer's) and
// shows them under "@unknown"; JSON, for a type the caller chose, refuses
// them as the sign of a wrong type.
//
// The package holds no command-line code: it returns values and typed
// errors (*TypeError, *UnknownFieldsError). A Registry is safe for
// concurrent use once built; Register and RegisterPath must not race with
// lookups.
package decode
