package bridge

import (
	"maps"
	"testing"
)

// The schema store's entries come back whole from a second bridge on the
// same server (a restarted process); another registry's entries, and the
// offsets of a table whose keys look alike, do not leak in.
func TestSchemaStoreRoundTrip(t *testing.T) {
	b, srv := externalBridge(t)
	ctx := t.Context()
	if got, err := b.SchemaStore("reg1").Load(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Load of an empty store = %v, %v", got, err)
	}
	want := map[string]string{"id.7": `{"type":"record","name":"R","fields":[]}`, "subject.cmVhZGluZ3MtdmFsdWU": "7"}
	for k, v := range want {
		if err := b.SchemaStore("reg1").Save(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SchemaStore("reg2").Save(ctx, "id.7", "another registry's"); err != nil {
		t.Fatal(err)
	}
	if err := b.PutOffset(ctx, "id", 7, OffsetRecord{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	again := newTestBridge(t, Config{URL: srv.ClientURL()})
	got, err := again.SchemaStore("reg1").Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Load = %v, want %v", got, want)
	}
}
