package schema

import "context"

// Registry is what the codecs need of a Confluent-compatible Schema
// Registry. NewClient returns one over HTTP; schematest.Memory is one in
// memory for tests.
type Registry interface {
	// SchemaByID returns the schema a record's header names.
	SchemaByID(ctx context.Context, id int) (Schema, error)
	// Latest returns the subject's latest version.
	Latest(ctx context.Context, subject string) (Subject, error)
	// SubjectVersion returns one version of a subject, for resolving
	// references.
	SubjectVersion(ctx context.Context, subject string, version int) (Subject, error)
	// Register registers s under subject, or finds it registered
	// already, and returns its id and version; an incompatible schema
	// is FaultSchema.
	Register(ctx context.Context, subject string, s Schema) (Subject, error)
}
