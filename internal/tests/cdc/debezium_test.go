// Package cdc tests `cdc: debezium` against the real thing: PostgreSQL
// streamed by Debezium's Postgres connector in Kafka Connect
// (scripts/cdc.sh) into the real broker, then deltaflow: the Delta table
// must equal the Postgres table, through SIGKILLs.
package cdc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// rig is a PostgreSQL table, its Debezium topics (change events through
// the JSON converter with schemas and without, and the row images
// ExtractNewRecordState makes of them) and three deltaflow upsert tables
// of them in local directories; and with PostgreSQL, a second table keyed
// by a numeric, ledger, with two (its change events with schemas and
// without).
type rig struct {
	t       *testing.T
	env     []string // cdc.sh's
	servers scenario.Servers
	config  string
	dirs    map[string]string // table directory by table name
	ledgers map[string]string // the ledger tables' directories by name
	group   string
	rng     *rand.Rand
	// source is the source table's rows: what every Delta table must hold.
	source func() map[int64]account
	// temporal is the table that has the date and timestamp columns, born
	// and seen (the others leave them out).
	temporal string
}

// startRig starts the CDC rig with database db (cdc.sh start DB).
func startRig(t *testing.T, db string) *rig {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	brokers := testenv.Kafka(t)
	r := &rig{t: t, group: scenario.Unique("cdc-group"), dirs: map[string]string{}, ledgers: map[string]string{}, rng: rand.New(rand.NewPCG(3, 4)),
		servers: scenario.Servers{Brokers: brokers, NATSURL: testenv.NATS(t), S3: testenv.MinIO(t)}}
	r.env = append(os.Environ(), "DELTAFLOW_STATE="+t.TempDir(), "CDC_KAFKA_BROKERS="+strings.Join(brokers, ","))
	r.cdc("start", db)
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(scenario.RepoRoot(t), "scripts", "cdc.sh"), "stop")
		cmd.Env = r.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("cdc.sh stop: %v\n%s", err, out)
		}
	})
	return r
}

func newRig(t *testing.T) *rig {
	r := startRig(t, "postgres")
	r.source = r.postgres
	// amount is a numeric(12,2) (Debezium's Decimal: negative, zero and
	// positive), price a numeric without precision (its
	// VariableScaleDecimal, of up to 20 fraction digits), tier a
	// numeric(4,1) that partitions accounts_plain (-1.5, 0.0, null, 1.5).
	// born is a date, seen a timestamp (without time zone): Debezium's
	// Date and MicroTimestamp, numbers whose unit the schema names, read
	// by accounts_schemas (before 1970 too; null for some).
	r.sql(`CREATE TABLE accounts (id int PRIMARY KEY, name text, balance bigint, amount numeric(12,2), price numeric, tier numeric(4,1),
		born date, seen timestamp);
		INSERT INTO accounts SELECT g, 'a' || g, g * 10, g * 1.25 - 100, CASE WHEN g % 9 = 0 THEN NULL ELSE g / 7.0 END,
		CASE WHEN g % 4 = 3 THEN NULL ELSE (g % 4) * 1.5 - 1.5 END,
		CASE WHEN g % 11 = 0 THEN NULL ELSE DATE '1969-12-25' + g * 50 END,
		CASE WHEN g % 13 = 0 THEN NULL ELSE TIMESTAMP '1969-12-31 23:00:00.123456' + g * INTERVAL '1 day 1 hour 1.000001 second' END
		FROM generate_series(1, 200) g;
		CREATE TABLE ledger (id numeric(10,2) PRIMARY KEY, note text);
		INSERT INTO ledger SELECT (g - 25) * 1.25, 'n' || g FROM generate_series(1, 50) g;`)
	prefix := strings.ReplaceAll(scenario.Unique("pg"), "-", "_")
	plain := strings.TrimSpace(r.cdc("connector", prefix+"-plain", "accounts", prefix+"_plain"))
	schemas := strings.TrimSpace(r.cdcEnv([]string{"CDC_SCHEMAS_ENABLE=true"}, "connector", prefix+"-schemas", "accounts", prefix+"_schemas"))
	// Debezium's ExtractNewRecordState: the row image itself, a delete
	// rewritten as its before image with __deleted = "true"; its decimals
	// as text (decimal.handling.mode=string).
	flat := strings.TrimSpace(r.cdcEnv([]string{`CDC_CONNECTOR_EXTRA={"transforms": "unwrap", "decimal.handling.mode": "string", ` +
		`"transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState", ` +
		`"transforms.unwrap.delete.tombstone.handling.mode": "rewrite"}`}, "connector", prefix+"-flat", "accounts", prefix+"_flat"))
	// ledger's numeric(10,2) primary key is in each record key as its
	// value has it: base64, its scale in the key's schema or, without
	// schemas, the column's.
	ledgerPlain := strings.TrimSpace(r.cdc("connector", prefix+"-ledger-plain", "ledger", prefix+"_ledger_plain"))
	ledgerSchemas := strings.TrimSpace(r.cdcEnv([]string{"CDC_SCHEMAS_ENABLE=true"}, "connector", prefix+"-ledger-schemas", "ledger", prefix+"_ledger_schemas"))
	var yaml strings.Builder
	yaml.WriteString("tables:\n")
	for name, table := range map[string]struct{ topic, keys, partitions string }{
		"accounts_plain":   {plain, "    cdc: debezium\n", "tier"}, // a row moves when its tier changes
		"accounts_schemas": {schemas, "    cdc: debezium\n", ""},   // ordered by its lsn column, the default
		"accounts_flat":    {flat, "    delete_when: \"__deleted = 'true'\"\n", ""},
	} {
		r.dirs[name] = filepath.Join(t.TempDir(), name)
		fmt.Fprintf(&yaml, `  - name: %s
    uri: %s
    topics: [%s]
    write_mode: upsert
%s    key_columns: [id]
    partition_columns: [%s]
    columns:
      - {name: id, type: long, required: true}
      - {name: name, type: string}
      - {name: balance, type: long}
      - {name: amount, type: "decimal(12,2)"}
      - {name: price, type: "decimal(20,4)"}
      - {name: tier, type: "decimal(4,1)"}
`, name, r.dirs[name], table.topic, table.keys, table.partitions)
		switch name {
		case "accounts_flat":
			yaml.WriteString("      - {name: __deleted, type: string}\n")
		case "accounts_schemas": // changes ordered by their position in the WAL
			yaml.WriteString("      - {name: lsn, type: long, source: cdc.source.lsn, required: true}\n")
			yaml.WriteString("      - {name: born, type: date}\n      - {name: seen, type: timestamp}\n")
			r.temporal = name
		}
	}
	for name, topic := range map[string]string{"ledger_plain": ledgerPlain, "ledger_schemas": ledgerSchemas} {
		r.ledgers[name] = filepath.Join(t.TempDir(), name)
		fmt.Fprintf(&yaml, `  - name: %s
    uri: %s
    topics: [%s]
    write_mode: upsert
    cdc: debezium
    key_format: json
    key_columns: [id]
    partition_columns: []
    columns:
      - {name: id, type: "decimal(10,2)", source: kafka.key.id, required: true}
      - {name: note, type: string}
`, name, r.ledgers[name], topic)
	}
	yaml.WriteString("flush:\n  interval: 1s\nlog:\n  format: text\n")
	r.config = filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(r.config, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The schemas table says no sequence_by: its cdc.source.lsn column is
	// the default, which the effective configuration shows.
	out, err := exec.Command(scenario.Binary(t), "config", "check", "--config", r.config).CombinedOutput()
	if err != nil || !regexp.MustCompile(`name: accounts_schemas\n(    .*\n)*    sequence_by: lsn\n`).Match(out) {
		t.Fatalf("config check: %v: accounts_schemas is not ordered by its lsn column:\n%s", err, out)
	}
	return r
}

// cdc runs scripts/cdc.sh with args and returns its stdout.
func (r *rig) cdc(args ...string) string { return r.cdcEnv(nil, args...) }

func (r *rig) cdcEnv(env []string, args ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(scenario.RepoRoot(r.t), "scripts", "cdc.sh"), args...)
	cmd.Env = append(r.env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("cdc.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// sql runs statements in PostgreSQL.
func (r *rig) sql(statements string) string {
	r.t.Helper()
	return r.cdc("psql", "-q", "-At", "-F", ",", "-c", statements)
}

// account is a row: name, balance and the decimals' plain text, amount,
// price and tier, the date born and the timestamp seen as text ("" for
// null), by id.
type account struct {
	name                string
	balance             int64
	amount, price, tier string
	born, seen          string
}

// postgres is SELECT * FROM accounts, price rounded to its column's
// scale, born and seen as delta-rs's rows render a date and a timestamp.
func (r *rig) postgres() map[int64]account {
	r.t.Helper()
	return accounts(r.sql(`SELECT id, name, balance, amount, price::numeric(20,4), tier, to_char(born, 'YYYY-MM-DD'),
		to_char(seen, 'YYYY-MM-DD"T"HH24:MI:SS.US') FROM accounts`), ",")
}

// accounts are the rows of a client's output, fields separated by sep:
// id, name, balance, and the decimals amount, price and tier, born and
// seen if there.
func accounts(rows, sep string) map[int64]account {
	out := map[int64]account{}
	sc := bufio.NewScanner(strings.NewReader(rows))
	for sc.Scan() {
		f := append(strings.Split(sc.Text(), sep), "", "", "", "", "")
		id, _ := strconv.ParseInt(f[0], 10, 64)
		bal, _ := strconv.ParseInt(f[2], 10, 64)
		out[id] = account{name: f[1], balance: bal, amount: f[3], price: f[4], tier: f[5], born: f[6], seen: f[7]}
	}
	return out
}

// withoutTemporal is rows without born and seen: what a table without
// those columns holds.
func withoutTemporal(rows map[int64]account) map[int64]account {
	out := make(map[int64]account, len(rows))
	for id, a := range rows {
		a.born, a.seen = "", ""
		out[id] = a
	}
	return out
}

// delta is table name as delta-rs reads it (DuckDB must agree); a key
// twice fails the test.
func (r *rig) delta(name string) map[int64]account {
	r.t.Helper()
	read := testenv.DeltaRS(r.t, nil, "read", r.dirs[name], "--rows", "--query", "--duckdb")
	testenv.CheckDuckDB(r.t, read)
	var view struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(read, &view); err != nil {
		r.t.Fatal(err)
	}
	out := map[int64]account{}
	for _, row := range view.Rows {
		id := int64(row["id"].(float64))
		if _, twice := out[id]; twice {
			r.t.Errorf("%s: key %d twice", name, id)
		}
		name, _ := row["name"].(string)
		bal, _ := row["balance"].(float64)
		amount, _ := row["amount"].(string) // decimals as plain text of their scale
		price, _ := row["price"].(string)
		tier, _ := row["tier"].(string)
		born, _ := row["born"].(string) // 2026-06-22
		seen, _ := row["seen"].(string) // 2026-06-22T10:15:30.123456 (UTC: the wall clock read as UTC)
		out[id] = account{name: name, balance: int64(bal), amount: amount, price: price, tier: tier, born: born, seen: seen}
	}
	return out
}

// ledgerRows is ledger's note by id (its plain text, as both PostgreSQL
// and delta-rs print a numeric(10,2)) as delta-rs reads table name, or
// PostgreSQL for "": a key twice fails the test.
func (r *rig) ledgerRows(name string) map[string]string {
	r.t.Helper()
	out := map[string]string{}
	if name == "" {
		for line := range strings.Lines(r.sql("SELECT id, note FROM ledger")) {
			id, note, _ := strings.Cut(strings.TrimSpace(line), ",")
			out[id] = note
		}
		return out
	}
	var view struct {
		Rows      []struct{ ID, Note string }
		RowsError string
	}
	if err := json.Unmarshal(testenv.DeltaRS(r.t, nil, "read", r.ledgers[name], "--rows", "--query"), &view); err != nil || view.RowsError != "" {
		r.t.Fatalf("delta-rs reads %s: %v %s", name, err, view.RowsError)
	}
	for _, row := range view.Rows {
		if _, twice := out[row.ID]; twice {
			r.t.Errorf("%s: key %s twice", name, row.ID)
		}
		out[row.ID] = row.Note
	}
	return out
}

// runUntilEqual runs `deltaflow run --until-latest` until every table
// equals its source's (Debezium streams behind the statements), for at
// most a minute.
func (r *rig) runUntilEqual(when string) {
	r.t.Helper()
	want := r.source()
	var ledger map[string]string
	if len(r.ledgers) > 0 {
		ledger = r.ledgerRows("")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r.run(true)
		equal := true
		for name := range r.dirs {
			if !maps.Equal(r.delta(name), r.wantOf(name, want)) {
				equal = false
			}
		}
		for name := range r.ledgers {
			if !maps.Equal(r.ledgerRows(name), ledger) {
				equal = false
			}
		}
		if equal {
			return
		}
		if time.Now().After(deadline) {
			for name := range r.dirs {
				got := r.delta(name)
				r.t.Errorf("%s: %s holds %d rows, the source table %d: %s", when, name, len(got), len(want), scenario.MapDiff(got, r.wantOf(name, want)))
			}
			for name := range r.ledgers {
				got := r.ledgerRows(name)
				r.t.Errorf("%s: %s holds %d rows, ledger %d: %s", when, name, len(got), len(ledger), scenario.MapDiff(got, ledger))
			}
			return
		}
		time.Sleep(time.Second)
	}
}

// wantOf is what table name must hold of the source's rows: born and
// seen only if it has them.
func (r *rig) wantOf(name string, rows map[int64]account) map[int64]account {
	if name == r.temporal {
		return rows
	}
	return withoutTemporal(rows)
}

// run starts deltaflow: with --until-latest, to the end and waits; else
// in the background, returned to be killed.
func (r *rig) run(untilLatest bool) *exec.Cmd {
	r.t.Helper()
	args := []string{"run", "--config", r.config}
	if untilLatest {
		args = append(args, "--until-latest")
	}
	cmd := exec.Command(scenario.Binary(r.t), args...)
	cmd.Env = r.servers.Env("", r.group, "", "127.0.0.1:0")
	if !untilLatest {
		if err := cmd.Start(); err != nil {
			r.t.Fatal(err)
		}
		return cmd
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	return nil
}

// workload runs a round of changes: one key updated many times, deletes,
// deleted keys inserted again, a primary key changed, and one large
// transaction.
func (r *rig) workload(round int) {
	r.t.Helper()
	base := 1000 * (round + 1)
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "UPDATE accounts SET balance = balance + %d, amount = amount - 0.01 WHERE id = 1;\n", i+1)
	}
	fmt.Fprintf(&b, "DELETE FROM accounts WHERE id BETWEEN %d AND %d;\n", 10+round*20, 19+round*20)
	fmt.Fprintf(&b, "INSERT INTO accounts VALUES (%d, 'back', 1), (%d, 'back', 2) ON CONFLICT DO NOTHING;\n", 10+round*20, 11+round*20)
	fmt.Fprintf(&b, "UPDATE accounts SET id = %d WHERE id = %d;\n", base+999, 100+round)
	fmt.Fprintf(&b, "BEGIN; INSERT INTO accounts SELECT g, 'tx' || g, g, -g * 0.01, g / 3.0 FROM generate_series(%d, %d) g; "+
		"UPDATE accounts SET name = 'tx-updated' WHERE id BETWEEN %d AND %d; COMMIT;\n", base, base+500, base, base+250)
	for range 50 {
		id := 1 + r.rng.IntN(200)
		fmt.Fprintf(&b, "UPDATE accounts SET balance = %d, name = 'r%d', amount = %d.%02d, price = %d.%06d, tier = %d * 1.5 WHERE id = %d;\n",
			r.rng.IntN(1e6), round, r.rng.IntN(2e10)-1e10, r.rng.IntN(100), r.rng.IntN(1e6), r.rng.IntN(1e6), r.rng.IntN(3)-1, id)
	}
	if len(r.ledgers) > 0 { // ledger's keys: updated, deleted, inserted again, moved
		fmt.Fprintf(&b, "UPDATE ledger SET note = 'u%d' WHERE id BETWEEN -10 AND 10;\n", round)
		fmt.Fprintf(&b, "DELETE FROM ledger WHERE id BETWEEN %d AND %d.99;\n", round*5-30, round*5-28)
		fmt.Fprintf(&b, "INSERT INTO ledger VALUES (%d.75, 'back%d') ON CONFLICT DO NOTHING;\n", round*5-30, round)
		fmt.Fprintf(&b, "UPDATE ledger SET id = %d.01 WHERE id = %d.25;\n", 1000+round, round*5-21)
	}
	r.sql(b.String())
}

// TestDebeziumPostgres: a PostgreSQL table (a snapshot of 200 rows, then
// updates of one key many times, deletes, re-inserts, a primary key
// change, a 500-row transaction, random updates) streamed by the real
// Debezium into three topics (change events through the JSON converter
// with and without schemas, read with cdc: debezium, the latter ordered
// by its WAL position, source.lsn, by default; row images from
// ExtractNewRecordState, deletes marked __deleted, read with delete_when)
// becomes, in the three upsert tables, exactly SELECT * FROM accounts as
// delta-rs and DuckDB read them (with its date and timestamp columns,
// Debezium's Date and MicroTimestamp numbers, in the table of events with
// schemas); then again with deltaflow SIGKILLed again
// and again while the changes stream, read by Spark 3.5 too. A table keyed
// by a numeric(10,2), ledger (updates, deletes, re-inserts, key changes),
// streamed with and without schemas into tables whose key column reads
// the record key (kafka.key.id: Debezium's base64 decimal), becomes
// exactly SELECT * FROM ledger each time too.
func TestDebeziumPostgres(t *testing.T) {
	r := newRig(t)
	r.workload(0)
	r.runUntilEqual("after the first round")

	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := 1; round <= 4; round++ {
			r.workload(round)
			time.Sleep(300 * time.Millisecond)
		}
	}()
	kills := rand.New(rand.NewPCG(5, 6)) // the workload's goroutine has r.rng
	for i := range 5 {
		cmd := r.run(false)
		time.Sleep(time.Duration(1500+kills.IntN(1500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		_ = cmd.Wait()
	}
	<-done
	r.runUntilEqual("after the SIGKILLs")

	// Spark 3.5 reads every table as PostgreSQL holds the table (its
	// id, name and balance: upsert_check.py's columns).
	py, dir := testenv.Spark(t)
	var spark struct {
		Before map[string][]map[string]any
	}
	testenv.RunSparkJSON(t, &spark, py, dir, "upsert_check.py", slices.Collect(maps.Values(r.dirs))...)
	want := r.postgres()
	for id, a := range want {
		want[id] = account{name: a.name, balance: a.balance}
	}
	for name, d := range r.dirs {
		got := map[int64]account{}
		for _, row := range spark.Before[d] {
			got[int64(row["id"].(float64))] = account{name: row["name"].(string), balance: int64(row["balance"].(float64))}
		}
		if !maps.Equal(got, want) || len(spark.Before[d]) != len(want) {
			t.Errorf("Spark reads %d rows of %s, PostgreSQL holds %d: %s", len(spark.Before[d]), name, len(want), scenario.MapDiff(got, want))
		}
	}
}
