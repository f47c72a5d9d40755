package formats

import (
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestAvroTypesMatchFromAvro: Spark's from_avro (spark-avro 3.5.1) is the
// oracle of the Avro type mapping. A topic confluent-kafka's
// AvroSerializer wrote (a field of every Avro type a column is derived
// from, decimals as bytes and fixed of up to 9, 18 and 38 digits among
// them) goes into a registry table deltaflow derives the columns of; Spark
// decodes the same records' bodies with from_avro and reads the table:
// every column has the type from_avro gives it, both hold the same rows,
// and filters on the decimal columns find as many rows in the table (with
// Delta's data skipping over its stats, and the Parquet reader's over its
// row groups' bounds) as in from_avro's.
func TestAvroTypesMatchFromAvro(t *testing.T) {
	r := newRegistryTopic(t, "oracle-readings", "avro")
	r.uri = filepath.Join(t.TempDir(), "readings") // Spark reads a local table
	schema := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc")
	r.produce("avroproduce.py", 7, registryBad, "--schema", schema)
	r.run()
	py, dir := testenv.Spark(t)
	var got struct {
		OracleTypes, TableTypes map[string]string
		OracleRows, TableRows   int
		Missing, Extra          []map[string]any
		FilterChecks            int
		FilterMismatches        []map[string]any
	}
	testenv.RunSparkJSON(t, &got, py, dir, "avro_oracle.py", strings.Join(r.brokers, ","), r.topic, schema, r.uri)
	if !maps.Equal(got.OracleTypes, got.TableTypes) {
		t.Errorf("column types differ from from_avro's:\n table   %v\n oracle  %v", got.TableTypes, got.OracleTypes)
	}
	if got.OracleRows != registryCount || got.TableRows != registryCount || len(got.Missing) > 0 || len(got.Extra) > 0 {
		t.Errorf("from_avro decodes %d rows, the table holds %d (want %d each); missing from the table %v, extra %v",
			got.OracleRows, got.TableRows, registryCount, got.Missing, got.Extra)
	}
	if got.FilterChecks == 0 || len(got.FilterMismatches) > 0 {
		t.Errorf("%d filters on decimal columns compared; these find other rows in the table than in from_avro's: %v",
			got.FilterChecks, got.FilterMismatches)
	}
	t.Log("types: " + fmt.Sprint(got.TableTypes) + ", rows " + strconv.Itoa(got.TableRows) +
		", decimal filters " + strconv.Itoa(got.FilterChecks))
}
