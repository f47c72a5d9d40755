package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestDebeziumMariaDB: a MariaDB table (a snapshot of 200 rows, then one
// key updated again and again: by single statements, several times in one
// transaction, twice in one multi-row event; a multi-row update, deletes,
// re-inserts, random updates; the binlog rotated twice a round) streamed by
// Debezium's MariaDB connector becomes, in an upsert table that says no
// sequence_by and has a cdc.source.binlog_position column, exactly SELECT *
// FROM accounts (delta-rs and DuckDB), every row's sequence the binlog
// position of its key's last change. Then old change events of a live key
// and of a deleted one, produced again, change nothing: they are older
// than the rows (and the delete) by their binlog positions, which the
// Kafka offsets would not tell.
func TestDebeziumMariaDB(t *testing.T) {
	r := startRig(t, "mariadb")
	r.source = r.mariadb
	r.mariadbSQL(`CREATE TABLE accounts (id int PRIMARY KEY, name varchar(40), balance bigint);
		INSERT INTO accounts WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 200)
		SELECT n, CONCAT('a', n), n * 10 FROM g;`)
	topic := strings.TrimSpace(r.cdc("connector", scenario.Unique("mariadb"), "accounts", strings.ReplaceAll(scenario.Unique("mdb"), "-", "_")))
	r.dirs["accounts_mariadb"] = filepath.Join(t.TempDir(), "accounts_mariadb")
	r.config = filepath.Join(t.TempDir(), "deltaflow.yaml")
	yaml := fmt.Sprintf(`tables:
  - name: accounts_mariadb
    uri: %s
    topics: [%s]
    write_mode: upsert
    cdc: debezium
    key_columns: [id]
    partition_columns: []
    columns:
      - {name: id, type: long, required: true}
      - {name: name, type: string}
      - {name: balance, type: long}
      - {name: seq, type: long, source: cdc.source.binlog_position, required: true}
flush:
  interval: 1s
log:
  format: text
`, r.dirs["accounts_mariadb"], topic)
	if err := os.WriteFile(r.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// No sequence_by: the binlog position column is the default.
	out, err := exec.Command(scenario.Binary(t), "config", "check", "--config", r.config).CombinedOutput()
	if err != nil || !regexp.MustCompile(`name: accounts_mariadb\n(    .*\n)*    sequence_by: seq\n`).Match(out) {
		t.Fatalf("config check: %v: accounts_mariadb is not ordered by its binlog position column:\n%s", err, out)
	}

	for round := range 2 {
		r.mariadbWorkload(round)
		r.runUntilEqual(fmt.Sprintf("after round %d", round))
	}
	changes := r.changes(topic)
	seqs := r.deltaSeqs("accounts_mariadb")
	last := map[int64]int64{} // the greatest binlog position of each key's changes
	// Old changes of a deleted key and of a live one: the snapshot read of
	// key 160 (deleted in round 1), the first update of key 1 after the
	// first rotation.
	var oldDeleted, oldLive *kgo.Record
	for _, c := range changes {
		last[c.id] = max(last[c.id], c.pos)
		if c.id == 160 && c.op == "r" {
			oldDeleted = c.rec
		}
		if c.id == 1 && c.op == "u" && c.file == "mariadb-bin.000002" && oldLive == nil {
			oldLive = c.rec
		}
	}
	for id := range r.mariadb() {
		if seqs[id] != last[id] {
			t.Errorf("key %d: seq %d, want the binlog position of its last change, %d", id, seqs[id], last[id])
		}
	}
	if oldDeleted == nil || oldLive == nil {
		t.Fatalf("the old changes to produce again are not among the topic's %d changes", len(changes))
	}
	r.produce(oldDeleted, oldLive)
	r.runUntilEqual("after old changes were produced again")
}

// mariadbSQL runs statements in MariaDB, tab-separated rows out.
func (r *rig) mariadbSQL(statements string) string {
	r.t.Helper()
	return r.cdc("mariadb", "-N", "-B", "-e", statements)
}

// mariadb is SELECT * FROM accounts.
func (r *rig) mariadb() map[int64]account {
	r.t.Helper()
	return accounts(r.mariadbSQL("SELECT id, name, balance FROM accounts"), "\t")
}

// mariadbWorkload runs a round of changes whose binlog positions order
// what their offsets order too: key 1 updated by five statements, the
// binlog rotated (FLUSH BINARY LOGS: its file index grows), key 1 updated
// twice in one transaction (two events), then twice in one multi-row event
// (one pos, rows 0 and 1), a 51-row update (one event), deletes, a
// re-insert, a rotation again, random updates.
func (r *rig) mariadbWorkload(round int) {
	r.t.Helper()
	var b strings.Builder
	for i := range 5 {
		fmt.Fprintf(&b, "UPDATE accounts SET balance = balance + %d WHERE id = 1;\n", i+1)
	}
	b.WriteString("FLUSH BINARY LOGS;\n")
	fmt.Fprintf(&b, "BEGIN; UPDATE accounts SET balance = balance * 2, name = 'tx%d' WHERE id = 1; "+
		"UPDATE accounts SET balance = balance + 1 WHERE id = 1; UPDATE accounts SET name = 'tx' WHERE id = 2; COMMIT;\n", round)
	fmt.Fprintf(&b, "INSERT INTO accounts VALUES (1, 'odku-a%d', 1), (1, 'odku-b%d', 2), (3, 'odku-c', 3) "+
		"ON DUPLICATE KEY UPDATE name = VALUES(name), balance = VALUES(balance);\n", round, round)
	b.WriteString("UPDATE accounts SET balance = balance + 7 WHERE id BETWEEN 10 AND 60;\n")
	fmt.Fprintf(&b, "DELETE FROM accounts WHERE id BETWEEN %d AND %d;\n", 150+round*10, 155+round*10)
	fmt.Fprintf(&b, "INSERT INTO accounts VALUES (%d, 'back', 1);\n", 151+round*10)
	b.WriteString("FLUSH BINARY LOGS;\n")
	for range 30 {
		fmt.Fprintf(&b, "UPDATE accounts SET balance = %d, name = 'r%d' WHERE id = %d;\n", r.rng.IntN(1e6), round, 1+r.rng.IntN(200))
	}
	r.mariadbSQL(b.String())
}

// change is a change event of the topic: its key's id, operation, binlog
// file and position as cdc.source.binlog_position makes it.
type change struct {
	id   int64
	op   string
	file string
	pos  int64
	rec  *kgo.Record
}

// changes reads the topic from its start to its end offsets; tombstones
// are left out.
func (r *rig) changes(topic string) []change {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.servers.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		r.t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	var out []change
	for read := int64(0); read < end.Offset; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			r.t.Fatalf("read %s: %v", topic, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			read = rec.Offset + 1
			if rec.Value == nil {
				return
			}
			var ev struct {
				Op     string
				Before struct{ ID int64 }
				After  struct{ ID int64 }
				Source struct {
					File     string
					Pos, Row int64
				}
			}
			if err := json.Unmarshal(rec.Value, &ev); err != nil {
				r.t.Fatalf("%s offset %d: %v", topic, rec.Offset, err)
			}
			id := ev.After.ID
			if ev.Op == "d" {
				id = ev.Before.ID
			}
			index, err := strconv.ParseInt(ev.Source.File[strings.LastIndexByte(ev.Source.File, '.')+1:], 10, 64)
			if err != nil {
				r.t.Fatalf("%s offset %d: binlog file %q", topic, rec.Offset, ev.Source.File)
			}
			out = append(out, change{id: id, op: ev.Op, file: ev.Source.File, pos: index<<45 | ev.Source.Pos<<13 | ev.Source.Row, rec: rec})
		})
	}
	return out
}

// produce writes records again, key and value, to their topic.
func (r *rig) produce(recs ...*kgo.Record) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.servers.Brokers...))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	for _, rec := range recs {
		if err := cl.ProduceSync(r.t.Context(), &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value}).FirstErr(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// deltaSeqs is the seq column of table name by id, as delta-rs reads it.
func (r *rig) deltaSeqs(name string) map[int64]int64 {
	r.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(testenv.DeltaRS(r.t, nil, "read", r.dirs[name], "--rows", "--query")))
	dec.UseNumber()
	var view struct {
		Rows []struct{ ID, Seq json.Number }
	}
	if err := dec.Decode(&view); err != nil {
		r.t.Fatal(err)
	}
	out := map[int64]int64{}
	for _, row := range view.Rows {
		id, _ := row.ID.Int64()
		out[id], _ = row.Seq.Int64()
	}
	return out
}
