package schemareg

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// maxReferences bounds the files one Protobuf schema may pull in through
// its references, so that a cycle or a flood of them ends.
const maxReferences = 256

// protobufSet resolves Protobuf schema s, id in the registry (0: not known
// by id), into the text a mapping.WriterSchema of the protobuf format
// carries: a FileDescriptorSet of its file and every file its references
// name, dependencies first, serialized and base64-encoded. Each file is
// read in the registry's serialized form (a FileDescriptorProto), asked
// for with format=serialized when the registry answered with .proto text.
// Imports of Protobuf's well-known types are not references: the mapper
// knows them.
func (r *Registry) protobufSet(ctx context.Context, s sr.Schema, id int) (string, error) {
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(s sr.Schema, refetch func(context.Context) (sr.Schema, error)) error
	add = func(s sr.Schema, refetch func(context.Context) (sr.Schema, error)) error {
		fd, err := fileDescriptor(s.Schema)
		if err != nil {
			if s, err = refetch(sr.WithParams(ctx, sr.Format("serialized"))); err != nil {
				return err
			}
			if fd, err = fileDescriptor(s.Schema); err != nil {
				return &schemaError{fmt.Errorf("the registry's serialized Protobuf schema: %w", err)}
			}
		}
		for _, ref := range s.References {
			if seen[ref.Name] {
				continue
			}
			seen[ref.Name] = true
			if len(seen) > maxReferences {
				return &schemaError{fmt.Errorf("more than %d referenced schemas", maxReferences)}
			}
			byVersion := func(ctx context.Context) (sr.Schema, error) {
				ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
				if err != nil {
					return sr.Schema{}, fmt.Errorf("reference %s (subject %s version %d): %w", ref.Name, ref.Subject, ref.Version, err)
				}
				return ss.Schema, nil
			}
			rs, err := byVersion(ctx)
			if err != nil {
				return err
			}
			if err := add(rs, byVersion); err != nil {
				return err
			}
		}
		set.File = append(set.File, fd)
		return nil
	}
	byID := func(ctx context.Context) (sr.Schema, error) {
		if id == 0 {
			return sr.Schema{}, &schemaError{fmt.Errorf("a Protobuf schema in .proto text, and no id to ask for its serialized form")}
		}
		return r.cl.SchemaByID(ctx, id)
	}
	if err := add(s, byID); err != nil {
		return "", err
	}
	b, err := proto.Marshal(&set)
	if err != nil {
		return "", fmt.Errorf("encode the schema's files: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// schemaError is a Protobuf schema deltaflow cannot read: its records are
// dead letters (the registry's own failures are waited out instead).
type schemaError struct{ err error }

func (e *schemaError) Error() string { return e.err.Error() }
func (e *schemaError) Unwrap() error { return e.err }

// fileDescriptor decodes a Protobuf schema in the registry's serialized
// form: a base64-encoded FileDescriptorProto.
func fileDescriptor(text string) (*descriptorpb.FileDescriptorProto, error) {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("not a serialized file descriptor: %w", err)
	}
	var fd descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(b, &fd); err != nil {
		return nil, fmt.Errorf("not a serialized file descriptor: %w", err)
	}
	return &fd, nil
}
