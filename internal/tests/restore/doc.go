// Package restore holds the test of `deltaflow restore` against Spark's own
// RESTORE TABLE (pyspark 3.5.1 + delta-spark 3.2.0, scripts/spark): one JVM
// builds a table with appends, OPTIMIZE, deletion vectors and a schema
// change, restores copies of it both ways and reads them back; the test
// then checks that both leave the same live files, rows, schema and RESTORE
// commit, that delta-rs and DuckDB read the same rows, and that both refuse
// a version whose files VACUUM deleted.
package restore
