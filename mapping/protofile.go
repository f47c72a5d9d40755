package mapping

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// loadProtoFile compiles the .proto file at path, its imports resolved
// relative to its directory and Protobuf's well-known types known, into a
// schema as a registry's is (newProtoSchema), so that its messages make
// the same columns and are read the same way.
func loadProtoFile(path string) (*protoSchema, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{filepath.Dir(path)}})}
	compiled, err := c.Compile(context.Background(), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		// The well-known types are left to newProtoSchema, which takes this
		// binary's: wrapped and the walk know them by their descriptors.
		if seen[fd.Path()] || isWellKnown(fd.Path()) {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(compiled[0])
	return newProtoSchema(&set)
}

// isWellKnown reports whether path is one of the well-known types' files
// this binary has.
func isWellKnown(path string) bool {
	_, err := protoregistry.GlobalFiles.FindFileByPath(path)
	return err == nil && strings.HasPrefix(path, "google/protobuf/")
}

// protoFileColumns checks a protobuf table's section that gives a
// schema_file: Message names the message of its records (required: a plain
// body does not say), whose fields make the columns when none are given.
func (c *Config) protoFileColumns() error {
	schema, err := loadProtoFile(c.SchemaFile)
	if err != nil {
		return fmt.Errorf("%s.schema_file: %s: %w", c.key(), c.SchemaFile, err)
	}
	if c.Message == "" {
		return fmt.Errorf("%s.message: the records of a protobuf schema_file carry no message indexes: give the full name of their message in %s", c.key(), c.SchemaFile)
	}
	if c.protoMessage, err = schema.message(c.Message); err != nil {
		return fmt.Errorf("%s.message: %s: %w", c.key(), c.SchemaFile, err)
	}
	if len(c.Columns) == 0 {
		if c.Columns, err = protobufColumns(c.protoMessage); err != nil {
			return fmt.Errorf("%s.schema_file: %s: %s: %w", c.key(), c.SchemaFile, c.Message, err)
		}
		c.derived = true
		c.setOrigin()
	}
	return nil
}

// protobufValues reads the records of a protobuf table: plain bodies of
// the schema file's message, or through the registry.
func (c *Config) protobufValues() func(p *plan) values {
	md := c.protoMessage
	if md == nil {
		return registryFormatValues(Protobuf, c.Registry)
	}
	return func(p *plan) values {
		return &protoValues{p: p, cur: compileProtoWalk(md, p, 0), slots: make([]protoSlot, len(p.nodes)), plain: true}
	}
}
